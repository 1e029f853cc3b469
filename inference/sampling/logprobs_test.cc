#include "inference/sampling/logprobs.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace ringlm {
namespace {

TEST(LogprobsTest, EqualsLogSoftmaxAndSumsToOne) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  const TokenLogprobs lp = ComputeLogprobs(logits, 2, 5);
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  EXPECT_NEAR(lp.chosen.logprob, -2.0 - std::log(z), 1e-6);
  EXPECT_EQ(lp.chosen.token, 2);
  ASSERT_EQ(lp.top.size(), 5u);
  double total = 0;
  for (const TokenLogprob& t : lp.top) total += std::exp(static_cast<double>(t.logprob));
  EXPECT_NEAR(total, 1.0, 1e-6);
}

TEST(LogprobsTest, TopIsSortedBestFirstWithTiesByLowerId) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  const TokenLogprobs lp = ComputeLogprobs(logits, 0, 3);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].token, 1);
  EXPECT_EQ(lp.top[1].token, 3);
  EXPECT_EQ(lp.top[2].token, 0);
  EXPECT_EQ(lp.top[0].logprob, lp.top[1].logprob);
  EXPECT_GT(lp.top[1].logprob, lp.top[2].logprob);
}

TEST(LogprobsTest, StableForLargeLogitsAndNaN) {
  const std::vector<float> logits = {1000.0f, std::numeric_limits<float>::quiet_NaN(), 999.0f};
  const TokenLogprobs lp = ComputeLogprobs(logits, 1, 2);
  EXPECT_TRUE(std::isinf(lp.chosen.logprob) && lp.chosen.logprob < 0);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].token, 0);
  EXPECT_NEAR(lp.top[0].logprob, -std::log1p(std::exp(-1.0)), 1e-6);
}

TEST(LogprobsTest, NoTopWhenNotAskedAndAtMostTheVocabulary) {
  const std::vector<float> logits = {0.0f, 0.0f};
  EXPECT_TRUE(ComputeLogprobs(logits, 1, 0).top.empty());
  EXPECT_EQ(ComputeLogprobs(logits, 1, 20).top.size(), 2u);
  EXPECT_NEAR(ComputeLogprobs(logits, 1, 0).chosen.logprob, std::log(0.5), 1e-7);
}

}  // namespace
}  // namespace ringlm
