#include "inference/ops/matmul.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "inference/ops/cpu_target.h"
#include "inference/ops/fp16.h"
#include "inference/ops/matmul_internal.h"
#include "inference/ops/qgemm_internal.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

constexpr TensorType kKQuantTypes[] = {TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kQ4_K,
                                       TensorType::kQ5_K, TensorType::kQ6_K};
constexpr TensorType kTypes[] = {TensorType::kF32,  TensorType::kF16,    TensorType::kBF16,
                                 TensorType::kQ8_0, TensorType::kQ4_0,   TensorType::kQ5_0,
                                 TensorType::kQ4_1, TensorType::kQ5_1,   TensorType::kQ2_K,
                                 TensorType::kQ3_K, TensorType::kQ4_K,   TensorType::kQ5_K,
                                 TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS};

// Weights of `type` made from floats, row by row.
std::vector<uint8_t> MakeWeights(TensorType type, const std::vector<float>& w, int64_t rows,
                                 int64_t cols) {
  const size_t row_bytes = RowBytes(type, cols);
  std::vector<uint8_t> out(row_bytes * rows);
  for (int64_t r = 0; r < rows; ++r) {
    QuantizeRow(type, w.data() + r * cols, out.data() + r * row_bytes, cols);
  }
  return out;
}

std::vector<float> RandomVector(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Exact dot (in double) of the dequantized weight row with the activations as
// the kernel sees them (rounded/quantized), plus the scale sum |w*x| for a
// relative tolerance.
std::pair<double, double> ExactDot(TensorType type, const void* row, const float* x, int64_t cols) {
  std::vector<float> w(cols);
  DequantizeRow(type, row, w.data(), cols);
  std::vector<float> xs(x, x + cols);
  if (type == TensorType::kF16) {
    for (float& v : xs) v = Fp16ToFp32(Fp32ToFp16(v));
  } else if (type == TensorType::kBF16) {
    for (float& v : xs) v = Bf16ToFp32(Fp32ToBf16(v));
  } else if (type == TensorType::kQ8_0 || type == TensorType::kQ4_0 || type == TensorType::kQ5_0 ||
             type == TensorType::kIQ4_NL) {
    std::vector<BlockQ8_0> q(cols / 32);
    QuantizeRowQ8_0Activations(x, q.data(), cols);
    DequantizeRow(TensorType::kQ8_0, q.data(), xs.data(), cols);
  } else if (TraitsOf(type).block_size == kQK_K) {  // K-quants, IQ4_XS
    std::vector<BlockQ8_K> q(cols / kQK_K);
    QuantizeRowQ8_K(x, q.data(), cols);
    for (int64_t i = 0; i < cols; ++i) {
      int v = q[i / kQK_K].qs[i % kQK_K];
      // ggml's IQ4_XS byte products count -128 as +128 against a negative level.
      if (type == TensorType::kIQ4_XS && v == -128 && w[i] < 0) v = 128;
      xs[i] = q[i / kQK_K].d * v;
    }
  }
  double dot = 0.0;
  double mag = 0.0;
  if (type == TensorType::kQ4_1 || type == TensorType::kQ5_1) {
    // value = q * d + m: the m part takes the activations' f16 sums s.
    std::vector<BlockQ8_1> q(cols / 32);
    QuantizeRowQ8_1Activations(x, q.data(), cols);
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint16_t m_bits = type == TensorType::kQ4_1 ? static_cast<const BlockQ4_1*>(row)[b].m
                                                        : static_cast<const BlockQ5_1*>(row)[b].m;
      const double m = Fp16ToFp32(m_bits);
      const double xd = Fp16ToFp32(q[b].d);
      dot += m * Fp16ToFp32(q[b].s);
      mag += std::fabs(m * Fp16ToFp32(q[b].s));
      for (int k = 0; k < 32; ++k) {
        const double wq = w[b * 32 + k] - m;
        dot += wq * xd * q[b].qs[k];
        mag += std::fabs(wq * xd * q[b].qs[k]);
      }
    }
    return {dot, mag};
  }
  for (int64_t i = 0; i < cols; ++i) {
    dot += static_cast<double>(w[i]) * xs[i];
    mag += std::fabs(static_cast<double>(w[i]) * xs[i]);
  }
  return {dot, mag};
}

