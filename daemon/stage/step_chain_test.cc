#include "daemon/stage/step_chain.h"

#include <vector>

#include "gtest/gtest.h"

namespace ringlm {
namespace {

TEST(StepChainTest, AStepAloneLeavesTheChainIdle) {
  StepChain chain(0, false);
  EXPECT_EQ(chain.Advance(10, 5), StepChain::Next::kIdle);  // the prompt's step: never sent here
  const std::vector<int32_t> step = {5, 6, 7};
  chain.Sent(10, step);
  EXPECT_EQ(chain.in_flight(), 1u);
  EXPECT_EQ(chain.End(10), 13u);
  EXPECT_EQ(chain.Advance(11, 9), StepChain::Next::kIdle);
  EXPECT_EQ(chain.in_flight(), 0u);
  EXPECT_EQ(chain.branch(), 0u);
}

TEST(StepChainTest, AStepSentAheadGoesOnWhenItsBetWins) {
  StepChain chain(2, false);
  const std::vector<int32_t> first = {5, 6, 7}, second = {8, 9};
  chain.Sent(10, first);
  chain.Sent(13, second);
  EXPECT_EQ(chain.End(0), 15u);
  EXPECT_EQ(std::vector<int32_t>(chain.tokens().begin(), chain.tokens().end()),
            (std::vector<int32_t>{5, 6, 7, 8, 9}));
  // Both drafts accepted, and 8 sampled after them: the second step holds.
  EXPECT_EQ(chain.Advance(13, 8), StepChain::Next::kContinues);
  EXPECT_EQ(chain.in_flight(), 1u);
  EXPECT_EQ(std::vector<int32_t>(chain.tokens().begin(), chain.tokens().end()),
            (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(chain.branch(), 2u);
  EXPECT_FALSE(chain.IsVoid(2));
}

TEST(StepChainTest, ARejectedDraftVoidsTheStepsInFlight) {
  const std::vector<int32_t> first = {5, 6, 7}, second = {8, 9}, third = {1};
  for (auto [valid, token] : {std::pair{12u, 8}, std::pair{13u, 4}}) {
    StepChain chain(0, false);
    chain.Sent(10, first);
    chain.Sent(13, second);
    chain.Sent(15, third);
    // A draft rejected (12 positions stand), or all accepted but another
    // token sampled after them (4, not 8).
    EXPECT_EQ(chain.Advance(valid, token), StepChain::Next::kVoided);
    EXPECT_EQ(chain.in_flight(), 0u);
    EXPECT_TRUE(chain.tokens().empty());
    EXPECT_EQ(chain.branch(), 1u);
    EXPECT_TRUE(chain.IsVoid(0));
    EXPECT_FALSE(chain.IsVoid(1));
  }
}

TEST(StepChainTest, StepsItNeverSawAreVoidedOnce) {
  StepChain chain(3, true);
  EXPECT_EQ(chain.Advance(20, 1), StepChain::Next::kVoided);
  EXPECT_EQ(chain.branch(), 4u);
  EXPECT_EQ(chain.Advance(21, 1), StepChain::Next::kIdle);
}

}  // namespace
}  // namespace ringlm
