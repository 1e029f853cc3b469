// The request state machine on its own: each transition, and what the pump
// and the watchdog read from each state.
#include "daemon/origin/request_state.h"

#include "gtest/gtest.h"

namespace ringlm {
namespace {

// A request with a 10-token prompt that claims its first 4 positions.
ActiveRequest Claiming4Of10() {
  ActiveRequest a;
  a.request.request_id = "r";
  for (int32_t i = 0; i < 10; ++i) a.request.generation.prompt.push_back(100 + i);
  a.request.generation.reuse.reuse_len = 4;
  a.request.generation.reuse.fork_from = "parent";
  return a;
}

TEST(RequestStateTest, AnAttemptGoesFromQueuedThroughPrefillToDecode) {
  ActiveRequest a = Claiming4Of10();
  a.BeginAttempt();
  EXPECT_EQ(a.state, OriginState::kQueued);
  EXPECT_EQ(a.prompt_end, 10u);
  EXPECT_EQ(a.sent, 4u);  // from the reuse point
  EXPECT_TRUE(a.AwaitsFirstToken());
  EXPECT_TRUE(a.SendsPrompt());
  EXPECT_FALSE(a.Streams());
  EXPECT_EQ(a.InFlight(), 0u);

  a.ChunkSent(7);
  EXPECT_EQ(a.state, OriginState::kPrefill);
  EXPECT_EQ(a.InFlight(), 3u);  // 7 sent, the 4 claimed count as noted
  a.noted_positions = 5;
  EXPECT_EQ(a.InFlight(), 2u);
  EXPECT_TRUE(a.SendsPrompt());
  EXPECT_FALSE(a.Streams());

  a.ChunkSent(10);
  EXPECT_EQ(a.state, OriginState::kPrefill);
  EXPECT_FALSE(a.SendsPrompt());
  EXPECT_TRUE(a.Streams()) << "its prompt is in: it decodes soon";
  EXPECT_TRUE(a.AwaitsFirstToken());
  EXPECT_EQ(a.InFlight(), 5u);

  a.TakeToken(42);
  EXPECT_EQ(a.state, OriginState::kDecode);
  EXPECT_EQ(a.reply, std::vector<int32_t>{42});
  EXPECT_FALSE(a.AwaitsFirstToken());
  EXPECT_EQ(a.InFlight(), 0u) << "nothing of the prompt counts once a token is back";
  EXPECT_TRUE(a.Streams());
  a.TakeToken(43);
  EXPECT_EQ(a.state, OriginState::kDecode);
  EXPECT_EQ(a.attempt, 0u);
}

TEST(RequestStateTest, ARecoveryWaitsWithTheNextAttemptAndReplaysPromptPlusReply) {
  ActiveRequest a = Claiming4Of10();
  a.BeginAttempt();
  a.ChunkSent(10);
  a.TakeToken(1);
  a.TakeToken(2);
  a.TakeToken(3);
  const auto now = std::chrono::steady_clock::now();
  a.StartRecovery(now);
  EXPECT_EQ(a.state, OriginState::kRecovering);
  EXPECT_TRUE(a.Recovering());
  EXPECT_EQ(a.attempt, 1u);
  EXPECT_EQ(a.recoveries, 1u);
  EXPECT_EQ(a.failed_at, now);
  EXPECT_FALSE(a.SendsPrompt());
  EXPECT_FALSE(a.Streams());
  EXPECT_EQ(a.InFlight(), 0u);
  EXPECT_FALSE(a.AwaitsFirstToken());

  v1::Plan plan;
  plan.set_epoch(2);
  a.Replanned(plan);
  EXPECT_EQ(a.state, OriginState::kQueued);
  EXPECT_EQ(a.request.plan.epoch(), 2u);
  // All but the token in flight when the attempt failed is claimed.
  EXPECT_EQ(a.request.generation.reuse.reuse_len, 12u);
  EXPECT_TRUE(a.request.generation.reuse.fork_from.empty());
  EXPECT_EQ(a.prompt_end, 13u);
  EXPECT_EQ(a.sent, 12u);
  EXPECT_EQ(a.noted_positions, 0u);
  EXPECT_TRUE(a.SendsPrompt());
  EXPECT_EQ(a.attempt, 1u) << "Replan does not begin yet another attempt";
}

TEST(RequestStateTest, AReplanBeforeAnyTokenKeepsTheOriginalClaim) {
  ActiveRequest a = Claiming4Of10();
  a.BeginAttempt();
  a.ChunkSent(6);
  a.StartRecovery(std::chrono::steady_clock::now());
  a.Replanned(v1::Plan());
  EXPECT_EQ(a.state, OriginState::kQueued);
  EXPECT_EQ(a.request.generation.reuse.reuse_len, 4u);
  EXPECT_EQ(a.request.generation.reuse.fork_from, "parent");
  EXPECT_EQ(a.sent, 4u);
  EXPECT_EQ(a.prompt_end, 10u);
}

TEST(RequestStateTest, ACacheMissRestartsTheNextAttemptFromPositionZero) {
  ActiveRequest a = Claiming4Of10();
  a.BeginAttempt();
  a.ChunkSent(8);
  a.noted_positions = 6;
  a.RestartWithoutReuse();
  EXPECT_EQ(a.state, OriginState::kQueued);
  EXPECT_EQ(a.attempt, 1u);
  EXPECT_EQ(a.recoveries, 0u) << "a miss is no recovery";
  EXPECT_EQ(a.request.generation.reuse.reuse_len, 0u);
  EXPECT_TRUE(a.request.generation.reuse.fork_from.empty());
  EXPECT_EQ(a.sent, 0u);
  EXPECT_EQ(a.noted_positions, 0u);
  EXPECT_EQ(a.prompt_end, 10u);
}

// A request with nothing to generate is never begun: it has no prompt in
// flight, even with a claim (sent stays 0 below reuse_len).
TEST(RequestStateTest, ARequestNeverBegunHasNothingInFlight) {
  ActiveRequest a = Claiming4Of10();
  EXPECT_EQ(a.state, OriginState::kQueued);
  EXPECT_EQ(a.InFlight(), 0u);
  EXPECT_FALSE(a.SendsPrompt());
  EXPECT_FALSE(a.Streams());
}

TEST(RequestStateTest, EndsAndNames) {
  EXPECT_EQ(EndState(v1::FINISH_REASON_STOP), OriginState::kDone);
  EXPECT_EQ(EndState(v1::FINISH_REASON_LENGTH), OriginState::kDone);
  EXPECT_EQ(EndState(v1::FINISH_REASON_CANCELLED), OriginState::kCancelled);
  EXPECT_EQ(EndState(v1::FINISH_REASON_ERROR), OriginState::kFailed);
  EXPECT_EQ(OriginStateName(OriginState::kQueued), "queued");
  EXPECT_EQ(OriginStateName(OriginState::kPrefill), "prefill");
  EXPECT_EQ(OriginStateName(OriginState::kDecode), "decode");
  EXPECT_EQ(OriginStateName(OriginState::kRecovering), "recovering");
  EXPECT_EQ(OriginStateName(OriginState::kFailed), "failed");
  EXPECT_EQ(StageRequestId("req-1", 3), "req-1#3");
}

TEST(RequestStateTest, TheTableFindsARequestOnlyAtItsAttempt) {
  RequestTable table;
  absl::MutexLock lock(&table.mu);
  table.requests["r"].attempt = 2;
  EXPECT_EQ(table.FindLocked("r", 1), nullptr);
  EXPECT_EQ(table.FindLocked("x", 2), nullptr);
  ASSERT_NE(table.FindLocked("r", 2), nullptr);
  EXPECT_EQ(table.FindLocked("r", 2)->attempt, 2u);
}

}  // namespace
}  // namespace ringlm