TEST(MatMulTest, MatchesReferenceBitForBitOnAwkwardShapes) {
  std::mt19937 rng(42);
  ThreadPool pool3(3);
  for (TensorType type : kTypes) {
    for (int64_t rows : {1, 3, 7, 33, 130}) {
      for (int64_t cols : {32, 64, 96, 160, 256, 768, 4096}) {
        if (cols % TraitsOf(type).block_size != 0) continue;
        const std::vector<float> wf = RandomVector(rows * cols, rng);
        const std::vector<uint8_t> w = MakeWeights(type, wf, rows, cols);
        const size_t row_bytes = w.size() / rows;
        for (int64_t n_tokens : {1, 2, 5}) {
          const std::vector<float> x = RandomVector(n_tokens * cols, rng);
          std::vector<float> y1(n_tokens * rows, NAN);
          std::vector<float> y3(n_tokens * rows, NAN);
          MatMul(type, w.data(), rows, cols, x.data(), n_tokens, y1.data(), nullptr);
          MatMul(type, w.data(), rows, cols, x.data(), n_tokens, y3.data(), &pool3);
          const DotOrder order = MatMulDotOrder(type, rows, cols, n_tokens);
          for (int64_t t = 0; t < n_tokens; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const float* xt = x.data() + t * cols;
              const void* row = w.data() + r * row_bytes;
              const float ref = DotRowReference(type, row, xt, cols, order);
              const float got = y1[t * rows + r];
              SCOPED_TRACE(testing::Message()
                           << TraitsOf(type).name << " rows=" << rows << " cols=" << cols
                           << " n_tokens=" << n_tokens << " t=" << t << " r=" << r);
              ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(ref))
                  << got << " vs " << ref;
              ASSERT_EQ(std::bit_cast<uint32_t>(y3[t * rows + r]), std::bit_cast<uint32_t>(got));
              // And it is a dot product: close to the exact value.
              const auto [exact, mag] = ExactDot(type, row, xt, cols);
              ASSERT_LE(std::fabs(got - exact), 1e-5 * mag + 1e-30);
            }
          }
        }
      }
    }
  }
}

// Restores the "auto" CPU target however a test ends.
class MatMulOnEveryTargetTest : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(SetCpuTarget("auto").ok()); }
};

// MatMul of random `type` weights over 1..max_tokens tokens, on 1, 2 and 3
// threads, on every CPU target this machine runs, gives each output the
// reference's bits.
void ExpectEveryTokenCountMatchesReference(TensorType type, int64_t rows, int64_t cols,
                                           int64_t max_tokens, std::mt19937& rng) {
  ThreadPool pool2(2);
  ThreadPool pool3(3);
  const std::vector<float> wf = RandomVector(rows * cols, rng);
  const std::vector<uint8_t> w = MakeWeights(type, wf, rows, cols);
  for (const std::string& target : RunnableCpuTargets()) {
    ASSERT_TRUE(SetCpuTarget(target).ok());
    for (int64_t n_tokens = 1; n_tokens <= max_tokens; ++n_tokens) {
      const std::vector<float> x = RandomVector(n_tokens * cols, rng);
      const DotOrder order = MatMulDotOrder(type, rows, cols, n_tokens);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
        std::vector<float> y(n_tokens * rows, NAN);
        MatMul(type, w.data(), rows, cols, x.data(), n_tokens, y.data(), pool);
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            const float ref = DotRowReference(type, w.data() + r * (w.size() / rows),
                                              x.data() + t * cols, cols, order);
            ASSERT_EQ(std::bit_cast<uint32_t>(y[t * rows + r]), std::bit_cast<uint32_t>(ref))
                << target << " " << TraitsOf(type).name << " rows=" << rows << " cols=" << cols
                << " n_tokens=" << n_tokens << " t=" << t << " r=" << r;
          }
        }
      }
    }
  }
}

