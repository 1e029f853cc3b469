// Softmax and SiLU/SwiGLU with the numerics of llama.cpp b4748's CPU backend
// on an AVX-512 (F+DQ) build: values are processed in groups of 16 with
// ggml_v_expf (a polynomial exp, not libm's); the tail (n % 16 values) uses
// libm expf, exactly as ggml does. Pure functions, thread-safe.
#ifndef RINGLM_INFERENCE_OPS_ACTIVATIONS_H_
#define RINGLM_INFERENCE_OPS_ACTIVATIONS_H_

#include <cstdint>

namespace ringlm {

// ggml_v_expf for one lane (AVX-512 variant): max error about 1.5 ulp;
// returns +inf above ~88.38 and 0 below ~-103.97; NaN stays NaN.
float ExpGgmlVector(float x);

// In place: x[i] = exp(x[i] - max) * (float)(1.0 / sum), where sum adds in
// double the float sum of each group of 16 exps (reduced by halving), then
// each tail exp: ggml_vec_soft_max_f32 followed by ggml_vec_scale_f32.
// Callers that scale/mask scores (attention) do so before, as ggml does.
// Precondition: n >= 1 and at least one x[i] > -inf.
void SoftmaxInPlace(float* x, int64_t n);

// x / (1 + expf(-x)) with libm expf (ggml_silu_f32).
float Silu(float x);

// out[i] = silu(gate[i]) * up[i]: ggml_vec_silu_f32 (vector exp for groups
// of 16, Silu for the tail) then ggml_vec_mul_f32. `out` may alias `gate` or
// `up`.
void SwiGlu(const float* gate, const float* up, float* out, int64_t n);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_ACTIVATIONS_H_
