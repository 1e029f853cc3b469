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

// YaRN, as ggml's rope takes it (freq_scale, ext_factor and the correction
// dims of ggml_rope_yarn_corr_dims). The defaults change no angle.
struct RopeYarn {
  float freq_scale = 1.0f;  // 1 / rope.scaling.factor; 1 without scaling
  float ext_factor = 0.0f;  // 1 for YaRN: ramps extrapolation into interpolation
  float corr_low = 0.0f;    // the ramp's first and last pair, from
  float corr_high = 0.0f;   // YarnCorrDims
};

// ggml_rope_yarn_corr_dims: the pairs whose wavelength fits beta_fast and
// beta_slow times into n_ctx_orig, floored and ceiled, clamped to
// [0, n_rot - 1]. Plain float arithmetic, as ggml-base computes it.
void YarnCorrDims(int n_rot, uint32_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                  float* low, float* high);

// Which of ggml's rope loops to follow. Out of place, gcc's vectorized loop
// contracts the rotation with FMA (but on a kNormal tail, see ApplyRope); in
// place (ggml-alloc's choice where the rope's input has no other reader,
// as DeepSeek's q_pe and k_pe after their ggml_cont) its alias check takes
// the scalar loop, which computes every pair unfused.
enum class RopeLoop {
  kOutOfPlace,
  kInPlace,
};

// Rotates one token's `n_heads` heads of `head_dim` floats (contiguous) in
// place at position `pos`, as ggml's rope f32 with freq_scale 1, ext_factor 0,
// attn_factor 1: theta_scale = powf(freq_base, -2.0f / n_rot); for pair i,
// theta_i = (float)pos * theta_scale^i (multiplied up iteratively in float);
// cos/sin via cosf/sinf. Values past n_rot in each head are left unchanged.
// Rotation, as gcc 12 -O3 -march=native (the reference build) compiles ggml's
// loop: out0 = fma(x0, cos, -(x1*sin)), out1 = fma(x0, sin, x1*cos); in
// kNormal style pairs past the last multiple of 4 use unfused arithmetic,
// and with RopeLoop::kInPlace every pair does.
// LongRoPE (Phi-3), as ggml's rope with freq_factors and attn_factor: pair
// i's angle is theta_i / freq_factors[i], and cos/sin are multiplied by
// attn_factor. YaRN (DeepSeek), as ggml's rope_yarn: the angle becomes
// freq_scale * theta_i, and with ext_factor != 0 that is mixed with theta_i
// by pair i's ramp and cos/sin are multiplied by 1 + 0.1 ln(1 / freq_scale)
// too (the mix and that factor fused as gcc contracts them with FMA). The
// defaults change nothing (x / 1, 1 * x and x * 1 are exact). The rotated
// values of a head are its first n_rot; pass x + offset to rotate others.
// Preconditions: n_rot even, 0 < n_rot <= head_dim; freq_factors, when not
// null, holds n_rot / 2 values.
void ApplyRope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
               float freq_base, RopeStyle style, const float* freq_factors = nullptr,
               float attn_factor = 1.0f, const RopeYarn& yarn = {},
               RopeLoop loop = RopeLoop::kOutOfPlace);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_NORM_ROPE_H_