// The tiled order (rows % 4 == 0, cols % 16 == 0) for the float types, over
// every token count of the register tiles' tails (x86: 3 tokens for AVX2, 6
// for AVX-512) and odd row splits across threads.
TEST_F(MatMulOnEveryTargetTest, FloatTilesOfEveryShapeMatchReference) {
  std::mt19937 rng(9);
  for (TensorType type : {TensorType::kF32, TensorType::kF16, TensorType::kBF16}) {
    for (int64_t rows : {4, 12, 36}) {
      for (int64_t cols : {16, 272, 528}) {  // 528: the AVX2 tiles' passes of 256 columns
        ASSERT_EQ(MatMulDotOrder(type, rows, cols, 1), DotOrder::kTiled);
        ExpectEveryTokenCountMatchesReference(type, rows, cols, 13, rng);
      }
    }
  }
}

// Q4_0 matrices of a multiple of 8 rows, in ggml's repacked order, over
// every batch size up to 67 (the integer GEMM where it runs, else the per-dot
// kernels).
TEST_F(MatMulOnEveryTargetTest, RepackedQ4_0OfEveryBatchSizeMatchesReference) {
  std::mt19937 rng(12);
  ASSERT_EQ(MatMulDotOrder(TensorType::kQ4_0, 16, 96, 1), DotOrder::kRepacked);
  ExpectEveryTokenCountMatchesReference(TensorType::kQ4_0, 16, 96, 67, rng);
}

// Q5_0 (per-dot kernels, not the integer GEMM) over every batch size up to
// 67.
TEST_F(MatMulOnEveryTargetTest, Q5_0OfEveryBatchSizeMatchesReference) {
  std::mt19937 rng(11);
  ExpectEveryTokenCountMatchesReference(TensorType::kQ5_0, 5, 96, 67, rng);
}

// Q4_1, Q5_1, IQ4_NL (an odd block count: the unpaired last block) and
// IQ4_XS over every batch size up to 67.
TEST_F(MatMulOnEveryTargetTest, MinAndIq4TypesOfEveryBatchSizeMatchReference) {
  std::mt19937 rng(12);
  ExpectEveryTokenCountMatchesReference(TensorType::kQ4_1, 5, 96, 67, rng);
  ExpectEveryTokenCountMatchesReference(TensorType::kQ5_1, 5, 96, 67, rng);
  ExpectEveryTokenCountMatchesReference(TensorType::kIQ4_NL, 5, 96, 67, rng);
  ExpectEveryTokenCountMatchesReference(TensorType::kIQ4_XS, 5, 512, 67, rng);
}

// The K-quants' token groups (x86: 4 tokens for AVX2, 4 pairs for AVX-512,
// with odd tails), and every batch size up to 67 on one shape.
TEST_F(MatMulOnEveryTargetTest, KQuantTokenGroupsOfEveryShapeMatchReference) {
  std::mt19937 rng(10);
  for (TensorType type : kKQuantTypes) {
    for (int64_t rows : {3, 8}) {
      for (int64_t cols : {256, 768})
        ExpectEveryTokenCountMatchesReference(type, rows, cols, 19, rng);
    }
    ExpectEveryTokenCountMatchesReference(type, 5, 512, 67, rng);
  }
}

#if defined(__x86_64__)
// The vector rounding of F16/BF16 activations equals the scalar definition on
// every kind of float: ties, subnormals, overflow, infinities and NaNs.
TEST(MatMulTest, VectorHalfRoundingEqualsTheScalarOne) {
  if (!CpuSupports(QGemmTarget::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  std::vector<float> x;
  for (uint32_t bits :
       {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
        0x7fbfffffu, 0x477ff000u, 0x477fefffu, 0x33000000u, 0x33000001u, 0x387fe000u, 0x00000001u,
        0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x7f7fffffu, 0x3c001000u, 0x3c003000u}) {
    x.push_back(std::bit_cast<float>(bits));
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 4000; ++i) x.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  for (TensorType type : {TensorType::kF16, TensorType::kBF16}) {
    std::vector<float> got(x.size());
    RoundToHalfAvx2(type, x.data(), got.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const float want =
          type == TensorType::kF16 ? Fp16ToFp32(Fp32ToFp16(x[i])) : Bf16ToFp32(Fp32ToBf16(x[i]));
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want))
          << TraitsOf(type).name << " input bits " << std::hex << std::bit_cast<uint32_t>(x[i]);
    }
  }
}
#endif

