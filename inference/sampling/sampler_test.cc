#include "inference/sampling/sampler.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

// Logits whose softmax is exactly `probs` (up to float rounding).
std::vector<float> LogitsFromProbs(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

// Draws `n` tokens with one sampler and returns the set of ids seen.
std::set<int32_t> Support(const SamplingParams& params, const std::vector<float>& logits, int n) {
  Sampler sampler(params);
  std::set<int32_t> seen;
  for (int i = 0; i < n; ++i) seen.insert(sampler.Sample(logits));
  return seen;
}

std::vector<int32_t> Sequence(const SamplingParams& params, const std::vector<float>& logits,
                              int n) {
  Sampler sampler(params);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(sampler.Sample(logits));
  return out;
}

TEST(SamplerTest, GreedyPicksArgmax) {
  Sampler sampler(Greedy());
  const std::vector<float> logits = {0.1f, -3.0f, 7.5f, 2.0f, 7.4f};
  EXPECT_EQ(sampler.Sample(logits), 2);
}

TEST(SamplerTest, GreedyTiesGoToLowestId) {
  Sampler sampler(Greedy());
  EXPECT_EQ(sampler.Sample(std::vector<float>{1.0f, 5.0f, 3.0f, 5.0f, 5.0f}), 1);
  EXPECT_EQ(sampler.Sample(std::vector<float>{2.0f, 2.0f}), 0);
}

TEST(SamplerTest, GreedyIgnoresNanAndHandlesAllNegInf) {
  Sampler sampler(Greedy());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float ninf = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(sampler.Sample(std::vector<float>{nan, 1.0f, nan, 2.0f}), 3);
  EXPECT_EQ(sampler.Sample(std::vector<float>{ninf, ninf, ninf}), 0);
}

TEST(SamplerTest, EmptyLogitsReturnMinusOne) {
  Sampler sampler(SamplingParams{});
  EXPECT_EQ(sampler.Sample(std::span<const float>()), -1);
}

TEST(SamplerTest, TopKOneEqualsGreedyOnRandomLogits) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> logits(1000);
    for (float& l : logits) l = normal(gen);
    // Plant ties at the top on some trials: top-k must break them like greedy.
    if (trial % 2 == 0) logits[700] = logits[300] = 100.0f;
    SamplingParams top1;
    top1.top_k = 1;
    top1.seed = trial;
    Sampler greedy(Greedy());
    Sampler sampled(top1);
    EXPECT_EQ(sampled.Sample(logits), greedy.Sample(logits)) << "trial " << trial;
  }
}

TEST(SamplerTest, TopKRestrictsSupport) {
  SamplingParams p;
  p.top_k = 2;
  // Best two are ids 3 and 0.
  const std::vector<float> logits = {1.0f, 0.5f, 0.2f, 1.1f, 0.9f};
  EXPECT_EQ(Support(p, logits, 2000), (std::set<int32_t>{0, 3}));
}

TEST(SamplerTest, TopPKeepsSmallestPrefixReachingP) {
  // Shuffled ids so that the filter has to sort.
  //                 id:   0       1     2      3     4
  const auto logits = LogitsFromProbs({0.0625, 0.5, 0.125, 0.0625, 0.25});
  SamplingParams p;
  p.top_p = 0.4f;  // 0.5 alone reaches it
  EXPECT_EQ(Support(p, logits, 2000), (std::set<int32_t>{1}));
  p.top_p = 0.7f;  // 0.5 + 0.25
  EXPECT_EQ(Support(p, logits, 2000), (std::set<int32_t>{1, 4}));
  p.top_p = 0.8f;  // 0.5 + 0.25 + 0.125
  EXPECT_EQ(Support(p, logits, 4000), (std::set<int32_t>{1, 2, 4}));
  p.top_p = 1.0f;  // off
  EXPECT_EQ(Support(p, logits, 4000), (std::set<int32_t>{0, 1, 2, 3, 4}));
}

TEST(SamplerTest, TopPOnLargeVocabularyNeedsSeveralSortChunks) {
  // 1000 equal logits: a 0.5 nucleus is ids 0..499 (ties sort by id), past
  // the first two sorted chunks. Only those can be drawn, and most of them are.
  const std::vector<float> logits(1000, 0.0f);
  SamplingParams p;
  p.top_p = 0.5f;
  const std::set<int32_t> seen = Support(p, logits, 4000);
  ASSERT_FALSE(seen.empty());
  EXPECT_LE(*seen.rbegin(), 499);
  EXPECT_GT(seen.size(), 450u);
}

