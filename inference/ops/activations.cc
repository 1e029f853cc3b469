#include "inference/ops/activations.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <limits>

#include "inference/ops/activations_internal.h"
#include "inference/ops/matmul_internal.h"

namespace ringlm {

float ExpGgmlVector(float x) {
  // Each line mirrors one step of ggml_v_expf's AVX2 form (fmadd = std::fma,
  // fnmadd(a, b, c) = fma(-a, b, c)); 2^n is built from z's low bits.
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const uint32_t e = std::bit_cast<uint32_t>(z) << 23;
  const float k = std::bit_cast<float>(e + std::bit_cast<uint32_t>(1.0f));  // 2^n
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, 0x1.ffffecp-1f * b);
  // NaN compares false: it takes the first return (and stays NaN).
  if (!(std::fabs(n) > 126.0f)) return std::fma(k, j, k);
  // 2^n is not a normal float: split it into two factors.
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = std::bit_cast<float>(g + 0x7f000000u);
  const float s2 = std::bit_cast<float>(e - g);
  if (std::fabs(n) > 192.0f) return s1 * s1;  // 0 or +inf
  return std::fma(s2, j, s2) * s1;
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
  // Groups of 8 in SIMD (activations_simd.cc), bit-identical to: per group,
  // x[l] = ExpGgmlVector(x[l] - max), then sum += (double) halving sum.
  const int64_t n_groups = n / kActivationGroup;
  double sum = SoftmaxExpGroups8(x, max, n_groups);
  // The last, partial group: ggml's row goes on with masked entries, whose
  // exps are 0.
  const int64_t i = n_groups * kActivationGroup;
  if (i < n) {
    float group[kActivationGroup] = {};
    for (int64_t k = i; k < n; ++k) group[k - i] = x[k] = ExpGgmlVector(x[k] - max);
    sum += static_cast<double>(ReduceLanes<kActivationGroup>(group));
  }
  const float scale = static_cast<float>(1.0 / sum);
  for (int64_t k = 0; k < n; ++k) x[k] *= scale;
}

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

void SwiGlu(const float* gate, const float* up, float* out, int64_t n) {
  // Groups of 8: ggml_v_silu(gate) * up, in SIMD (activations_simd.cc).
  const int64_t n_groups = n / kActivationGroup;
  SwiGluGroups8(gate, up, out, n_groups);
  for (int64_t i = n_groups * kActivationGroup; i < n; ++i) {
    const float s = Silu(gate[i]);
    out[i] = s * up[i];
  }
}

}  // namespace ringlm
