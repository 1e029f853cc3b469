#include "inference/ops/activations.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "inference/ops/activations_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// GCC 12's own AVX-512 headers trip this warning in _mm512_cvtss_f32.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace ringlm {
namespace {

TEST(ExpGgmlVectorTest, CloseToExpAndSaturates) {
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    const double expected = std::exp(static_cast<double>(x));
    ASSERT_NEAR(ExpGgmlVector(x), expected, 3e-7 * expected) << x;
  }
  // Subnormal results: within a couple of units of the smallest subnormal.
  for (float x = -103.0f; x < -88.0f; x += 0.0137f) {
    ASSERT_NEAR(ExpGgmlVector(x), std::exp(static_cast<double>(x)), 3e-45) << x;
  }
  EXPECT_EQ(ExpGgmlVector(0.0f), 1.0f);
  EXPECT_EQ(ExpGgmlVector(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(ExpGgmlVector(-200.0f), 0.0f);
  EXPECT_EQ(ExpGgmlVector(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(ExpGgmlVector(NAN)));
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The same polynomial evaluated with AVX-512 instructions (one value in lane
// 0), to check the scalar emulation bit for bit on machines that have them.
__attribute__((target("avx512f,avx512dq,fma"))) float ExpAvx512(float xs) {
  const __m512 x = _mm512_set1_ps(xs);
  const __m512 r = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
  const __m512 n = _mm512_sub_ps(z, r);
  const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                    _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 inner =
      _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f));
  const __m512 mid =
      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f));
  const __m512 low = _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f));
  const __m512 j = _mm512_fmadd_ps(_mm512_fmadd_ps(inner, u, mid), u, low);
  const float nn = _mm512_cvtss_f32(n);
  if (std::fabs(nn) > 192.0f) return nn <= 0.0f ? 0.0f : INFINITY;
  return _mm512_cvtss_f32(_mm512_scalef_ps(j, n));
}

TEST(ExpGgmlVectorTest, BitExactWithAvx512) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512dq")) {
    GTEST_SKIP() << "no AVX-512 on this CPU";
  }
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(-110.0f, 95.0f);
  for (int i = 0; i < 1000000; ++i) {
    const float x = dist(rng);
    ASSERT_EQ(std::bit_cast<uint32_t>(ExpGgmlVector(x)), std::bit_cast<uint32_t>(ExpAvx512(x)))
        << x;
  }
}
#endif

