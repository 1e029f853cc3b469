// Gemma 2's element-wise math, with the numerics of llama.cpp c392e50's CPU
// backend: the GELU of its gated feed-forward (ggml_gelu through an f16
// lookup table) and tanh soft-capping (of attention scores and of logits).
// All functions are pure and thread-safe; `n` >= 0; `x`/`out` may alias
// their inputs element for element.
#ifndef RINGLM_INFERENCE_GEMMA_OPS_H_
#define RINGLM_INFERENCE_GEMMA_OPS_H_

#include <cstdint>

namespace ringlm {

// ggml_gelu on x86 (GGML_GELU_FP16): 0 for x <= -10, x for x >= 10, else the
// tanh-approximation GELU of x rounded to f16, evaluated in float (with the
// fused multiply-add ggml's compiler forms in 1 + 0.044715 x^2) and rounded
// to f16 again: a table of the 2^16 halves.
float GeluF16Table(float x);

// out[i] = GeluF16Table(gate[i]) * up[i]: llama.cpp's parallel GELU
// feed-forward (ggml_gelu of the gate, then ggml_mul by the up projection).
void GeluGlu(const float* gate, const float* up, float* out, int64_t n);

// x[i] = tanh(x[i] * (1 / cap)) * cap, in float: ggml_scale, ggml_tanh,
// ggml_scale as Gemma 2's graph applies them. Precondition: cap > 0.
void SoftCapInPlace(float* x, int64_t n, float cap);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_GEMMA_OPS_H_
