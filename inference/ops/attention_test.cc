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

// Every compiled target (AVX-512, AVX2, scalar, ...) against the references,
// bit for bit, over awkward sizes, strides and offsets.
TEST(AttentionTest, EveryTargetMatchesReferenceBitForBit) {
  std::mt19937 rng(7);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t dim : {1, 2, 7, 16, 63, 64, 80, 128}) {
      for (int64_t extra : {0, 1, 2, 32}) {
        const int64_t stride = dim + extra;
        for (int64_t offset : {0, 1, 2}) {
          for (int64_t n_keys : {1, 3, 15, 16, 17, 40, 129}) {
            const std::vector<uint16_t> kv = RandomHalves(n_keys * stride + offset + dim, rng);
            const std::vector<float> q = RandomFloats(dim, rng);
            std::vector<float> got(n_keys), want(n_keys);
            AttentionScoresF16(q.data(), kv.data() + offset, stride, n_keys, dim, 0.125f,
                               got.data());
            AttentionScoresF16Reference(q.data(), kv.data() + offset, stride, n_keys, dim, 0.125f,
                                        want.data());
            for (int64_t j = 0; j < n_keys; ++j) {
              ASSERT_EQ(std::bit_cast<uint32_t>(got[j]), std::bit_cast<uint32_t>(want[j]))
                  << hwy::TargetName(target) << " scores dim=" << dim << " stride=" << stride
                  << " offset=" << offset << " n_keys=" << n_keys << " j=" << j;
            }
            const std::vector<float> p = RandomFloats(n_keys, rng);
            std::vector<float> out(dim, 0.0f), out_ref(dim, 0.0f);
            AttentionWeightedSumF16(p.data(), kv.data() + offset, stride, n_keys, dim, out.data());
            AttentionWeightedSumF16Reference(p.data(), kv.data() + offset, stride, n_keys, dim,
                                             out_ref.data());
            for (int64_t d = 0; d < dim; ++d) {
              ASSERT_EQ(std::bit_cast<uint32_t>(out[d]), std::bit_cast<uint32_t>(out_ref[d]))
                  << hwy::TargetName(target) << " sum dim=" << dim << " stride=" << stride
                  << " offset=" << offset << " n_keys=" << n_keys << " d=" << d;
            }
          }
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Several queries at once (the heads that share a KV head) give each the
// bits of its own reference run, on every compiled target.
TEST(AttentionTest, QueriesTogetherMatchTheReferenceEachAlone) {
  std::mt19937 rng(11);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t dim : {2, 7, 64}) {
      const int64_t stride = dim * 4 + 2;  // 4 KV heads, like a GQA cache row
      for (int64_t n_q : {1, 3, 4, 5, 8, 9}) {
        for (int64_t n_keys : {1, 15, 16, 17, 129}) {
          const std::vector<uint16_t> kv = RandomHalves(n_keys * stride + dim, rng);
          const std::vector<float> q = RandomFloats(n_q * dim, rng);
          const int64_t scores_stride = n_keys + 3;
          std::vector<float> got(n_q * scores_stride), want(n_keys);
          AttentionScoresF16Queries(q.data(), n_q, kv.data() + dim, stride, n_keys, dim, 0.125f,
                                    got.data(), scores_stride);
          for (int64_t i = 0; i < n_q; ++i) {
            AttentionScoresF16Reference(q.data() + i * dim, kv.data() + dim, stride, n_keys, dim,
                                        0.125f, want.data());
            for (int64_t j = 0; j < n_keys; ++j) {
              ASSERT_EQ(std::bit_cast<uint32_t>(got[i * scores_stride + j]),
                        std::bit_cast<uint32_t>(want[j]))
                  << hwy::TargetName(target) << " dim=" << dim << " n_q=" << n_q
                  << " n_keys=" << n_keys << " query " << i << " key " << j;
            }
          }
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Several queries' weighted sums over the same values give each the bits of
// its own run, on every compiled target.
TEST(AttentionTest, WeightedSumsOfQueriesTogetherMatchEachAlone) {
  std::mt19937 rng(13);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t dim : {7, 64, 80, 128}) {
      const int64_t stride = dim * 4 + 2;  // 4 KV heads, like a GQA cache row
      for (int64_t n_q : {1, 2, 3, 4, 5, 8, 9}) {
        for (int64_t n_keys : {1, 15, 16, 17}) {
          const std::vector<uint16_t> kv = RandomHalves(n_keys * stride + dim, rng);
          const int64_t p_stride = n_keys + 3;
          const int64_t out_stride = dim + 1;
          const std::vector<float> p = RandomFloats(n_q * p_stride, rng);
          std::vector<float> got = RandomFloats(n_q * out_stride, rng);  // sums continue
          std::vector<float> want = got;
          AttentionWeightedSumF16Queries(p.data(), n_q, p_stride, kv.data() + dim, stride, n_keys,
                                         dim, got.data(), out_stride);
          for (int64_t i = 0; i < n_q; ++i) {
            AttentionWeightedSumF16Reference(p.data() + i * p_stride, kv.data() + dim, stride,
                                             n_keys, dim, want.data() + i * out_stride);
          }
          for (size_t k = 0; k < got.size(); ++k) {
            ASSERT_EQ(std::bit_cast<uint32_t>(got[k]), std::bit_cast<uint32_t>(want[k]))
                << hwy::TargetName(target) << " dim=" << dim << " n_q=" << n_q
                << " n_keys=" << n_keys << " at " << k;
          }
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// The references are the plain loops StageEngine::Attention used to run.
TEST(AttentionTest, ReferencesAreThePlainLoops) {
  const uint16_t keys[] = {Fp32ToFp16(1.0f), Fp32ToFp16(2.0f), Fp32ToFp16(-1.5f), Fp32ToFp16(0.5f)};
  const float q[] = {3.0f, 0.25f};
  float scores[2];
  AttentionScoresF16Reference(q, keys, 2, 2, 2, 0.5f, scores);
  EXPECT_EQ(scores[0], (3.0f * 1.0f + 0.25f * 2.0f) * 0.5f);
  EXPECT_EQ(scores[1], (3.0f * -1.5f + 0.25f * 0.5f) * 0.5f);
  const float p[] = {0.75f, 0.25f};
  float out[2] = {0.0f, 0.0f};
  AttentionWeightedSumF16Reference(p, keys, 2, 2, 2, out);
  EXPECT_EQ(out[0], 0.75f * 1.0f + 0.25f * -1.5f);
  EXPECT_EQ(out[1], 0.75f * 2.0f + 0.25f * 0.5f);
}

// The weighted sum continues from `out`: adding the keys in runs (as the
// blocks of a paged KV cache give them) is bit for bit one pass over all.
TEST(AttentionTest, WeightedSumInRunsEqualsOnePass) {
  std::mt19937 rng(11);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t dim : {7, 64, 80}) {
      const int64_t n_keys = 53;
      const std::vector<uint16_t> kv = RandomHalves(n_keys * dim, rng);
      const std::vector<float> p = RandomFloats(n_keys, rng);
      std::vector<float> whole(dim, 0.0f), runs(dim, 0.0f);
      AttentionWeightedSumF16(p.data(), kv.data(), dim, n_keys, dim, whole.data());
      for (int64_t j = 0; j < n_keys; j += 16) {
        const int64_t len = std::min<int64_t>(16, n_keys - j);
        AttentionWeightedSumF16(p.data() + j, kv.data() + j * dim, dim, len, dim, runs.data());
      }
      for (int64_t d = 0; d < dim; ++d) {
        ASSERT_EQ(std::bit_cast<uint32_t>(whole[d]), std::bit_cast<uint32_t>(runs[d]))
            << hwy::TargetName(target) << " dim=" << dim << " d=" << d;
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

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
