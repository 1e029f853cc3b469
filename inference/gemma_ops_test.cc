#include "inference/gemma_ops.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace ringlm {
namespace {

// Values ggml_gelu returned on the scratch llama.cpp c392e50 AVX2 build.
TEST(GemmaOpsTest, GeluMatchesGgmlsTable) {
  EXPECT_EQ(GeluF16Table(1.0f), 0x1.aecp-1f);
  EXPECT_EQ(GeluF16Table(-1.0f), -0x1.454p-3f);
  EXPECT_EQ(GeluF16Table(0.5f), 0x1.62p-2f);
  EXPECT_EQ(GeluF16Table(3.0f), 0x1.7f8p+1f);
  EXPECT_EQ(GeluF16Table(-2.5f), -0x1.ee4p-7f);
  // The one half where 1 + 0.044715 x^2 rounded before the multiply (no
  // fused multiply-add) gives another table entry.
  EXPECT_EQ(GeluF16Table(-0x1.ffcp+0f), -0x1.74cp-5f);
  // Inputs are rounded to f16 first: 1 + 2^-12 looks up 1's entry.
  EXPECT_EQ(GeluF16Table(1.0f + 0x1p-12f), GeluF16Table(1.0f));
  // Outside (-10, 10): 0 and the identity, unrounded.
  EXPECT_EQ(GeluF16Table(-10.0f), 0.0f);
  EXPECT_EQ(GeluF16Table(-1e30f), 0.0f);
  EXPECT_EQ(GeluF16Table(10.0f), 10.0f);
  EXPECT_EQ(GeluF16Table(12.345f), 12.345f);
}

TEST(GemmaOpsTest, GeluGluMultipliesByUp) {
  const std::vector<float> gate = {1.0f, -1.0f, 20.0f};
  const std::vector<float> up = {2.0f, 3.0f, 0.5f};
  std::vector<float> out(3);
  GeluGlu(gate.data(), up.data(), out.data(), 3);
  EXPECT_EQ(out[0], GeluF16Table(1.0f) * 2.0f);
  EXPECT_EQ(out[1], GeluF16Table(-1.0f) * 3.0f);
  EXPECT_EQ(out[2], 10.0f);
}

TEST(GemmaOpsTest, SoftCapIsTanhBetweenTwoScales) {
  std::vector<float> x = {0.0f, 1.0f, -7.5f, 1000.0f, -1000.0f};
  const std::vector<float> in = x;
  SoftCapInPlace(x.data(), static_cast<int64_t>(x.size()), 30.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i], std::tanh(in[i] * (1.0f / 30.0f)) * 30.0f) << i;
    EXPECT_LE(std::abs(x[i]), 30.0f);
  }
  EXPECT_EQ(x[4], -30.0f);
}

}  // namespace
}  // namespace ringlm
