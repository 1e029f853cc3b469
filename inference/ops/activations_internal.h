// SIMD parts of activations.cc (activations_simd.cc). Not for use outside
// inference/ops. Bit-identical to the scalar loops they replace.
#ifndef RINGLM_INFERENCE_OPS_ACTIVATIONS_INTERNAL_H_
#define RINGLM_INFERENCE_OPS_ACTIVATIONS_INTERNAL_H_

#include <cstdint>

namespace ringlm {

// Lanes of ggml's AVX2 vectors: the group size of SwiGlu and SoftmaxInPlace.
inline constexpr int64_t kActivationGroup = 8;

// For i < 8 * n_groups: out[i] = silu_v(gate[i]) * up[i], where silu_v(x) =
// x / (1 + ExpGgmlVector(0 - x)). `out` may alias `gate` or `up`.
void SwiGluGroups8(const float* gate, const float* up, float* out, int64_t n_groups);

// For i < 8 * n_groups: x[i] = ExpGgmlVector(x[i] - max); returns the sum
// over groups, in order, of (double) (each group's 8 values reduced by
// halving in float).
double SoftmaxExpGroups8(float* x, float max, int64_t n_groups);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_ACTIVATIONS_INTERNAL_H_