TEST(SoftmaxTest, MatchesDoublePrecision) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int64_t n : {1, 2, 15, 16, 17, 33, 100, 512}) {
    std::vector<float> x(n);
    for (auto& v : x) v = dist(rng);
    std::vector<double> expected(n);
    double max = -INFINITY, sum = 0.0;
    for (float v : x) max = std::max<double>(max, v);
    for (int64_t i = 0; i < n; ++i) sum += expected[i] = std::exp(x[i] - max);
    SoftmaxInPlace(x.data(), n);
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(x[i], expected[i] / sum, 1e-6 * expected[i] / sum + 1e-12) << n << " " << i;
      total += x[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST(SoftmaxTest, MaskedEntriesBecomeZero) {
  std::vector<float> x = {1.0f, -INFINITY, 1.0f, -INFINITY};
  SoftmaxInPlace(x.data(), 4);
  EXPECT_EQ(x[0], 0.5f);
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_EQ(x[2], 0.5f);
  EXPECT_EQ(x[3], 0.0f);
}

TEST(SoftmaxTest, TailUsesLibmExpAndGroupsUseVectorExp) {
  // 17 values: one group of 16 through ExpGgmlVector, one tail value via expf.
  std::vector<float> x(17);
  for (int i = 0; i < 17; ++i) x[i] = -0.37f * i;
  std::vector<float> y = x;
  SoftmaxInPlace(y.data(), 17);
  double sum = 0.0;
  float group[16];
  for (int i = 0; i < 16; ++i) group[i] = ExpGgmlVector(x[i] - 0.0f);
  for (int w = 8; w >= 1; w /= 2) {
    for (int i = 0; i < w; ++i) group[i] += group[i + w];
  }
  sum += group[0];
  const float tail = std::exp(x[16]);
  sum += tail;
  const float scale = static_cast<float>(1.0 / sum);
  EXPECT_EQ(y[3], ExpGgmlVector(x[3]) * scale);
  EXPECT_EQ(y[16], tail * scale);
}

TEST(SiluTest, SiluAndSwiGluMatchDoublePrecision) {
  EXPECT_EQ(Silu(0.0f), 0.0f);
  std::mt19937 rng(13);
  std::normal_distribution<float> dist(0.0f, 5.0f);
  for (int64_t n : {1, 16, 31, 172}) {
    std::vector<float> gate(n), up(n), out(n);
    for (auto& v : gate) v = dist(rng);
    for (auto& v : up) v = dist(rng);
    SwiGlu(gate.data(), up.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double g = gate[i];
      const double expected = g / (1.0 + std::exp(-g)) * up[i];
      ASSERT_NEAR(out[i], expected, 1e-6 * std::fabs(expected) + 1e-30) << i;
      ASSERT_NEAR(Silu(gate[i]), g / (1.0 + std::exp(-g)), 1e-6 * std::fabs(g) + 1e-30);
    }
    // Tail values (past the last group of 16) are exactly Silu * up.
    for (int64_t i = n - n % 16; i < n; ++i) ASSERT_EQ(out[i], Silu(gate[i]) * up[i]);
  }
  // In place over `gate`.
  std::vector<float> g = {1.0f, -2.0f, 3.0f};
  const std::vector<float> u = {2.0f, 2.0f, 2.0f};
  std::vector<float> expected(3);
  SwiGlu(g.data(), u.data(), expected.data(), 3);
  SwiGlu(g.data(), u.data(), g.data(), 3);
  EXPECT_EQ(g, expected);
}

// The SIMD group kernels on every compiled target equal the per-lane scalar
// definitions bit for bit, including lanes that need the scalar fallback
// (huge, tiny, infinite and NaN inputs).
TEST(ActivationsSimdTest, GroupsMatchScalarDefinitionOnEveryTarget) {
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 8.0f);
  const int64_t n_groups = 64;
  std::vector<float> gate(16 * n_groups), up(16 * n_groups);
  for (float& v : gate) v = dist(rng);
  for (float& v : up) v = dist(rng);
  gate[5] = 95.0f;    // exp(-x) underflows past 2^-126
  gate[40] = -95.0f;  // exp(-x) overflows
  gate[77] = std::numeric_limits<float>::infinity();
  gate[100] = NAN;
  gate[200] = -88.5f;
  gate[201] = 87.6f;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<float> out(gate.size());
    SwiGluGroups16(gate.data(), up.data(), out.data(), n_groups);
    for (size_t i = 0; i < gate.size(); ++i) {
      const float g = gate[i];
      const float want = (g / (1.0f + ExpGgmlVector(0.0f - g))) * up[i];
      ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(want))
          << hwy::TargetName(target) << " swiglu i=" << i << " gate=" << g;
    }
    std::vector<float> x(gate.begin(), gate.end());
    x[100] = -1e30f;  // softmax input: finite, some far below the max
    x[77] = -200.0f;
    const float max = 95.0f;
    std::vector<float> want_x(x.size());
    double want_sum = 0.0;
    for (int64_t g = 0; g < n_groups; ++g) {
      float group[16];
      for (int l = 0; l < 16; ++l) {
        group[l] = ExpGgmlVector(x[16 * g + l] - max);
        want_x[16 * g + l] = group[l];
      }
      for (int width = 8; width >= 1; width /= 2) {
        for (int l = 0; l < width; ++l) group[l] = group[l] + group[l + width];
      }
      want_sum += static_cast<double>(group[0]);
    }
    const double sum = SoftmaxExpGroups16(x.data(), max, n_groups);
    ASSERT_EQ(std::bit_cast<uint64_t>(sum), std::bit_cast<uint64_t>(want_sum))
        << hwy::TargetName(target);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(x[i]), std::bit_cast<uint32_t>(want_x[i]))
          << hwy::TargetName(target) << " softmax i=" << i;
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace ringlm
