// RMSNorm and rotary position embedding, with ggml's (llama.cpp b4748) f32
// numerics. Pure functions, thread-safe; no allocation except a small
// per-thread cos/sin table in ApplyRope.
#ifndef RINGLM_INFERENCE_OPS_NORM_ROPE_H_
#define RINGLM_INFERENCE_OPS_NORM_ROPE_H_

#include <cstdint>

namespace ringlm {

// out[i] = (x[i] * scale) * weight[i], scale = 1.0f / sqrtf(mean + eps) where
// mean = (float)(sum_i double(x[i] * x[i]) / n): ggml's rms_norm followed by
// its mul (two roundings). `out` may alias `x`. Precondition: n >= 1.
void RmsNorm(const float* x, const float* weight, float* out, int64_t n, float eps);

enum class RopeStyle {
  kNormal,  // rotates (x[2i], x[2i+1]): llama (GGML_ROPE_TYPE_NORM)
  kNeox,    // rotates (x[i], x[i + n_rot/2]): qwen2 and others (GGML_ROPE_TYPE_NEOX)
};

// Rotates one token's `n_heads` heads of `head_dim` floats (contiguous) in
// place at position `pos`, as ggml's rope f32 with freq_scale 1, ext_factor 0,
// attn_factor 1: theta_scale = powf(freq_base, -2.0f / n_rot); for pair i,
// theta_i = (float)pos * theta_scale^i (multiplied up iteratively in float);
// cos/sin via cosf/sinf. Values past n_rot in each head are left unchanged.
// Rotation, as gcc 12 -O3 -march=native (the reference build) compiles ggml's
// loop: out0 = fma(x0, cos, -(x1*sin)), out1 = fma(x0, sin, x1*cos); in
// kNormal style pairs past the last multiple of 4 use unfused arithmetic.
// LongRoPE (Phi-3), as ggml's rope with freq_factors and attn_factor: pair
// i's angle is theta_i / freq_factors[i], and cos/sin are multiplied by
// attn_factor. The defaults change nothing (x / 1 and x * 1 are exact).
// Preconditions: n_rot even, 0 < n_rot <= head_dim; freq_factors, when not
// null, holds n_rot / 2 values.
void ApplyRope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
               float freq_base, RopeStyle style, const float* freq_factors = nullptr,
               float attn_factor = 1.0f);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_NORM_ROPE_H_