TEST(SamplerTest, MinPKeepsTokensAboveFractionOfTop) {
  const auto logits = LogitsFromProbs({0.1, 0.3, 0.4, 0.2});
  SamplingParams p;
  p.min_p = 0.6f;  // threshold 0.24
  EXPECT_EQ(Support(p, logits, 2000), (std::set<int32_t>{1, 2}));
  p.min_p = 0.3f;  // threshold 0.12
  EXPECT_EQ(Support(p, logits, 4000), (std::set<int32_t>{1, 2, 3}));
  p.min_p = 1.0f;  // only the top
  EXPECT_EQ(Support(p, logits, 500), (std::set<int32_t>{2}));
}

TEST(SamplerTest, FiltersSeeTemperatureOneProbabilities) {
  // llama.cpp order: top_p runs before temperature. At T = 50 the
  // distribution is almost flat, yet the nucleus is still {1, 4}.
  const auto logits = LogitsFromProbs({0.0625, 0.5, 0.125, 0.0625, 0.25});
  SamplingParams p;
  p.top_p = 0.7f;
  p.temperature = 50.0f;
  EXPECT_EQ(Support(p, logits, 4000), (std::set<int32_t>{1, 4}));
  p.top_p = 1.0f;
  p.min_p = 0.4f;  // keeps p >= 0.2 at T = 1
  EXPECT_EQ(Support(p, logits, 4000), (std::set<int32_t>{1, 4}));
}

TEST(SamplerTest, SameSeedSameSequenceDifferentSeedDifferent) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  SamplingParams a;
  a.seed = 1234;
  a.top_k = 40;
  a.top_p = 0.95f;
  const auto first = Sequence(a, logits, 200);
  EXPECT_EQ(first, Sequence(a, logits, 200));
  SamplingParams b = a;
  b.seed = 1235;
  EXPECT_NE(first, Sequence(b, logits, 200));
}

// A request moved to another node rebuilds its sampler from the tokens it
// generated: from there on it must choose exactly what the original would
// have, with penalties counting the same history, and also after a step
// that returned early (a +inf logit) without a weighted draw.
TEST(SamplerTest, FastForwardContinuesExactlyWhereTheOriginalWas) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<std::vector<float>> steps(120, std::vector<float>(64));
  for (auto& logits : steps) {
    for (float& l : logits) l = normal(gen);
  }
  steps[10][5] = std::numeric_limits<float>::infinity();
  for (float temperature : {0.0f, 0.8f}) {
    SamplingParams p;
    p.seed = 99;
    p.temperature = temperature;
    p.top_p = 0.9f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.3f;
    Sampler original(p);
    std::vector<int32_t> tokens;
    for (const auto& logits : steps) {
      tokens.push_back(original.Sample(logits));
      original.Accept(tokens.back());
    }
    for (size_t cut : {size_t{0}, size_t{1}, size_t{11}, size_t{60}, size_t{119}}) {
      Sampler resumed(p);
      resumed.FastForward(std::span<const int32_t>(tokens.data(), cut));
      for (size_t i = cut; i < steps.size(); ++i) {
        const int32_t t = resumed.Sample(steps[i]);
        ASSERT_EQ(t, tokens[i]) << "temperature " << temperature << ", resumed at " << cut
                                << ", step " << i;
        resumed.Accept(t);
      }
    }
  }
}

TEST(SamplerTest, DrawFrequenciesFollowTemperatureSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f};
  for (float temperature : {0.7f, 1.0f, 2.5f}) {
    SamplingParams p;
    p.temperature = temperature;
    p.seed = 99;
    Sampler sampler(p);
    constexpr int kDraws = 40000;
    std::vector<int> counts(logits.size(), 0);
    for (int i = 0; i < kDraws; ++i) ++counts[sampler.Sample(logits)];

    double z = 0;
    for (float l : logits) z += std::exp(l / temperature);
    double chi2 = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      const double expected = kDraws * std::exp(logits[i] / temperature) / z;
      chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    }
    // 4 degrees of freedom: P(chi2 > 18.47) = 0.001. The seed is fixed, so a
    // pass is stable; a wrong temperature gives chi2 in the thousands.
    EXPECT_LT(chi2, 18.47) << "temperature " << temperature;
  }
}

