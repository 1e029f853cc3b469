#include "inference/sampling/speculation.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(DraftByNgramTest, ContinuesTheLatestEarlierOccurrenceOfTheLastThreeTokens) {
  // "1 2 3 4 5 ... 1 2 3 9 9 ... 1 2 3": the latest earlier "1 2 3" is
  // followed by "9 9 7".
  const std::vector<int32_t> history = {1, 2, 3, 4, 5, 6, 1, 2, 3, 9, 9, 7, 1, 2, 3};
  EXPECT_THAT(DraftByNgram(history, 3), ElementsAre(9, 9, 7));
  EXPECT_THAT(DraftByNgram(history, 8), ElementsAre(9, 9, 7, 1, 2, 3));
  EXPECT_THAT(DraftByNgram(history, 0), IsEmpty());
}

TEST(DraftByNgramTest, FallsBackToTwoTokensAndStopsAtTheEnd) {
  // No earlier "5 2 3"; "2 3" occurred at the start.
  EXPECT_THAT(DraftByNgram(std::vector<int32_t>{2, 3, 8, 5, 2, 3}, 5), ElementsAre(8, 5, 2, 3));
  // A repeated token: the key may overlap its match.
  EXPECT_THAT(DraftByNgram(std::vector<int32_t>{7, 7, 7, 7}, 4), ElementsAre(7));
}

TEST(DraftByNgramTest, FallsBackToTheLastTokenAlone) {
  // No earlier "2 4"; the latest earlier "4" is followed by "1 2 4".
  EXPECT_THAT(DraftByNgram(std::vector<int32_t>{4, 9, 4, 1, 2, 4}, 8), ElementsAre(1, 2, 4));
  // A longer key wins over a later one-token match: "3 4" at the start.
  EXPECT_THAT(DraftByNgram(std::vector<int32_t>{3, 4, 5, 4, 6, 3, 4}, 2), ElementsAre(5, 4));
}

TEST(DraftByNgramTest, NothingWhenTheLastTokenNeverOccurredBefore) {
  EXPECT_THAT(DraftByNgram(std::vector<int32_t>{1, 2, 3, 4, 5}, 4), IsEmpty());
  EXPECT_THAT(DraftByNgram(std::vector<int32_t>{1}, 4), IsEmpty());
  EXPECT_THAT(DraftByNgram(std::vector<int32_t>{}, 4), IsEmpty());
}

TEST(DraftBudgetTest, DraftsAllItMayAndMeasuresAPlainTrip) {
  DraftBudget budget(8);
  EXPECT_EQ(budget.Next(), 8u);
  budget.Record(8, 0, 0.030);
  // A drafting trip, and no plain one to compare it with: the next step is.
  EXPECT_EQ(budget.Next(), 0u);
  budget.Record(0, 0, 0.010);
  // The drafts' cost is measured against it from the next drafting step
  // on: positions cost half a trip each, and drafts never match.
  EXPECT_EQ(budget.Next(), 8u);
  budget.Record(8, 0, 0.050);
  EXPECT_EQ(budget.Next(), 0u);
  // Steps whose trips are not known (steps in flight) measure nothing,
  // and there is nothing to compare.
  DraftBudget unmeasured(1000);
  EXPECT_EQ(unmeasured.Next(), kMaxDrafts);
  unmeasured.Record(kMaxDrafts, kMaxDrafts, 0);
  EXPECT_EQ(unmeasured.Next(), kMaxDrafts);
  EXPECT_EQ(DraftBudget(0).Next(), 0u);
}

TEST(DraftBudgetTest, OddsOfABetRestOnDraftsChecked) {
  DraftBudget budget(8);
  EXPECT_EQ(budget.MatchOdds(1), 0.0);
  budget.Record(0, 0, 0.010);  // a plain step checks nothing
  EXPECT_EQ(budget.MatchOdds(1), 0.0);
  budget.Record(4, 4, 0.010);
  EXPECT_GT(budget.MatchOdds(1), 0.8);
  EXPECT_LT(budget.MatchOdds(9), budget.MatchOdds(1));
  for (int i = 0; i < 20; ++i) budget.Record(4, 0, 0.010);
  EXPECT_LT(budget.MatchOdds(1), 0.2);
}

// Trips of 10 ms, each draft position adding `per_draft` ms; drafts matching
// with probability about `q` each (a step accepts while they match).
DraftBudget Measured(double per_draft_ms, double q) {
  DraftBudget budget(8);
  for (int i = 0; i < 50; ++i) {
    budget.Record(0, 0, 0.010);
    const uint32_t k = 4;
    // Deterministic outcomes whose share matches q: accept floor or ceil.
    const uint32_t accepted = static_cast<uint32_t>(q / (1 - q) + (i % 2 ? 0.5 : 0));
    budget.Record(k, std::min(accepted, k), 0.010 + k * per_draft_ms / 1000);
  }
  return budget;
}

TEST(DraftBudgetTest, DraftsManyWhereTripsCostMoreThanPositions) {
  // A slow link, cheap positions, drafts that usually match: the most.
  EXPECT_EQ(Measured(0.05, 0.8).Next(), 8u);
  // Cheap positions, drafts that rarely match: still worth a few.
  const uint32_t k = Measured(0.05, 0.2).Next();
  EXPECT_GE(k, 1u);
  EXPECT_LE(k, 4u);
}

TEST(DraftBudgetTest, StopsWhereCheckingDraftsCostsMoreThanTheTripsTheySave) {
  // Each position costs a fifth of a trip; drafts match a tenth of the time.
  DraftBudget budget = Measured(2.0, 0.1);
  uint32_t drafted_steps = 0;
  for (int i = 0; i < 64; ++i) {
    const uint32_t k = budget.Next();
    if (k > 0) ++drafted_steps;
    budget.Record(k, 0, 0.010 + k * 0.002);
  }
  // Only the probes, one draft every 32 steps.
  EXPECT_EQ(drafted_steps, 2u);
}

TEST(DraftBudgetTest, ProbesAgainAndFollowsATextThatStartsRepeating) {
  DraftBudget budget = Measured(2.0, 0.1);
  for (int i = 0; i < 200; ++i) {
    const uint32_t k = budget.Next();
    // From now on every draft matches.
    budget.Record(k, k, 0.010 + k * 0.002);
  }
  EXPECT_EQ(budget.Next(), 8u);
}

}  // namespace
}  // namespace ringlm
