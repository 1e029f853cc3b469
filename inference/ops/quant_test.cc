#include "inference/ops/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "inference/ops/fp16.h"
#include "inference/ops/quant_internal.h"

namespace ringlm {
namespace {

// Block with amax 127 so d = 1 and every product x * id is exact.
std::vector<float> UnitScaleBlock() {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = -63.5f;
  x[2] = 0.5f;
  x[3] = 1.5f;
  x[4] = 2.5f;
  x[5] = -0.5f;
  x[6] = -2.5f;
  x[7] = 3.4f;
  x[31] = -127.0f;
  return x;
}

TEST(QuantTest, BlockSizes) {
  EXPECT_EQ(sizeof(BlockQ8_0), 34u);
  EXPECT_EQ(sizeof(BlockQ4_0), 18u);
  EXPECT_EQ(TraitsOf(TensorType::kQ8_0).block_bytes, sizeof(BlockQ8_0));
  EXPECT_EQ(TraitsOf(TensorType::kQ4_0).block_bytes, sizeof(BlockQ4_0));
}

TEST(QuantTest, Q8_0ReferenceRoundsHalfAwayFromZero) {
  const std::vector<float> x = UnitScaleBlock();
  BlockQ8_0 b;
  QuantizeRowQ8_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3c00);  // 1.0
  const int expected[8] = {127, -64, 1, 2, 3, -1, -3, 3};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(b.qs[j], expected[j]) << j;
  EXPECT_EQ(b.qs[31], -127);
  for (int j = 8; j < 31; ++j) EXPECT_EQ(b.qs[j], 0);
}

TEST(QuantTest, Q8_0ActivationsRoundHalfToEven) {
  const std::vector<float> x = UnitScaleBlock();
  BlockQ8_0 b;
  QuantizeRowQ8_0Activations(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3c00);
  const int expected[8] = {127, -64, 0, 2, 2, 0, -2, 3};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(b.qs[j], expected[j]) << j;
  EXPECT_EQ(b.qs[31], -127);
}

// The dispatched quantizer (AVX2 where the CPU has it) writes the scalar
// definition's bytes: random rows, exact ties, zeros, huge and tiny values,
// infinities and NaNs.
TEST(QuantTest, Q8_0ActivationsEqualTheScalarDefinition) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 9);
  constexpr int64_t kCols = 32 * 64;
  std::vector<float> x(kCols);
  for (int round = 0; round < 50; ++round) {
    const float scale = std::ldexp(1.0f, round % 2 == 0 ? round - 25 : 25 - round);
    for (float& v : x) {
      switch (pick(rng)) {
        case 0:  // a tie: amax 127 makes id 1, so k + 0.5 stays a tie
          v = static_cast<float>(static_cast<int>(normal(rng) * 40)) + 0.5f;
          break;
        case 1:
          v = 0.0f;
          break;
        default:
          v = normal(rng) * scale;
      }
    }
    if (round % 5 == 1) x[round] = std::numeric_limits<float>::quiet_NaN();
    if (round % 7 == 2) x[3 * round] = std::numeric_limits<float>::infinity();
    if (round % 3 == 0) std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // a zero block
    x[31] = 127.0f;                                                       // block 0: id exactly 1
    std::vector<BlockQ8_0> fast(kCols / 32), scalar(kCols / 32);
    QuantizeRowQ8_0Activations(x.data(), fast.data(), kCols);
    QuantizeRowQ8_0ActivationsScalar(x.data(), scalar.data(), kCols);
    ASSERT_EQ(std::memcmp(fast.data(), scalar.data(), fast.size() * sizeof(BlockQ8_0)), 0)
        << "round " << round;
  }
}

TEST(QuantTest, Q8_0AllZeroBlock) {
  const std::vector<float> x(64, 0.0f);
  BlockQ8_0 b[2];
  QuantizeRowQ8_0(x.data(), b, 64);
  for (const auto& blk : b) {
    EXPECT_EQ(blk.d, 0);
    for (int8_t q : blk.qs) EXPECT_EQ(q, 0);
  }
}