TEST(SamplerTest, PresencePenaltyIsSubtractedOnce) {
  SamplingParams p = Greedy();
  p.presence_penalty = 0.6f;
  Sampler sampler(p);
  const std::vector<float> logits = {3.0f, 2.0f, 0.0f};
  EXPECT_EQ(sampler.Sample(logits), 0);
  sampler.Accept(0);
  sampler.Accept(0);
  sampler.Accept(0);
  EXPECT_EQ(sampler.Sample(logits), 0);  // 3.0 - 0.6 = 2.4 > 2.0 (not 3 * 0.6)
  p.presence_penalty = 1.5f;
  Sampler stronger(p);
  stronger.Accept(0);
  EXPECT_EQ(stronger.Sample(logits), 1);  // 1.5 < 2.0
}

TEST(SamplerTest, FrequencyPenaltyScalesWithCount) {
  SamplingParams p = Greedy();
  p.frequency_penalty = 0.4f;
  Sampler sampler(p);
  const std::vector<float> logits = {3.0f, 2.0f};
  sampler.Accept(0);
  sampler.Accept(0);
  EXPECT_EQ(sampler.Sample(logits), 0);  // 3.0 - 0.8 = 2.2
  sampler.Accept(0);
  EXPECT_EQ(sampler.Sample(logits), 1);  // 3.0 - 1.2 = 1.8
}

TEST(SamplerTest, NegativePenaltyBoostsAndOutOfRangeTokensAreIgnored) {
  SamplingParams p = Greedy();
  p.presence_penalty = -2.0f;
  Sampler sampler(p);
  sampler.Accept(2);
  sampler.Accept(1000);  // not in this vocabulary
  sampler.Accept(-5);
  EXPECT_EQ(sampler.Sample(std::vector<float>{3.0f, 2.0f, 1.5f}), 2);  // 1.5 + 2 = 3.5
}

TEST(SamplerTest, PenaltiesApplyBeforeTheSamplingChain) {
  // Token 0 dominates until penalized; with top_k = 1 the chain must see the
  // penalized logits and always return token 1.
  SamplingParams p;
  p.top_k = 1;
  p.frequency_penalty = 2.0f;
  Sampler sampler(p);
  sampler.Accept(0);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sampler.Sample(std::vector<float>{5.0f, 4.0f}), 1);
}

TEST(SamplingParamsTest, DefaultsAreValidAndMatchOpenAi) {
  SamplingParams p;
  EXPECT_TRUE(p.Validate().ok());
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.top_k, 0);
}

TEST(SamplingParamsTest, ValidateRejectsOutOfRangeValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    SamplingParams params;
    const char* field;
  };
  std::vector<Case> cases;
  auto with = [&](auto setter, const char* field) {
    SamplingParams p;
    setter(p);
    cases.push_back({p, field});
  };
  with([](SamplingParams& p) { p.temperature = -0.1f; }, "temperature");
  with([](SamplingParams& p) { p.temperature = 101.0f; }, "temperature");
  with([&](SamplingParams& p) { p.temperature = nan; }, "temperature");
  with([](SamplingParams& p) { p.top_k = -1; }, "top_k");
  with([](SamplingParams& p) { p.top_p = 0.0f; }, "top_p");
  with([](SamplingParams& p) { p.top_p = 1.01f; }, "top_p");
  with([&](SamplingParams& p) { p.top_p = nan; }, "top_p");
  with([](SamplingParams& p) { p.min_p = -0.01f; }, "min_p");
  with([](SamplingParams& p) { p.min_p = 1.5f; }, "min_p");
  with([](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty");
  with([](SamplingParams& p) { p.frequency_penalty = -2.01f; }, "frequency_penalty");
  for (const Case& c : cases) {
    const absl::Status status = c.params.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.field));
  }

  SamplingParams edges;
  edges.temperature = 0.0f;
  edges.top_p = 1.0f;
  edges.min_p = 1.0f;
  edges.presence_penalty = -2.0f;
  edges.frequency_penalty = 2.0f;
  edges.top_k = 5;
  EXPECT_TRUE(edges.Validate().ok());
}

}  // namespace
}  // namespace ringlm
