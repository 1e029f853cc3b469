#include "inference/ops/norm_rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace ringlm {
namespace {

TEST(RmsNormTest, MatchesDoublePrecision) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int64_t n : {1, 7, 64, 172, 4096}) {
    std::vector<float> x(n), w(n), out(n);
    for (auto& v : x) v = dist(rng);
    for (auto& v : w) v = dist(rng);
    RmsNorm(x.data(), w.data(), out.data(), n, 1e-5f);
    double ss = 0.0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int64_t i = 0; i < n; ++i) {
      const double expected = x[i] * scale * w[i];
      ASSERT_NEAR(out[i], expected, 1e-6 * std::fabs(expected) + 1e-12) << n << " " << i;
    }
  }
}

TEST(RmsNormTest, RoundsLikeGgmlAndMayRunInPlace) {
  const std::vector<float> x = {3.0f, 4.0f};
  const std::vector<float> w = {2.0f, 0.5f};
  std::vector<float> out(2);
  RmsNorm(x.data(), w.data(), out.data(), 2, 0.0f);
  // mean = 12.5, scale = 1/sqrtf(12.5) in float, then (x*scale)*w.
  const float scale = 1.0f / std::sqrt(12.5f);
  EXPECT_EQ(out[0], (3.0f * scale) * 2.0f);
  EXPECT_EQ(out[1], (4.0f * scale) * 0.5f);
  std::vector<float> inplace = x;
  RmsNorm(inplace.data(), w.data(), inplace.data(), 2, 0.0f);
  EXPECT_EQ(inplace, out);
}

TEST(RopeTest, HandCheckedTinyCaseBothStyles) {
  // head_dim 4, n_rot 4, pos 1, base 10000: theta_scale = 10000^-0.5 = 0.01,
  // so the pair angles are 1 and 0.01.
  const float c0 = std::cos(1.0f), s0 = std::sin(1.0f);
  const float c1 = std::cos(0.01f), s1 = std::sin(0.01f);
  std::vector<float> normal = {1.0f, 0.0f, 0.0f, 1.0f};
  ApplyRope(normal.data(), 1, 4, 4, 1, 10000.0f, RopeStyle::kNormal);
  EXPECT_NEAR(normal[0], c0, 1e-6);  // (1, 0) rotated by 1
  EXPECT_NEAR(normal[1], s0, 1e-6);
  EXPECT_NEAR(normal[2], -s1, 1e-6);  // (0, 1) rotated by 0.01
  EXPECT_NEAR(normal[3], c1, 1e-6);

  std::vector<float> neox = {1.0f, 0.0f, 0.0f, 1.0f};
  ApplyRope(neox.data(), 1, 4, 4, 1, 10000.0f, RopeStyle::kNeox);
  // Pairs are (x0, x2) by angle 1 and (x1, x3) by angle 0.01.
  EXPECT_NEAR(neox[0], c0, 1e-6);
  EXPECT_NEAR(neox[2], s0, 1e-6);
  EXPECT_NEAR(neox[1], -s1, 1e-6);
  EXPECT_NEAR(neox[3], c1, 1e-6);
}

TEST(RopeTest, PositionZeroIsIdentityAndTailIsUntouched) {
  std::vector<float> x = {1.5f, -2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f};
  const std::vector<float> original = x;
  ApplyRope(x.data(), 2, 4, 4, 0, 10000.0f, RopeStyle::kNormal);
  EXPECT_EQ(x, original);
  // n_rot 2 of head_dim 4: dims 2 and 3 of each head stay.
  ApplyRope(x.data(), 2, 4, 2, 5, 10000.0f, RopeStyle::kNeox);
  EXPECT_EQ(x[2], 3.0f);
  EXPECT_EQ(x[3], 4.0f);
  EXPECT_EQ(x[6], 7.0f);
  EXPECT_EQ(x[7], 8.0f);
  EXPECT_NE(x[0], 1.5f);
}

// Double-precision rotation with the same float angles (ggml multiplies theta
// up in float, which is part of its numerics, not an error to measure).
void RopeDouble(std::vector<double>& x, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                int64_t pos, float base, RopeStyle style) {
  const float theta_scale = std::pow(base, -2.0f / n_rot);
  std::vector<float> theta(n_rot / 2);
  float t = static_cast<float>(pos);
  for (auto& v : theta) {
    v = t;
    t *= theta_scale;
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < n_rot / 2; ++i) {
      const int64_t a = h * head_dim + (style == RopeStyle::kNeox ? i : 2 * i);
      const int64_t b = h * head_dim + (style == RopeStyle::kNeox ? i + n_rot / 2 : 2 * i + 1);
      const double c = std::cos(static_cast<double>(theta[i]));
      const double s = std::sin(static_cast<double>(theta[i]));
      const double x0 = x[a], x1 = x[b];
      x[a] = x0 * c - x1 * s;
      x[b] = x0 * s + x1 * c;
    }
  }
}

