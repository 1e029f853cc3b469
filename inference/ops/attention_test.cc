#include "inference/ops/attention.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "inference/ops/fp16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ringlm {
namespace {

std::vector<uint16_t> RandomHalves(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<uint16_t> out(n);
  for (auto& h : out) h = Fp32ToFp16(dist(rng));
  return out;
}

std::vector<float> RandomFloats(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> out(n);
  for (auto& f : out) f = dist(rng);
  return out;
}

// Row pointers into a cache laid out as rows of `stride` halves from `base`.
std::vector<const uint16_t*> Rows(const uint16_t* base, int64_t stride, int64_t n) {
  std::vector<const uint16_t*> rows(n);
  for (int64_t j = 0; j < n; ++j) rows[j] = base + j * stride;
  return rows;
}

// Every compiled target (AVX-512, AVX2, NEON, scalar, ...) against the
// references, bit for bit, over awkward sizes, strides, offsets and query
// counts (the heads that share a KV head).
TEST(AttentionTest, EveryTargetMatchesReferenceBitForBit) {
  std::mt19937 rng(7);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t dim : {1, 2, 7, 8, 12, 16, 28, 31, 32, 33, 63, 64, 80, 128}) {
      for (int64_t extra : {0, 1, 32}) {
        const int64_t stride = dim + extra;
        for (int64_t offset : {0, 1}) {
          for (int64_t n_keys : {1, 3, 16, 17, 31, 32, 33, 40, 129}) {
            const int64_t n_q = 1 + (n_keys + dim) % 9;
            const std::vector<uint16_t> kv = RandomHalves(n_keys * stride + offset + dim, rng);
            const std::vector<const uint16_t*> rows = Rows(kv.data() + offset, stride, n_keys);
            std::vector<float> q = RandomFloats(n_q * dim, rng);
            RoundThroughF16(q.data(), n_q * dim);
            const int64_t scores_stride = n_keys + 2;
            std::vector<float> got(n_q * scores_stride), want(n_q * scores_stride);
            AttentionScoresF16(q.data(), n_q, rows.data(), n_keys, dim, 0.125f, got.data(),
                               scores_stride);
            AttentionScoresF16Reference(q.data(), n_q, rows.data(), n_keys, dim, 0.125f,
                                        want.data(), scores_stride);
            for (int64_t i = 0; i < n_q; ++i) {
              for (int64_t j = 0; j < n_keys; ++j) {
                const int64_t k = i * scores_stride + j;
                ASSERT_EQ(std::bit_cast<uint32_t>(got[k]), std::bit_cast<uint32_t>(want[k]))
                    << hwy::TargetName(target) << " scores dim=" << dim << " stride=" << stride
                    << " offset=" << offset << " n_keys=" << n_keys << " query " << i << " j=" << j;
              }
            }
            const int64_t p_stride = n_keys + 3;
            const int64_t out_stride = dim + 1;
            std::vector<float> p = RandomFloats(n_q * p_stride, rng);
            RoundThroughF16(p.data(), n_q * p_stride);
            std::vector<float> out(n_q * out_stride, 0.0f), out_ref(n_q * out_stride, 0.0f);
            AttentionWeightedSumF16(p.data(), n_q, p_stride, rows.data(), n_keys, dim, out.data(),
                                    out_stride);
            AttentionWeightedSumF16Reference(p.data(), n_q, p_stride, rows.data(), n_keys, dim,
                                             out_ref.data(), out_stride);
            for (size_t k = 0; k < out.size(); ++k) {
              ASSERT_EQ(std::bit_cast<uint32_t>(out[k]), std::bit_cast<uint32_t>(out_ref[k]))
                  << hwy::TargetName(target) << " sum dim=" << dim << " stride=" << stride
                  << " offset=" << offset << " n_keys=" << n_keys << " at " << k;
            }
          }
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Long contexts: the weighted sum takes its keys in windows, the scores in
// blocks of lanes; both must keep the reference's bits across them.
TEST(AttentionTest, LongContextsMatchReferenceOnEveryTarget) {
  std::mt19937 rng(17);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t dim : {64, 80}) {
      for (int64_t n_keys : {255, 256, 257, 545}) {
        const int64_t n_q = 5;
        const std::vector<uint16_t> kv = RandomHalves(n_keys * dim, rng);
        const std::vector<const uint16_t*> rows = Rows(kv.data(), dim, n_keys);
        std::vector<float> q = RandomFloats(n_q * dim, rng);
        RoundThroughF16(q.data(), n_q * dim);
        std::vector<float> got(n_q * n_keys), want(n_q * n_keys);
        AttentionScoresF16(q.data(), n_q, rows.data(), n_keys, dim, 0.125f, got.data(), n_keys);
        AttentionScoresF16Reference(q.data(), n_q, rows.data(), n_keys, dim, 0.125f, want.data(),
                                    n_keys);
        for (size_t k = 0; k < got.size(); ++k) {
          ASSERT_EQ(std::bit_cast<uint32_t>(got[k]), std::bit_cast<uint32_t>(want[k]))
              << hwy::TargetName(target) << " scores dim=" << dim << " n_keys=" << n_keys << " at "
              << k;
        }
        std::vector<float> p = RandomFloats(n_q * n_keys, rng);
        RoundThroughF16(p.data(), n_q * n_keys);
        std::vector<float> out(n_q * dim), out_ref(n_q * dim);
        AttentionWeightedSumF16(p.data(), n_q, n_keys, rows.data(), n_keys, dim, out.data(), dim);
        AttentionWeightedSumF16Reference(p.data(), n_q, n_keys, rows.data(), n_keys, dim,
                                         out_ref.data(), dim);
        for (size_t k = 0; k < out.size(); ++k) {
          ASSERT_EQ(std::bit_cast<uint32_t>(out[k]), std::bit_cast<uint32_t>(out_ref[k]))
              << hwy::TargetName(target) << " sum dim=" << dim << " n_keys=" << n_keys << " at "
              << k;
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Rows anywhere in memory (a paged cache's blocks, in any order) give the
// bits of the same rows laid out contiguously.
TEST(AttentionTest, ScatteredRowsEqualContiguousRows) {
  std::mt19937 rng(11);
  const int64_t dim = 64;
  const int64_t n_keys = 75;
  const std::vector<uint16_t> kv = RandomHalves(n_keys * dim, rng);
  // The same rows copied in blocks of 16, the blocks in reverse order.
  const int64_t n_blocks = (n_keys + 15) / 16;
  std::vector<uint16_t> paged(n_blocks * 16 * dim);
  std::vector<const uint16_t*> scattered(n_keys);
  for (int64_t j = 0; j < n_keys; ++j) {
    const int64_t slot = (n_blocks - 1 - j / 16) * 16 + j % 16;
    std::copy(kv.begin() + j * dim, kv.begin() + (j + 1) * dim, paged.begin() + slot * dim);
    scattered[j] = paged.data() + slot * dim;
  }
  const std::vector<const uint16_t*> contiguous = Rows(kv.data(), dim, n_keys);
  std::vector<float> q = RandomFloats(dim, rng);
  RoundThroughF16(q.data(), dim);
  std::vector<float> p = RandomFloats(n_keys, rng);
  RoundThroughF16(p.data(), n_keys);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<float> s1(n_keys), s2(n_keys), o1(dim), o2(dim);
    AttentionScoresF16(q.data(), 1, contiguous.data(), n_keys, dim, 0.125f, s1.data(), n_keys);
    AttentionScoresF16(q.data(), 1, scattered.data(), n_keys, dim, 0.125f, s2.data(), n_keys);
    AttentionWeightedSumF16(p.data(), 1, n_keys, contiguous.data(), n_keys, dim, o1.data(), dim);
    AttentionWeightedSumF16(p.data(), 1, n_keys, scattered.data(), n_keys, dim, o2.data(), dim);
    for (int64_t j = 0; j < n_keys; ++j) {
      ASSERT_EQ(std::bit_cast<uint32_t>(s1[j]), std::bit_cast<uint32_t>(s2[j]))
          << hwy::TargetName(target);
    }
    for (int64_t d = 0; d < dim; ++d) {
      ASSERT_EQ(std::bit_cast<uint32_t>(o1[d]), std::bit_cast<uint32_t>(o2[d]))
          << hwy::TargetName(target);
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// The order, on numbers where it shows: one product of 2^24 and 31 products
// of 1 (floats next to 2^24 are 2 apart; ties round to even). Summed left to
// right in float (the engine's order before) every 1 is lost: 2^24. ggml's
// AVX2 order adds the 1s in its accumulators first: lane 0 gets (2^24 + 1) +
// (1 + 1) = 2^24 + 2 (the tie 2^24 + 1 went down), the other lanes 4 each,
// and the tree ends at 2^24 + 30. A 33rd product of 1 goes to the double
// tail: 2^24 + 31, which rounds to the even 2^24 + 32 as a float. Fewer than
// 32 products all take the tail, exact in double, then rounded once.
TEST(AttentionTest, DotProductsFollowGgmlAvx2Order) {
  std::vector<uint16_t> x(33, Fp32ToFp16(1.0f));
  x[0] = Fp32ToFp16(4096.0f);
  std::vector<float> y(33, 1.0f);
  y[0] = 4096.0f;
  EXPECT_EQ(DotF16Ggml(x.data(), y.data(), 32), 16777216.0f + 30.0f);
  EXPECT_EQ(DotF16Ggml(x.data(), y.data(), 33), 16777216.0f + 32.0f);
  EXPECT_EQ(DotF16Ggml(x.data(), y.data(), 31), 16777216.0f + 30.0f);
  EXPECT_EQ(DotF16Ggml(x.data(), y.data(), 30), 16777216.0f + 28.0f);  // 2^24 + 29, to even

  // Scores are those dots times the scale, on every target.
  const std::vector<const uint16_t*> keys = {x.data()};
  // Weighted sum over 32 keys: value row j holds x[j] in its one column,
  // the weights are y: the same 32 products, in the same order.
  std::vector<const uint16_t*> values(33);
  for (int j = 0; j < 33; ++j) values[j] = x.data() + j;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    float score = 0.0f;
    AttentionScoresF16(y.data(), 1, keys.data(), 1, 32, 0.5f, &score, 1);
    EXPECT_EQ(score, (16777216.0f + 30.0f) * 0.5f) << hwy::TargetName(target);
    float out = 0.0f;
    AttentionWeightedSumF16(y.data(), 1, 32, values.data(), 32, 1, &out, 1);
    EXPECT_EQ(out, 16777216.0f + 30.0f) << hwy::TargetName(target);
    // 33 keys: padded with zero weights to 64, so key 32 is not a tail
    // product but joins lane 0's first accumulator, where 2^24 + 1 rounds
    // back to 2^24: the result stays 2^24 + 30.
    AttentionWeightedSumF16(y.data(), 1, 33, values.data(), 33, 1, &out, 1);
    EXPECT_EQ(out, 16777216.0f + 30.0f) << hwy::TargetName(target);
  }
  hwy::SetSupportedTargetsForTest(0);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// ggml_vec_dot_f16 as ggml's AVX2 + FMA + F16C build computes it, written
// with those instructions: the reference must give its bits.
__attribute__((target("avx2,fma,f16c"))) float DotF16Avx2(const uint16_t* x, const float* y,
                                                          int64_t n) {
  const int64_t np = n & ~int64_t{31};
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (int64_t i = 0; i < np; i += 32) {
    for (int a = 0; a < 4; ++a) {
      const __m256 xv =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + 8 * a)));
      acc[a] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(y + i + 8 * a), acc[a]);
    }
  }
  acc[0] = _mm256_add_ps(acc[0], acc[2]);
  acc[1] = _mm256_add_ps(acc[1], acc[3]);
  acc[0] = _mm256_add_ps(acc[0], acc[1]);
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(acc[0]), _mm256_extractf128_ps(acc[0], 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  double sum = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
  for (int64_t i = np; i < n; ++i) {
    const float product = Fp16ToFp32(x[i]) * y[i];
    sum += static_cast<double>(product);
  }
  return static_cast<float>(sum);
}

TEST(AttentionTest, DotF16GgmlIsTheAvx2Instructions) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    GTEST_SKIP() << "no AVX2/FMA on this CPU";
  }
  std::mt19937 rng(5);
  for (int64_t n = 0; n <= 200; ++n) {
    for (int rep = 0; rep < 20; ++rep) {
      const std::vector<uint16_t> x = RandomHalves(n, rng);
      std::vector<float> y = RandomFloats(n, rng);
      RoundThroughF16(y.data(), n);
      ASSERT_EQ(std::bit_cast<uint32_t>(DotF16Ggml(x.data(), y.data(), n)),
                std::bit_cast<uint32_t>(DotF16Avx2(x.data(), y.data(), n)))
          << "n=" << n;
    }
  }
}
#endif

TEST(AttentionTest, RoundThroughF16MatchesScalarOnEveryTarget) {
  std::mt19937 rng(13);
  std::vector<float> x;
  std::normal_distribution<float> dist(0.0f, 1000.0f);
  for (int i = 0; i < 1000; ++i) x.push_back(dist(rng));
  for (float v :
       {0.0f, -0.0f, 65504.0f, 65520.0f, 1e6f, -1e6f, 6e-8f, 3e-8f, 2.9e-8f, 1e-5f, -6.1e-5f,
        1.0009765625f, 1.00048828125f, 1.00146484375f, std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min()}) {
    x.push_back(v);
  }
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<float> got = x;
    RoundThroughF16(got.data(), static_cast<int64_t>(got.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = Fp16ToFp32(Fp32ToFp16(x[i]));
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want))
          << hwy::TargetName(target) << " x=" << x[i];
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace ringlm
