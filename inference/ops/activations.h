// Softmax and SiLU/SwiGLU with the numerics of llama.cpp b4748's CPU backend
// built for x86 AVX2 + FMA (no AVX-512), the order ringlm follows on every
// CPU: values are processed in groups of 8 with ggml_v_expf's AVX2 form (a
// polynomial exp, not libm's); SwiGlu's tail (n % 8 values) uses libm expf,
// exactly as ggml does. Pure functions, thread-safe.
#ifndef RINGLM_INFERENCE_OPS_ACTIVATIONS_H_
#define RINGLM_INFERENCE_OPS_ACTIVATIONS_H_

#include <cstdint>

namespace ringlm {

// ggml_v_expf for one lane, in its AVX2 + FMA form: 2^n * (1 + j) rounded
// once, where n = round(x / ln 2) and j a polynomial in the remainder; max
// error about 1.5 ulp; returns +inf above ~88.38 and 0 below ~-103.97; NaN
// stays NaN. (The AVX-512 form rounds 1 + j first and so differs in the
// last bit for some x.)
float ExpGgmlVector(float x);

// In place: x[i] = exp(x[i] - max) * (float)(1.0 / sum), where the exps are
// ExpGgmlVector's and sum adds in double the float sum of each group of 8
// exps (reduced by halving): ggml_vec_soft_max_f32 followed by
// ggml_vec_scale_f32 over a row that llama.cpp pads with -inf (masked)
// entries to a multiple of 32, so a last partial group sums its exps with
// zeros in the missing lanes and no value takes a libm tail. Callers that
// scale scores (attention) do so before, as ggml does.
// Precondition: n >= 1 and at least one x[i] > -inf.
void SoftmaxInPlace(float* x, int64_t n);

// x / (1 + expf(-x)) with libm expf (ggml_silu_f32).
float Silu(float x);

// out[i] = silu(gate[i]) * up[i]: ggml_vec_silu_f32 (vector exp for groups
// of 8, Silu for the tail) then ggml_vec_mul_f32. `out` may alias `gate` or
// `up`.
void SwiGlu(const float* gate, const float* up, float* out, int64_t n);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_ACTIVATIONS_H_