TEST(RopeTest, MatchesDoublePrecisionRotation) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
    for (int64_t head_dim : {8, 64, 128}) {
      for (int64_t pos : {1, 17, 1000, 30000}) {
        const int64_t n_heads = 3;
        std::vector<float> x(n_heads * head_dim);
        for (auto& v : x) v = dist(rng);
        std::vector<double> expected(x.begin(), x.end());
        ApplyRope(x.data(), n_heads, head_dim, head_dim, pos, 10000.0f, style);
        RopeDouble(expected, n_heads, head_dim, head_dim, pos, 10000.0f, style);
        for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], expected[i], 2e-6) << i;
      }
    }
  }
}

// DeepSeek's YaRN: the bits of ggml's rope (llama.cpp c392e50, AVX2 build)
// for 16 rotated values at position 37, base 10000, freq_scale 1/4 from an
// original context of 64, ext_factor 1, beta 32 and 1, and build_deepseek2's
// attention factor 1 / (1 + 0.1 ln 4). Out of place, and in place (ggml's
// scalar loop: three values differ in the last bit).
TEST(RopeTest, YarnMatchesGgmlsBitsInAndOutOfPlace) {
  std::vector<float> in(16);
  for (int i = 0; i < 16; ++i) in[i] = 0.25f * (i + 1) * (i % 3 == 0 ? -1.0f : 1.0f);
  RopeYarn yarn;
  yarn.freq_scale = 0.25f;
  yarn.ext_factor = 1.0f;
  YarnCorrDims(16, 64, 10000.0f, 32.0f, 1.0f, &yarn.corr_low, &yarn.corr_high);
  EXPECT_EQ(yarn.corr_low, 0.0f);
  EXPECT_EQ(yarn.corr_high, 3.0f);
  const float attn_factor = 0x1.c1a9d6p-1f;
  EXPECT_EQ(attn_factor, 1.0f / (1.0f + 0.1f * std::log(4.0f)));
  const uint32_t out_of_place[16] = {0x3e058ba7, 0x3f0b28d1, 0x3bf3fd00, 0x3f9fff46,
                                     0xbfe4a8c6, 0x3f49c80e, 0xc01026fc, 0x3fb488ac,
                                     0x401e29cd, 0xc01203d5, 0x402a4f2f, 0x404510b9,
                                     0xc0521025, 0x405e1103, 0x4070bf70, 0xc07f4c00};
  const uint32_t in_place[16] = {0x3e058ba7, 0x3f0b28d1, 0x3bf3fd00, 0x3f9fff46,
                                 0xbfe4a8c6, 0x3f49c80d, 0xc01026fc, 0x3fb488ac,
                                 0x401e29cd, 0xc01203d5, 0x402a4f2f, 0x404510b9,
                                 0xc0521026, 0x405e1103, 0x4070bf6f, 0xc07f4c00};
  for (RopeLoop loop : {RopeLoop::kOutOfPlace, RopeLoop::kInPlace}) {
    std::vector<float> x = in;
    ApplyRope(x.data(), 1, 16, 16, 37, 10000.0f, RopeStyle::kNormal, nullptr, attn_factor, yarn,
              loop);
    const uint32_t* want = loop == RopeLoop::kInPlace ? in_place : out_of_place;
    for (int i = 0; i < 16; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &x[i], sizeof(bits));
      EXPECT_EQ(bits, want[i]) << "value " << i << (loop == RopeLoop::kInPlace ? " in place" : "");
    }
  }
}

// Without scaling, RopeYarn's defaults leave every angle as it was.
TEST(RopeTest, DefaultYarnChangesNothing) {
  std::vector<float> a(32), b;
  for (int i = 0; i < 32; ++i) a[i] = 0.1f * static_cast<float>(i) - 1.3f;
  b = a;
  ApplyRope(a.data(), 2, 16, 16, 11, 10000.0f, RopeStyle::kNormal);
  ApplyRope(b.data(), 2, 16, 16, 11, 10000.0f, RopeStyle::kNormal, nullptr, 1.0f, RopeYarn{});
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace ringlm
