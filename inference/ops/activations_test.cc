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

// ringlm follows the AVX2 form of ggml_v_expf (2^n * (1 + j) rounded once),
// not its AVX-512 form (the polynomial's 1 + j rounded, then scaled by 2^n
// exactly), which the engine followed before; the two differ in the last
// bit for some inputs.
TEST(ExpGgmlVectorTest, IsTheAvx2Form) {
  int differing = 0;
  for (float x = -20.0f; x < 20.0f; x += 0.001f) {
    // The AVX-512 form: j + 1 rounded first, then an exact scaling by 2^n.
    const float r = 0x1.8p23f;
    const float z = std::fma(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j512 = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                         std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                                u, std::fma(0x1.ffffecp-1f, b, 1.0f));
    if (ExpGgmlVector(x) != std::ldexp(j512, static_cast<int>(n))) ++differing;
  }
  // The two forms differ in the last bit for a few percent of inputs: the
  // test would not tell them apart otherwise.
  EXPECT_GT(differing, 100);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The polynomial evaluated with AVX2 + FMA instructions (one value in every
// lane), as ggml's AVX2 build evaluates it, to check the scalar emulation bit
// for bit, including the split 2^n of the range ends.
__attribute__((target("avx2,fma"))) float ExpAvx2(float xs) {
  const __m256 x = _mm256_set1_ps(xs);
  const __m256 r = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                    _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 inner =
      _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f));
  const __m256 mid =
      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f));
  const __m256 low = _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b);
  const __m256 j = _mm256_fmadd_ps(_mm256_fmadd_ps(inner, u, mid), u, low);
  const float nn = _mm_cvtss_f32(_mm256_castps256_ps128(n));
  if (!(std::fabs(nn) > 126.0f)) {
    return _mm_cvtss_f32(_mm256_castps256_ps128(_mm256_fmadd_ps(k, j, k)));
  }
  const __m256i g = _mm256_set1_epi32(nn <= 0.0f ? static_cast<int>(0x82000000u) : 0);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
  if (std::fabs(nn) > 192.0f) return _mm_cvtss_f32(_mm256_castps256_ps128(_mm256_mul_ps(s1, s1)));
  return _mm_cvtss_f32(_mm256_castps256_ps128(_mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1)));
}

TEST(ExpGgmlVectorTest, BitExactWithAvx2) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    GTEST_SKIP() << "no AVX2/FMA on this CPU";
  }
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(-110.0f, 95.0f);
  for (int i = 0; i < 1000000; ++i) {
    const float x = dist(rng);
    ASSERT_EQ(std::bit_cast<uint32_t>(ExpGgmlVector(x)), std::bit_cast<uint32_t>(ExpAvx2(x))) << x;
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

TEST(SoftmaxTest, LastPartialGroupUsesVectorExpAndSumsWithZeros) {
  // 11 values: one group of 8, then 3 values summed as a group of 8 whose
  // other lanes are 0 (llama.cpp's masked padding): no libm exp anywhere.
  std::vector<float> x(11);
  for (int i = 0; i < 11; ++i) x[i] = -0.37f * i;
  std::vector<float> y = x;
  SoftmaxInPlace(y.data(), 11);
  auto halving = [](float* g) {
    for (int w = 4; w >= 1; w /= 2) {
      for (int i = 0; i < w; ++i) g[i] += g[i + w];
    }
    return g[0];
  };
  float first[8], last[8] = {};
  for (int i = 0; i < 8; ++i) first[i] = ExpGgmlVector(x[i] - 0.0f);
  for (int i = 8; i < 11; ++i) last[i - 8] = ExpGgmlVector(x[i] - 0.0f);
  double sum = halving(first);
  sum += halving(last);
  const float scale = static_cast<float>(1.0 / sum);
  for (int i = 0; i < 11; ++i) EXPECT_EQ(y[i], ExpGgmlVector(x[i]) * scale) << i;
}

TEST(SiluTest, SiluAndSwiGluMatchDoublePrecision) {
  EXPECT_EQ(Silu(0.0f), 0.0f);
  std::mt19937 rng(13);
  std::normal_distribution<float> dist(0.0f, 5.0f);
  for (int64_t n : {1, 8, 16, 31, 172}) {
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
    // Tail values (past the last group of 8) are exactly Silu * up.
    for (int64_t i = n - n % 8; i < n; ++i) ASSERT_EQ(out[i], Silu(gate[i]) * up[i]);
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
  const int64_t n_groups = 128;
  std::vector<float> gate(8 * n_groups), up(8 * n_groups);
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
    SwiGluGroups8(gate.data(), up.data(), out.data(), n_groups);
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
      float group[8];
      for (int l = 0; l < 8; ++l) {
        group[l] = ExpGgmlVector(x[8 * g + l] - max);
        want_x[8 * g + l] = group[l];
      }
      for (int width = 4; width >= 1; width /= 2) {
        for (int l = 0; l < width; ++l) group[l] = group[l] + group[l + width];
      }
      want_sum += static_cast<double>(group[0]);
    }
    const double sum = SoftmaxExpGroups8(x.data(), max, n_groups);
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
