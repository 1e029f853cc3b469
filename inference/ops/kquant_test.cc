#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
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
  EXPECT_EQ(TraitsOf(TensorType::kQ5_K).block_bytes, sizeof(BlockQ5_K));
  EXPECT_EQ(TraitsOf(TensorType::kQ3_K).block_bytes, sizeof(BlockQ3_K));
  EXPECT_EQ(TraitsOf(TensorType::kQ2_K).block_bytes, sizeof(BlockQ2_K));
  EXPECT_EQ(TraitsOf(TensorType::kQ8_K).block_bytes, sizeof(BlockQ8_K));
  EXPECT_EQ(RowBytes(TensorType::kQ4_K, 512), 288u);
  EXPECT_EQ(RowBytes(TensorType::kQ6_K, 256), 210u);
}

TEST(KQuantTest, EveryKQuantComputesButNotTheTernaryTypes) {
  for (TensorType t : {TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kQ4_K, TensorType::kQ5_K,
                       TensorType::kQ6_K}) {
    EXPECT_TRUE(IsComputeSupported(t)) << TraitsOf(t).name;
  }
  // Loading these keeps failing with "which the kernels do not support yet".
  EXPECT_FALSE(IsComputeSupported(TensorType::kTQ1_0));
  EXPECT_FALSE(IsComputeSupported(TensorType::kTQ2_0));
  EXPECT_FALSE(IsComputeSupported(TensorType::kQ8_K));  // activations only
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
  // Typical on Gaussian data: q2_K ~0.30, q3_K ~0.15, q4_K ~0.07, q5_K ~0.036,
  // q6_K ~0.02.
  const std::pair<TensorType, double> kMaxError[] = {{TensorType::kQ2_K, 0.36},
                                                     {TensorType::kQ3_K, 0.19},
                                                     {TensorType::kQ4_K, 0.13},
                                                     {TensorType::kQ5_K, 0.05},
                                                     {TensorType::kQ6_K, 0.035}};
  for (const auto& [type, max_error] : kMaxError) {
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
        EXPECT_LT(rel, max_error);
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

TEST(KQuantTest, DequantizeLayoutsQ5_K) {
  BlockQ5_K b = {};
  b.d = Fp32ToFp16(1.0f);
  b.dmin = Fp32ToFp16(0.5f);
  // Scales and mins packed as Q4_K's: sub-block 0: sc 2, m 4; sub-block 5:
  // sc 33, m 17.
  b.scales[0] = 2;
  b.scales[4] = 4;
  b.scales[9] = (33 & 0xF) | ((17 & 0xF) << 4);
  b.scales[1] = static_cast<uint8_t>((33 >> 4) << 6);
  b.scales[5] = static_cast<uint8_t>((17 >> 4) << 6);
  b.qs[0] = 0x37;       // value 0: low 7; value 32: low 3
  b.qh[0] = 0x01;       // value 0: + 16 -> 23; value 32 (bit 1): no
  b.qs[64 + 3] = 0xA0;  // value 160 + 3 (sub-block 5): low 10
  b.qh[3] = 0x20;       // bit 5 = 2 * 2 + 1: value 160 + 3 + 16 -> 26
  std::vector<float> y(256);
  DequantizeRow(TensorType::kQ5_K, &b, y.data(), 256);
  EXPECT_EQ(y[0], 2.0f * 23 - 0.5f * 4);
  EXPECT_EQ(y[1], -0.5f * 4);
  EXPECT_EQ(y[160 + 3], 33.0f * 26 - 0.5f * 17);
}

TEST(KQuantTest, DequantizeLayoutsQ3_KAndQ2_K) {
  BlockQ3_K b3 = {};
  b3.d = Fp32ToFp16(0.5f);
  // Scale of sub-block 0 = 0x5 | (1 << 4) = 21 -> 21 - 32 = -11; sub-block
  // 13 (high nibble of scales[5], high bits at bits 6..7 of scales[9]) =
  // 0xA | (3 << 4) = 58 -> 26. Every other scale is 0 - 32.
  b3.scales[0] = 0x05;
  b3.scales[8] = 0x01;
  b3.scales[5] = 0xA0;
  b3.scales[9] = 0xC0;
  b3.qs[0] = 0x02;        // value 0: low 2
  b3.hmask[0] = 0x01;     // value 0: high bit set -> q 6 - 4 = 2
  b3.qs[32 + 16] = 0x30;  // value 128 + 2 * 32 + 16 = 208: low 3 (bits 4..5)
  b3.hmask[16] = 0x00;    // value 208: high bit (bit 6) clear -> 3 - 4 = -1
  std::vector<float> y(256);
  DequantizeRow(TensorType::kQ3_K, &b3, y.data(), 256);
  EXPECT_EQ(y[0], 0.5f * -11 * 2);
  EXPECT_EQ(y[1], 0.5f * -11 * -4);
  EXPECT_EQ(y[208], 0.5f * 26 * -1);
  EXPECT_EQ(y[17], 0.5f * -32 * -4);

  BlockQ2_K b2 = {};
  b2.d = Fp32ToFp16(1.0f);
  b2.dmin = Fp32ToFp16(0.25f);
  b2.scales[0] = 0x35;    // sub-block 0: scale 5, min 3
  b2.scales[13] = 0x7F;   // sub-block 13: scale 15, min 7
  b2.qs[0] = 0x03;        // value 0: 3
  b2.qs[32 + 16] = 0x20;  // value 208: 2
  std::vector<float> z(256);
  DequantizeRow(TensorType::kQ2_K, &b2, z.data(), 256);
  EXPECT_EQ(z[0], 5.0f * 3 - 0.25f * 3);
  EXPECT_EQ(z[1], -0.25f * 3);
  EXPECT_EQ(z[208], 15.0f * 2 - 0.25f * 7);
  EXPECT_EQ(z[20], 0.0f);
}

}  // namespace
}  // namespace ringlm
