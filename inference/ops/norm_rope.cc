#include "inference/ops/norm_rope.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

namespace ringlm {

void RmsNorm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  assert(n >= 1);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float square = x[i] * x[i];
    sum += static_cast<double>(square);
  }
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) {
    const float normed = x[i] * scale;
    out[i] = normed * weight[i];
  }
}

namespace {

// Unfused rotation (separately rounded products).
inline void RotatePlain(float& a, float& b, float c, float s) {
  const float x0 = a;
  const float x1 = b;
  const float p0 = x0 * c;
  const float p1 = x1 * s;
  const float p2 = x0 * s;
  const float p3 = x1 * c;
  a = p0 - p1;
  b = p2 + p3;
}

// The contraction gcc applies to ggml's loop.
inline void RotateFused(float& a, float& b, float c, float s) {
  const float x0 = a;
  const float x1 = b;
  a = std::fma(x0, c, -(x1 * s));
  b = std::fma(x0, s, x1 * c);
}

// ggml's rope_yarn_ramp for pair i: 1 below low, 0 above high.
float YarnRamp(float low, float high, int64_t i) {
  const float y = (static_cast<float>(i) - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

}  // namespace

void YarnCorrDims(int n_rot, uint32_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                  float* low, float* high) {
  auto dim = [&](float beta) {
    const float ratio = static_cast<float>(n_ctx_orig) / (beta * 2.0f * static_cast<float>(M_PI));
    return static_cast<float>(n_rot) * std::log(ratio) / (2.0f * std::log(freq_base));
  };
  *low = std::max(0.0f, std::floor(dim(beta_fast)));
  *high = std::min(static_cast<float>(n_rot - 1), std::ceil(dim(beta_slow)));
}

void ApplyRope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
               float freq_base, RopeStyle style, const float* freq_factors, float attn_factor,
               const RopeYarn& yarn, RopeLoop loop) {
  assert(n_rot > 0 && n_rot % 2 == 0 && n_rot <= head_dim);
  const int64_t n_pairs = n_rot / 2;
  thread_local std::vector<float> cos_sin;
  if (static_cast<int64_t>(cos_sin.size()) < 2 * n_pairs) cos_sin.resize(2 * n_pairs);
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < n_pairs; ++i) {
    const float extrap = freq_factors != nullptr ? theta / freq_factors[i] : theta;
    const float interp = yarn.freq_scale * extrap;
    float angle = interp;
    float mscale = attn_factor;
    if (yarn.ext_factor != 0.0f) {
      const float mix = YarnRamp(yarn.corr_low, yarn.corr_high, i) * yarn.ext_factor;
      angle = std::fma(interp, 1.0f - mix, extrap * mix);
      mscale *= std::fma(0.1f, std::log(1.0f / yarn.freq_scale), 1.0f);
    }
    cos_sin[2 * i] = std::cos(angle) * mscale;
    cos_sin[2 * i + 1] = std::sin(angle) * mscale;
    theta *= theta_scale;
  }
  const int64_t fused_pairs = loop == RopeLoop::kInPlace  ? 0
                              : style == RopeStyle::kNeox ? n_pairs
                                                          : n_pairs - n_pairs % 4;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* head = x + h * head_dim;
    for (int64_t i = 0; i < n_pairs; ++i) {
      float& a = style == RopeStyle::kNeox ? head[i] : head[2 * i];
      float& b = style == RopeStyle::kNeox ? head[i + n_pairs] : head[2 * i + 1];
      if (i < fused_pairs) {
        RotateFused(a, b, cos_sin[2 * i], cos_sin[2 * i + 1]);
      } else {
        RotatePlain(a, b, cos_sin[2 * i], cos_sin[2 * i + 1]);
      }
    }
  }
}

}  // namespace ringlm
