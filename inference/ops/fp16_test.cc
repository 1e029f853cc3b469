#include "inference/ops/fp16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ringlm {
namespace {

bool IsHalfNaN(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

// The value of a half computed independently with ldexp.
double HalfValue(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0x1f) return mant ? std::nan("") : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

// Nearest half by search over all finite non-negative halves, ties to even.
uint16_t NearestHalf(float f) {
  const double a = std::fabs(static_cast<double>(f));
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (a >= 65520.0) return sign | 0x7c00;
  uint16_t lo = 0;
  uint16_t hi = 0x7bff;
  while (lo < hi) {  // largest h with value <= a
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (HalfValue(mid) <= a)
      lo = mid;
    else
      hi = static_cast<uint16_t>(mid - 1);
  }
  if (HalfValue(lo) == a) return sign | lo;
  const uint16_t up = static_cast<uint16_t>(lo + 1);  // 0x7c00 (inf) handled above
  const double dl = a - HalfValue(lo);
  const double du = HalfValue(up) - a;
  if (dl < du) return sign | lo;
  if (du < dl) return sign | up;
  return sign | ((lo & 1) ? up : lo);
}

TEST(Fp16Test, AllHalvesWidenExactlyAndRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = Fp16ToFp32(h);
    if (IsHalfNaN(h)) {
      ASSERT_TRUE(std::isnan(f)) << i;
      // Payload is kept and the quiet bit set on the way back.
      ASSERT_EQ(Fp32ToFp16(f), h | 0x0200) << i;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), HalfValue(h)) << i;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << i;
    ASSERT_EQ(Fp32ToFp16(f), h) << i;
  }
}

TEST(Fp16Test, RoundsToNearestEvenIncludingTiesAndSubnormals) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               65504.0f,
                               65519.99f,
                               65520.0f,
                               1e10f,
                               std::ldexp(1.0f, -24),
                               std::ldexp(1.0f, -25),
                               std::ldexp(1.5f, -25),
                               std::ldexp(1.0f, -26),
                               std::ldexp(1.0f, -14),
                               std::numeric_limits<float>::denorm_min(),
                               INFINITY,
                               -INFINITY};
  // Every midpoint between consecutive finite halves (exact in float), and its
  // float neighbours.
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    const float mid = static_cast<float>((HalfValue(h) + HalfValue(h + 1)) / 2);
    ASSERT_EQ(static_cast<double>(mid), (HalfValue(h) + HalfValue(h + 1)) / 2);
    if (h % 7 == 0) {
      values.push_back(mid);
      values.push_back(-mid);
      values.push_back(std::nextafter(mid, 0.0f));
      values.push_back(std::nextafter(mid, INFINITY));
    }
  }
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float f = std::bit_cast<float>(bits(rng));
    if (!std::isnan(f)) values.push_back(f);
  }
  std::uniform_real_distribution<float> small(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i) values.push_back(small(rng));
  for (float f : values) {
    ASSERT_EQ(Fp32ToFp16(f), NearestHalf(f)) << f;
  }
  // Ties go to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(Fp32ToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

TEST(Fp16Test, NaNBecomesQuietWithPayload) {
  const float qnan = std::bit_cast<float>(0x7fc00000u);
  const float snan_payload = std::bit_cast<float>(0xff812345u);
  EXPECT_EQ(Fp32ToFp16(qnan), 0x7e00);
  EXPECT_EQ(Fp32ToFp16(snan_payload), 0xfe00 | ((0x012345u >> 13) & 0x3ff));
  EXPECT_TRUE(IsHalfNaN(Fp32ToFp16(std::bit_cast<float>(0x7f800001u))));
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("f16c"))) uint16_t HardwareFp32ToFp16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, 0));
}

TEST(Fp16Test, MatchesF16cBitForBit) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C on this CPU";
  std::mt19937 rng(2);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 1000000; ++i) {
    const float f = std::bit_cast<float>(bits(rng));
    ASSERT_EQ(Fp32ToFp16(f), HardwareFp32ToFp16(f)) << std::hex << std::bit_cast<uint32_t>(f);
  }
}
#endif

TEST(Bf16Test, AllBf16RoundTripAndRoundToNearestEven) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = Bf16ToFp32(h);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), i << 16);
    if (std::isnan(f)) {
      ASSERT_EQ(Fp32ToBf16(f), h | 0x40) << i;
    } else {
      ASSERT_EQ(Fp32ToBf16(f), h) << i;
    }
  }
  // Ties to even, below and above halfway.
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  // Subnormals are rounded, not flushed; overflow rounds to inf.
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x00018000u)), 0x0002);
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);
  EXPECT_EQ(Fp32ToBf16(INFINITY), 0x7f80);
  // NaN forced quiet.
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x7f810000u)), 0x7fc1);
}

TEST(Fp16Test, RowHelpersMatchScalar) {
  const std::vector<float> x = {0.1f, -2.5f, 65504.0f, 1e-7f, 3.14159f};
  std::vector<uint16_t> h(x.size());
  std::vector<float> back(x.size());
  Fp32ToFp16Row(x.data(), h.data(), x.size());
  Fp16ToFp32Row(h.data(), back.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(h[i], Fp32ToFp16(x[i]));
    EXPECT_EQ(back[i], Fp16ToFp32(h[i]));
  }
  Fp32ToBf16Row(x.data(), h.data(), x.size());
  Bf16ToFp32Row(h.data(), back.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(h[i], Fp32ToBf16(x[i]));
    EXPECT_EQ(back[i], Bf16ToFp32(h[i]));
  }
}

}  // namespace
}  // namespace ringlm