TEST(QuantTest, Q4_0HandComputedBlocks) {
  // Largest magnitude is negative: d = -8 / -8 = 1.
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;   // q = (int8)(0.5) = 0
  x[1] = 7.0f;    // 15
  x[2] = 7.4f;    // (int8)15.9 = 15
  x[3] = -0.6f;   // (int8)7.9 = 7
  x[4] = 0.5f;    // 9
  x[16] = 6.6f;   // (int8)15.1 = 15, high nibble of byte 0
  x[17] = -7.5f;  // 1
  BlockQ4_0 b;
  QuantizeRowQ4_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.qs[0], 0x00 | (15 << 4));
  EXPECT_EQ(b.qs[1], 15 | (1 << 4));
  EXPECT_EQ(b.qs[2], 15 | (8 << 4));
  EXPECT_EQ(b.qs[3], 7 | (8 << 4));
  EXPECT_EQ(b.qs[4], 9 | (8 << 4));
  std::vector<float> y(32);
  DequantizeRow(TensorType::kQ4_0, &b, y.data(), 32);
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[1], 7.0f);
  EXPECT_EQ(y[3], -1.0f);
  EXPECT_EQ(y[16], 7.0f);
  EXPECT_EQ(y[17], -7.0f);
  EXPECT_EQ(y[5], 0.0f);

  // Largest magnitude positive: d = 8 / -8 = -1, and the opposite extreme clamps.
  std::vector<float> z(32, 0.0f);
  z[0] = 8.0f;   // (int8)(-8 + 8.5) = 0 -> (0 - 8) * -1 = 8
  z[1] = -8.0f;  // (int8)(16.5) = 16 -> clamped to 15 -> -7
  QuantizeRowQ4_0(z.data(), &b, 32);
  EXPECT_EQ(b.d, 0xbc00);  // -1.0
  DequantizeRow(TensorType::kQ4_0, &b, y.data(), 32);
  EXPECT_EQ(y[0], 8.0f);
  EXPECT_EQ(y[1], -7.0f);
  EXPECT_EQ(y[2], 0.0f);
}

TEST(QuantTest, Q5_0HandComputedBlocks) {
  EXPECT_EQ(TraitsOf(TensorType::kQ5_0).block_bytes, sizeof(BlockQ5_0));
  // Largest magnitude is negative: d = -16 / -16 = 1.
  std::vector<float> x(32, 0.0f);
  x[0] = -16.0f;  // q = (int8)(0.5) = 0
  x[1] = 15.0f;   // 31: low 15, bit 1 of qh set
  x[2] = 15.4f;   // (int8)31.9 = 31
  x[3] = -0.6f;   // (int8)15.9 = 15: bit 3 clear
  x[16] = 1.0f;   // 17: low nibble 1 in the high half of byte 0, bit 16 set
  BlockQ5_0 b;
  QuantizeRowQ5_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.qs[0], 0x00 | (1 << 4));
  EXPECT_EQ(b.qs[1], 15 | (0 << 4));  // value 17 is 0 -> q 16: low 0, bit 17 set
  EXPECT_EQ(b.qs[3], 15 | (0 << 4));
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  EXPECT_EQ(qh & 0xF, 0b0110u);  // values 1 and 2 have bit 4; 0 and 3 do not
  EXPECT_EQ((qh >> 16) & 0x3, 0b11u);
  std::vector<float> y(32);
  DequantizeRow(TensorType::kQ5_0, &b, y.data(), 32);
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[1], 15.0f);
  EXPECT_EQ(y[3], -1.0f);
  EXPECT_EQ(y[16], 1.0f);
  EXPECT_EQ(y[5], 0.0f);
}

