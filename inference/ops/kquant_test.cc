#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "inference/ops/fp16.h"
#include "inference/ops/kquant_internal.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

std::vector<float> RandomRow(int64_t n, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(KQuantTest, BlockLayoutsMatchGgml) {
  EXPECT_EQ(TraitsOf(TensorType::kQ4_K).block_bytes, sizeof(BlockQ4_K));
  EXPECT_EQ(TraitsOf(TensorType::kQ6_K).block_bytes, sizeof(BlockQ6_K));
  EXPECT_EQ(TraitsOf(TensorType::kQ8_K).block_bytes, sizeof(BlockQ8_K));
  EXPECT_EQ(RowBytes(TensorType::kQ4_K, 512), 288u);
  EXPECT_EQ(RowBytes(TensorType::kQ6_K, 256), 210u);
}

TEST(KQuantTest, NearestIntRoundsHalfToEven) {
  EXPECT_EQ(NearestInt(0.5f), 0);
  EXPECT_EQ(NearestInt(1.5f), 2);
  EXPECT_EQ(NearestInt(2.5f), 2);
  EXPECT_EQ(NearestInt(-2.5f), -2);
  EXPECT_EQ(NearestInt(-2.6f), -3);
  EXPECT_EQ(NearestInt(127.4f), 127);
}

TEST(KQuantTest, Q8_KHandComputed) {
  std::vector<float> x(256, 0.0f);
  x[0] = -2.0f;  // largest magnitude: iscale = -127 / -2 = 63.5, d = 2/127
  x[1] = 1.0f;   // 63.5 -> 64 (ties to even)
  x[2] = 0.5f;   // 31.75 -> 32
  x[17] = 2.0f;  // 127
  BlockQ8_K b;
  QuantizeRowQ8_K(x.data(), &b, 256);
  EXPECT_FLOAT_EQ(b.d, 1.0f / 63.5f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 64);
  EXPECT_EQ(b.qs[2], 32);
  EXPECT_EQ(b.qs[17], 127);
  EXPECT_EQ(b.bsums[0], -127 + 64 + 32);
  EXPECT_EQ(b.bsums[1], 127);
  for (int i = 2; i < 16; ++i) EXPECT_EQ(b.bsums[i], 0);
}

// Reconstruction error of the quantize -> dequantize round trip, relative to
// the row's RMS, over several sizes and scales, plus an all-zero row.
TEST(KQuantTest, RoundTripErrorIsBounded) {
  for (TensorType type : {TensorType::kQ4_K, TensorType::kQ6_K}) {
    for (int64_t n : {256, 512, 2816}) {
      for (float sigma : {1e-3f, 1.0f, 50.0f}) {
        const std::vector<float> x = RandomRow(n, static_cast<uint32_t>(n), sigma);
        std::vector<uint8_t> q(RowBytes(type, n));
        QuantizeRow(type, x.data(), q.data(), n);
        std::vector<float> y(n);
        DequantizeRow(type, q.data(), y.data(), n);
        double err2 = 0.0, x2 = 0.0;
        for (int64_t i = 0; i < n; ++i) {
          err2 += (y[i] - x[i]) * static_cast<double>(y[i] - x[i]);
          x2 += x[i] * static_cast<double>(x[i]);
        }
        const double rel = std::sqrt(err2 / x2);
        SCOPED_TRACE(testing::Message() << TraitsOf(type).name << " n=" << n << " sigma=" << sigma);
        // Typical: q4_K ~0.09, q6_K ~0.02 on Gaussian data.
        EXPECT_LT(rel, type == TensorType::kQ4_K ? 0.13 : 0.035);
        EXPECT_GT(rel, 0.0);
      }
    }
    const std::vector<float> zeros(256, 0.0f);
    std::vector<uint8_t> q(RowBytes(type, 256), 0xAB);
    QuantizeRow(type, zeros.data(), q.data(), 256);
    std::vector<float> y(256, 1.0f);
    DequantizeRow(type, q.data(), y.data(), 256);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
}

// Hand-built blocks check the bit layouts of the dequantizers.
TEST(KQuantTest, DequantizeLayouts) {
  BlockQ4_K b4 = {};
  b4.d = Fp32ToFp16(1.0f);
  b4.dmin = Fp32ToFp16(0.5f);
  // Sub-block 0: sc 2, m 4; sub-block 5: sc 33 (high bits via scales[1]),
  // m 17 (high bits via scales[5]).
  b4.scales[0] = 2;
  b4.scales[4] = 4;
  b4.scales[9] = (33 & 0xF) | ((17 & 0xF) << 4);
  b4.scales[1] = static_cast<uint8_t>((33 >> 4) << 6);
  b4.scales[5] = static_cast<uint8_t>((17 >> 4) << 6);
  b4.qs[0] = 0x37;       // value 0 = 7 (low), value 32 = 3 (high, sub-block 1)
  b4.qs[64 + 3] = 0xA0;  // value 160 + 3 (sub-block 5, high nibble) = 10
  std::vector<float> y(256);
  DequantizeRow(TensorType::kQ4_K, &b4, y.data(), 256);
  EXPECT_EQ(y[0], 2.0f * 7 - 0.5f * 4);
  EXPECT_EQ(y[1], -0.5f * 4);
  EXPECT_EQ(y[160 + 3], 33.0f * 10 - 0.5f * 17);

  BlockQ6_K b6 = {};
  b6.d = Fp32ToFp16(0.25f);
  for (int i = 0; i < 16; ++i) b6.scales[i] = static_cast<int8_t>(i - 8);
  b6.ql[5] = 0x21;  // value 5: low 1; value 69: low 2
  b6.qh[5] = 0x31;  // value 5: high 1 -> q 17; value 37: high 0; value 69: 3 -> q 50
  std::vector<float> z(256);
  DequantizeRow(TensorType::kQ6_K, &b6, z.data(), 256);
  EXPECT_EQ(z[5], 0.25f * -8 * (17 - 32));
  EXPECT_EQ(z[69], 0.25f * (4 - 8) * (50 - 32));
  EXPECT_EQ(z[37], 0.25f * (2 - 8) * (0 - 32));
}

}  // namespace
}  // namespace ringlm