// Every compiled SIMD target (AVX-512, AVX2, and the scalar fallback here)
// must give the reference bits: the lane layouts are width-independent.
TEST(MatMulTest, EveryCompiledTargetMatchesReference) {
  std::mt19937 rng(5);
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    for (TensorType type : kTypes) {
      for (int64_t cols : {96, 256, 1280}) {
        if (cols % TraitsOf(type).block_size != 0) continue;
        const int64_t rows = 12;
        const std::vector<float> wf = RandomVector(rows * cols, rng);
        const std::vector<uint8_t> w = MakeWeights(type, wf, rows, cols);
        for (int64_t n_tokens : {1, 3}) {
          const std::vector<float> x = RandomVector(n_tokens * cols, rng);
          std::vector<float> y(n_tokens * rows, NAN);
          MatMul(type, w.data(), rows, cols, x.data(), n_tokens, y.data(), nullptr);
          const DotOrder order = MatMulDotOrder(type, rows, cols, n_tokens);
          for (int64_t t = 0; t < n_tokens; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const float ref = DotRowReference(type, w.data() + r * (w.size() / rows),
                                                x.data() + t * cols, cols, order);
              ASSERT_EQ(std::bit_cast<uint32_t>(y[t * rows + r]), std::bit_cast<uint32_t>(ref))
                  << hwy::TargetName(target) << " " << TraitsOf(type).name << " cols=" << cols
                  << " t=" << t << " r=" << r;
            }
          }
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(MatMulTest, DispatchFollowsGgmlButNeverTheBatchSize) {
  EXPECT_EQ(MatMulDotOrder(TensorType::kF32, 64, 64, 1), DotOrder::kTiled);
  EXPECT_EQ(MatMulDotOrder(TensorType::kF32, 64, 64, 2), DotOrder::kTiled);
  EXPECT_EQ(MatMulDotOrder(TensorType::kF32, 63, 64, 2), DotOrder::kVecDot);
  EXPECT_EQ(MatMulDotOrder(TensorType::kF16, 64, 172, 5), DotOrder::kVecDot);  // 172 % 16 != 0
  EXPECT_EQ(MatMulDotOrder(TensorType::kF16, 64, 176, 5), DotOrder::kTiled);
  EXPECT_EQ(MatMulDotOrder(TensorType::kQ8_0, 7, 64, 5), DotOrder::kTiled);
  // Q4_0: repacked where ggml's AVX2 build repacks it (rows % 8 == 0).
  EXPECT_EQ(MatMulDotOrder(TensorType::kQ4_0, 8, 64, 1), DotOrder::kRepacked);
  EXPECT_EQ(MatMulDotOrder(TensorType::kQ4_0, 12, 64, 1), DotOrder::kTiled);
  EXPECT_EQ(MatMulDotOrder(TensorType::kQ8_0, 8, 64, 1), DotOrder::kTiled);
}

TEST(MatMulTest, SummationOrdersDifferAsSpecified) {
  // The vec-dot order adds the tail past the last multiple of 64 in double
  // after the lanes; the tiled order keeps it in its lanes. Use values where
  // float rounding makes the two visible.
  const int64_t cols = 80;
  std::vector<float> w(cols, 1.0f);
  std::vector<float> x(cols, 0.0f);
  x[0] = 1e8f;   // lane 0, inside the first step of 64
  x[64] = 3.0f;  // tail: lane 0 of the tiled accumulator
  x[65] = 3.0f;  // tail: lane 1
  // Tiled: lane 0 = fma(1, 3, 1e8) = 1e8 (float spacing is 8 there), lane 1 = 3,
  // and the final 1e8 + 3 rounds back to 1e8.
  EXPECT_EQ(DotRowReference(TensorType::kF32, w.data(), x.data(), cols, DotOrder::kTiled), 1e8f);
  // Vec-dot: the lanes give 1e8, then + 3 + 3 in double = 1e8 + 6 -> 1e8 + 8.
  EXPECT_EQ(DotRowReference(TensorType::kF32, w.data(), x.data(), cols, DotOrder::kVecDot),
            100000008.0f);
  // MatMul picks each order by shape alone: 3 rows -> vec-dot; 4 rows ->
  // tiled, for one token as for two.
  std::vector<float> w4(4 * cols, 1.0f);
  std::vector<float> x2(x);
  x2.insert(x2.end(), x.begin(), x.end());
  std::vector<float> y(8);
  MatMul(TensorType::kF32, w4.data(), 3, cols, x.data(), 1, y.data(), nullptr);
  EXPECT_EQ(y[0], 100000008.0f);
  MatMul(TensorType::kF32, w4.data(), 4, cols, x.data(), 1, y.data(), nullptr);
  EXPECT_EQ(y[0], 1e8f);
  MatMul(TensorType::kF32, w4.data(), 4, cols, x2.data(), 2, y.data(), nullptr);
  EXPECT_EQ(y[0], 1e8f);
  EXPECT_EQ(y[7], 1e8f);
}

TEST(MatMulTest, QuantizedHandCase) {
  // Weights all +1 (Q8_0 with d = 1/127 * 127 ... built by hand), x all 1.
  BlockQ8_0 w;
  w.d = Fp32ToFp16(0.5f);
  for (int j = 0; j < 32; ++j) w.qs[j] = static_cast<int8_t>(j - 16);
  std::vector<float> x(32, 2.0f);  // quantizes to d = 2/127, q = 127
  float y = 0.0f;
  MatMul(TensorType::kQ8_0, &w, 1, 32, x.data(), 1, &y, nullptr);
  // sum(j - 16) * 127 = -16 * 127 = -2032; scale 0.5 * f16(2/127).
  const float dx = Fp16ToFp32(Fp32ToFp16(2.0f / 127.0f));
  EXPECT_FLOAT_EQ(y, -2032.0f * 0.5f * dx);
}

TEST(MatMulTest, BatchingNeverChangesResults) {
  // A position's result is the same alone or in a large batch.
  const int64_t rows = 512, cols = 1024, n = 40;
  std::vector<float> x(n * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * i);
  std::vector<uint8_t> w(RowBytes(TensorType::kQ8_0, cols) * rows);
  std::vector<float> wf(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) wf[c] = std::cos(0.11f * (r * cols + c));
    QuantizeRow(TensorType::kQ8_0, wf.data(), w.data() + r * RowBytes(TensorType::kQ8_0, cols),
                cols);
  }
  std::vector<float> batch(n * rows), one(rows);
  MatMul(TensorType::kQ8_0, w.data(), rows, cols, x.data(), n, batch.data(), nullptr);
  for (int64_t t = 0; t < n; t += 13) {
    MatMul(TensorType::kQ8_0, w.data(), rows, cols, x.data() + t * cols, 1, one.data(), nullptr);
    for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(one[r], batch[t * rows + r]) << t << "," << r;
  }
}

TEST(MatMulTest, ZeroTokensOrRowsDoNothing) {
  std::vector<float> w(64, 1.0f);
  std::vector<float> x(64, 1.0f);
  float y = 123.0f;
  MatMul(TensorType::kF32, w.data(), 1, 64, x.data(), 0, &y, nullptr);
  MatMul(TensorType::kF32, w.data(), 0, 64, x.data(), 1, &y, nullptr);
  EXPECT_EQ(y, 123.0f);
}

}  // namespace
}  // namespace ringlm
