#include "inference/ops/activations.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "inference/ops/activations_internal.h"

namespace ringlm {
namespace {

constexpr int64_t kGroup = 16;  // AVX-512 lanes

}  // namespace

float ExpGgmlVector(float x) {
  // Each line mirrors one intrinsic of ggml_v_expf (fmadd = std::fma,
  // fnmadd(a, b, c) = fma(-a, b, c)).
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  if (std::isnan(n)) return n;
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : std::numeric_limits<float>::infinity();
  // _mm512_scalef_ps(j, n) = j * 2^floor(n), rounded once; n is integral here.
  return std::ldexp(j, static_cast<int>(n));
}

void SoftmaxInPlace(float* x, int64_t n) {
  assert(n >= 1);
  // ggml's MAX macro, in 8 chains instead of one (a hot, latency-bound loop
  // in decode at depth). Only a NaN or the sign of a zero can make the
  // order matter, and neither changes the outputs: a NaN makes the sum and
  // so every output NaN, and x - (+0) equals x - (-0) for x != 0 (both
  // exp(+-0) = 1 for x = 0).
  float lanes[8];
  std::fill(lanes, lanes + 8, -std::numeric_limits<float>::infinity());
  int64_t m = 0;
  for (; m + 8 <= n; m += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] = lanes[l] > x[m + l] ? lanes[l] : x[m + l];
  }
  for (; m < n; ++m) lanes[0] = lanes[0] > x[m] ? lanes[0] : x[m];
  float max = lanes[0];
  for (int l = 1; l < 8; ++l) max = max > lanes[l] ? max : lanes[l];
  // Groups of 16 in SIMD (activations_simd.cc), bit-identical to: per group,
  // x[l] = ExpGgmlVector(x[l] - max), then sum += (double) halving sum.
  const int64_t n_groups = n / kGroup;
  double sum = SoftmaxExpGroups16(x, max, n_groups);
  int64_t i = n_groups * kGroup;
  for (; i < n; ++i) {
    const float val = std::exp(x[i] - max);
    sum += static_cast<double>(val);
    x[i] = val;
  }
  const float scale = static_cast<float>(1.0 / sum);
  for (int64_t k = 0; k < n; ++k) x[k] *= scale;
}

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

void SwiGlu(const float* gate, const float* up, float* out, int64_t n) {
  // Groups of 16: ggml_v_silu(gate) * up, in SIMD (activations_simd.cc).
  const int64_t n_groups = n / kGroup;
  SwiGluGroups16(gate, up, out, n_groups);
  for (int64_t i = n_groups * kGroup; i < n; ++i) {
    const float s = Silu(gate[i]);
    out[i] = s * up[i];
  }
}

}  // namespace ringlm