TEST(QuantTest, Q4_1AndQ5_1HandComputedBlocks) {
  EXPECT_EQ(TraitsOf(TensorType::kQ4_1).block_bytes, sizeof(BlockQ4_1));
  EXPECT_EQ(TraitsOf(TensorType::kQ5_1).block_bytes, sizeof(BlockQ5_1));
  // min -1, max 14: d = 1 for Q4_1 (15 levels), 15/31 for Q5_1.
  std::vector<float> x(32, 0.0f);
  x[0] = -1.0f;  // q 0
  x[1] = 14.0f;  // q 15
  x[2] = 3.4f;   // (int)(4.4 + 0.5) = 4
  x[17] = 2.6f;  // (int)(3.6 + 0.5) = 4, high nibble of byte 1
  BlockQ4_1 b4;
  QuantizeRowQ4_1(x.data(), &b4, 32);
  EXPECT_EQ(b4.d, 0x3c00);    // 1.0
  EXPECT_EQ(b4.m, 0xbc00);    // -1.0
  EXPECT_EQ(b4.qs[0], 0x10);  // x[0] = 0, x[16] = 0 -> q 1
  EXPECT_EQ(b4.qs[1], 0x4F);
  EXPECT_EQ(b4.qs[2], 0x14);
  std::vector<float> y(32);
  DequantizeRow(TensorType::kQ4_1, &b4, y.data(), 32);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], 14.0f);
  EXPECT_EQ(y[2], 3.0f);
  EXPECT_EQ(y[17], 3.0f);
  // Q5_1: min 0, max 31, d = 1.
  std::fill(x.begin(), x.end(), 0.0f);
  x[1] = 31.0f;
  x[20] = 16.2f;  // q 16: low nibble 0 in the high half of byte 4, bit 20 of qh
  BlockQ5_1 b5;
  QuantizeRowQ5_1(x.data(), &b5, 32);
  EXPECT_EQ(b5.d, 0x3c00);
  EXPECT_EQ(b5.m, 0x0000);
  EXPECT_EQ(b5.qs[1], 0x0F);
  EXPECT_EQ(b5.qs[4], 0x00);
  uint32_t qh;
  std::memcpy(&qh, b5.qh, 4);
  EXPECT_EQ(qh, (1u << 1) | (1u << 20));
  DequantizeRow(TensorType::kQ5_1, &b5, y.data(), 32);
  EXPECT_EQ(y[1], 31.0f);
  EXPECT_EQ(y[20], 16.0f);
  EXPECT_EQ(y[3], 0.0f);
}

TEST(QuantTest, Q8_1ActivationsAddTheBlockSum) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = static_cast<float>(i % 7) - 2.5f;
  std::vector<BlockQ8_1> q1(2);
  std::vector<BlockQ8_0> q0(2);
  QuantizeRowQ8_1Activations(x.data(), q1.data(), 64);
  QuantizeRowQ8_0Activations(x.data(), q0.data(), 64);
  for (int b = 0; b < 2; ++b) {
    EXPECT_EQ(q1[b].d, q0[b].d);
    EXPECT_EQ(std::memcmp(q1[b].qs, q0[b].qs, 32), 0);
    int sum = 0;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) {
      sum += q0[b].qs[j];
      amax = std::max(amax, std::fabs(x[32 * b + j]));
    }
    EXPECT_EQ(q1[b].s, Fp32ToFp16(amax / 127.f * sum));
  }
}

TEST(QuantTest, Iq4NlPicksTheNearestLevels) {
  EXPECT_EQ(TraitsOf(TensorType::kIQ4_NL).block_bytes, sizeof(BlockIQ4_NL));
  EXPECT_EQ(TraitsOf(TensorType::kIQ4_XS).block_bytes, sizeof(BlockIQ4_XS));
  // Values exactly on the grid at d = 1: the least-squares scale is 1.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = kIq4NlValues[(5 * j + 3) % 16];
  BlockIQ4_NL b;
  QuantizeRowIQ4_NL(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3c00);
  std::vector<float> y(32);
  DequantizeRow(TensorType::kIQ4_NL, &b, y.data(), 32);
  EXPECT_EQ(y, x);
  // All zero: scale 0, every index the level nearest 0 (1, index 8).
  std::fill(x.begin(), x.end(), 0.0f);
  QuantizeRowIQ4_NL(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0);
  EXPECT_EQ(b.qs[0], 0x88);
}

TEST(QuantTest, Iq4XsScalesAreSixBitMultiplesOfTheSuperBlockScale) {
  // Sub-block j holds grid values times (j + 1) / 4, its best scale; the
  // largest, 2, gives d = -2 / 32 and the 6-bit scales -4 (j + 1), so the
  // values come back exactly.
  std::vector<float> x(256);
  for (int j = 0; j < 256; ++j) x[j] = kIq4NlValues[(3 * j + 1) % 16] * (j / 32 + 1) * 0.25f;
  BlockIQ4_XS b;
  QuantizeRowIQ4_XS(x.data(), &b, 256);
  std::vector<float> y(256);
  DequantizeRow(TensorType::kIQ4_XS, &b, y.data(), 256);
  EXPECT_EQ(y, x);
  for (int ib = 0; ib < 8; ++ib) {
    EXPECT_EQ(IQ4_XSScale(b, ib) * Fp16ToFp32(b.d), (ib + 1) * 0.25f) << ib;
  }
}

TEST(QuantTest, DequantizedErrorIsBounded) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  const int64_t n = 32 * 64;
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  std::vector<BlockQ8_0> q8(n / 32);
  std::vector<BlockQ4_0> q4(n / 32);
  std::vector<float> y8(n), y4(n);
  QuantizeRowQ8_0(x.data(), q8.data(), n);
  QuantizeRowQ4_0(x.data(), q4.data(), n);
  DequantizeRow(TensorType::kQ8_0, q8.data(), y8.data(), n);
  DequantizeRow(TensorType::kQ4_0, q4.data(), y4.data(), n);
  double sum_err4 = 0.0;
  double sum_scale4 = 0.0;
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d8 = amax / 127.0f;
    const float d4 = std::fabs(Fp16ToFp32(q4[b].d));
    for (int j = 0; j < 32; ++j) {
      const int64_t i = b * 32 + j;
      // Half a step, plus the f16 rounding of the scale (<= 127 * 2^-11 steps).
      ASSERT_LE(std::fabs(y8[i] - x[i]), d8 * 0.57f) << i;
      ASSERT_LE(std::fabs(y4[i] - x[i]), d4 * 1.01f) << i;  // one step at the clamped end
      sum_err4 += std::fabs(y4[i] - x[i]);
      sum_scale4 += d4;
    }
  }
  EXPECT_LT(sum_err4 / sum_scale4, 0.3);  // typical error ~ d/4
}

TEST(QuantTest, DequantizeFloatTypes) {
  const std::vector<float> x = {1.0f, -2.5f, 0.1f, 1e-6f};
  std::vector<float> y(4);
  DequantizeRow(TensorType::kF32, x.data(), y.data(), 4);
  EXPECT_EQ(y, x);
  std::vector<uint16_t> h(4);
  Fp32ToFp16Row(x.data(), h.data(), 4);
  DequantizeRow(TensorType::kF16, h.data(), y.data(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], Fp16ToFp32(h[i]));
  EXPECT_EQ(y[1], -2.5f);
  Fp32ToBf16Row(x.data(), h.data(), 4);
  DequantizeRow(TensorType::kBF16, h.data(), y.data(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], Bf16ToFp32(h[i]));
  EXPECT_EQ(y[0], 1.0f);
}

TEST(QuantTest, RowBytesPerType) {
  EXPECT_EQ(RowBytes(TensorType::kF32, 7), 28u);
  EXPECT_EQ(RowBytes(TensorType::kF16, 7), 14u);
  EXPECT_EQ(RowBytes(TensorType::kBF16, 3), 6u);
  EXPECT_EQ(RowBytes(TensorType::kQ8_0, 96), 3u * 34u);
  EXPECT_EQ(RowBytes(TensorType::kQ4_0, 64), 2u * 18u);
  EXPECT_EQ(RowBytes(TensorType::kQ8_0, 0), 0u);
}

// QuantizeRow dispatches to the per-type reference quantizers.
TEST(QuantTest, QuantizeRowMatchesPerTypeQuantizers) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t n = 96;
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  for (TensorType type : {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0,
                          TensorType::kQ4_0}) {
    std::vector<uint8_t> got(RowBytes(type, n), 0xAB);
    std::vector<uint8_t> want(RowBytes(type, n), 0xCD);
    QuantizeRow(type, x.data(), got.data(), n);
    switch (type) {
      case TensorType::kF32:
        std::memcpy(want.data(), x.data(), want.size());
        break;
      case TensorType::kF16:
        Fp32ToFp16Row(x.data(), reinterpret_cast<uint16_t*>(want.data()), n);
        break;
      case TensorType::kBF16:
        Fp32ToBf16Row(x.data(), reinterpret_cast<uint16_t*>(want.data()), n);
        break;
      case TensorType::kQ8_0:
        QuantizeRowQ8_0(x.data(), want.data(), n);
        break;
      default:
        QuantizeRowQ4_0(x.data(), want.data(), n);
        break;
    }
    EXPECT_EQ(got, want) << TraitsOf(type).name;
  }
}

}  // namespace
}  // namespace ringlm
