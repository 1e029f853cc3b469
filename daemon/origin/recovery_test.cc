// Recovery over a request table, with a real pump, a recording transport
// and a fake cluster: a failed attempt is cancelled and replayed on the next
// plan without the dead nodes, the bounds end the request through `fail`,
// a cache miss restarts the prompt without reuse, and the watchdog finds
// stalls and stages that stopped answering.
#include "daemon/origin/recovery.h"

#include <deque>
#include <memory>

#include "daemon/origin/test_origin.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using namespace std::chrono_literals;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

class OriginRecoveryUnitTest : public ::testing::Test, protected FakeClusterHooks {
 protected:
  void SetUp() override { Start(OriginOptions{}); }
  void TearDown() override { StopAll(); }

  void StopAll() {
    if (recovery_) recovery_->Stop();
    if (pump_) pump_->Stop();
    cleanup_->Stop();
  }

  void Start(OriginOptions options) {
    if (recovery_) StopAll();
    recovery_.reset();
    pump_.reset();
    cleanup_ = std::make_unique<TaskQueue>("test-cleanup");
    context_.options = options;
    context_.transport = &transport_;
    context_.self_id = "o";
    context_.model = OriginModel{.n_embd = 8, .context_size = 64, .n_vocab = 1000};
    InstallOn(context_.cluster);
    pump_ = std::make_unique<PromptPump>(
        &context_, &table_,
        [this](const std::string& id, uint32_t attempt, const absl::Status& status) {
          recovery_->Recover(id, attempt, status);
        });
    recovery_ =
        std::make_unique<OriginRecovery>(&context_, &table_, pump_.get(), cleanup_.get(),
                                         [this](const std::string& id, const absl::Status& status) {
                                           absl::MutexLock lock(&mu_);
                                           failed_.push_back({id, status});
                                         });
  }

  // Puts request "r" (prompt 1 50 60 70, claiming `reuse_len`) on plan o,
  // b, c into the table with its prompt sent and `tokens` tokens back.
  void AddRunning(uint32_t tokens, uint32_t reuse_len = 0) {
    absl::MutexLock lock(&table_.mu);
    ActiveRequest& a = table_.requests["r"];
    a.request.request_id = "r";
    a.request.generation.reuse.session_id = "s";
    a.request.plan = PlanOf({"o", "b", "c"}, 1);
    a.request.generation.prompt = {1, 50, 60, 70};
    a.request.generation.reuse.reuse_len = reuse_len;
    a.request.generation.max_tokens = 10;
    a.start = a.last_progress = std::chrono::steady_clock::now();
    a.BeginAttempt();
    a.ChunkSent(a.prompt_end);
    for (uint32_t i = 0; i < tokens; ++i) a.TakeToken(static_cast<int32_t>(100 + i));
  }
  // A copy of request "r" as it stands.
  ActiveRequest Get() {
    absl::MutexLock lock(&table_.mu);
    return table_.requests.at("r");
  }
  std::vector<std::pair<std::string, absl::Status>> WaitFailed() {
    absl::MutexLock lock(&mu_);
    auto any = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !failed_.empty(); };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&any), absl::Seconds(10)));
    return failed_;
  }

  RecordingTransport transport_;
  OriginContext context_;
  RequestTable table_;
  std::vector<std::pair<std::string, absl::Status>> failed_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<TaskQueue> cleanup_;
  std::unique_ptr<PromptPump> pump_;
  std::unique_ptr<OriginRecovery> recovery_;
};

TEST_F(OriginRecoveryUnitTest, AFailedAttemptIsCancelledAndReplayedWithoutTheDeadNodes) {
  {
    absl::MutexLock lock(&mu_);
    dead_ = {"c"};
    plans_ = {PlanOf({"o", "b"}, 2)};
  }
  AddRunning(3);
  recovery_->Recover("r", 0, absl::UnavailableError("forwarding to stage 2"));
  const auto [to, replay] = transport_.WaitStep(1);
  EXPECT_EQ(to, "o");
  EXPECT_EQ(replay.request_id(), "r#1");
  EXPECT_EQ(replay.plan().stages_size(), 2) << "the replay's first chunk carries the parts";
  EXPECT_FALSE(replay.parts_omitted());
  EXPECT_EQ(replay.reuse_len(), 6u);  // all but the token in flight
  EXPECT_EQ(replay.position(), 6u);
  EXPECT_EQ(replay.generated(), 3u);
  EXPECT_TRUE(replay.sample());
  EXPECT_THAT(transport_.WaitCancels(3), UnorderedElementsAre("o r#0", "b r#0", "c r#0"));
  const ActiveRequest a = Get();
  EXPECT_EQ(a.attempt, 1u);
  EXPECT_EQ(a.recoveries, 1u);
  EXPECT_EQ(a.state, OriginState::kPrefill);
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(unreachable_, std::vector<std::string>{"c"});
  EXPECT_EQ(avoided_, std::vector<std::vector<std::string>>{{"c"}});
  EXPECT_TRUE(failed_.empty());
}

// A stage that restarted answers as a new instance: the request replays
// (its KV there is gone), on a plan that may keep the node, and the node is
// not reported unreachable, which would drop its new instance from the
// cluster (a restarted node then rejoined a whole announcement later).
TEST_F(OriginRecoveryUnitTest, AStageThatRestartedIsReplayedOnAndNotReported) {
  {
    absl::MutexLock lock(&mu_);
    restarted_ = {"c"};
    plans_ = {PlanOf({"o", "b", "c"}, 2)};
  }
  AddRunning(3);
  recovery_->Recover("r", 0, absl::UnavailableError("forwarding to stage 2"));
  const auto [to, replay] = transport_.WaitStep(1);
  EXPECT_EQ(replay.request_id(), "r#1");
  EXPECT_EQ(replay.plan().stages_size(), 3);
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(unreachable_.empty());
  EXPECT_EQ(avoided_, std::vector<std::vector<std::string>>{{}});
  EXPECT_TRUE(failed_.empty());
}

TEST_F(OriginRecoveryUnitTest, AStaleAttemptOrARecoveringRequestIsLeftAlone) {
  {
    absl::MutexLock lock(&mu_);
    plans_ = {PlanOf({"o", "b"}, 2)};
  }
  AddRunning(1);
  recovery_->Recover("r", 3, absl::UnavailableError("late"));
  recovery_->Recover("nobody", 0, absl::UnavailableError("late"));
  EXPECT_EQ(Get().recoveries, 0u);
  EXPECT_EQ(Get().state, OriginState::kDecode);
  {
    absl::MutexLock lock(&table_.mu);
    table_.requests.at("r").state = OriginState::kRecovering;  // as if a replan were waiting
  }
  recovery_->Recover("r", 0, absl::UnavailableError("again"));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(Get().recoveries, 0u);
  EXPECT_EQ(transport_.steps(), 0u);
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(avoided_.empty()) << "no replan";
  EXPECT_TRUE(failed_.empty());
}

TEST_F(OriginRecoveryUnitTest, ABadRequestFailsAtOnce) {
  AddRunning(0);
  recovery_->Recover("r", 0, absl::InvalidArgumentError("bad constraint"));
  const auto failed = WaitFailed();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].first, "r");
  EXPECT_EQ(failed[0].second.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Get().state, OriginState::kPrefill);
  EXPECT_EQ(Get().recoveries, 0u);
}

TEST_F(OriginRecoveryUnitTest, RecoveriesAreBounded) {
  OriginOptions options;
  options.max_recoveries = 1;
  Start(options);
  AddRunning(2);
  {
    absl::MutexLock lock(&table_.mu);
    table_.requests.at("r").recoveries = 1;
  }
  recovery_->Recover("r", 0, absl::ResourceExhaustedError("queue full"));
  const auto failed = WaitFailed();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].second.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(failed[0].second.message(), "queue full (after 1 recoveries)");
  EXPECT_EQ(Get().attempt, 0u);
}

TEST_F(OriginRecoveryUnitTest, NoPlanFailsTheRequestWithTheShortfall) {
  AddRunning(2);
  recovery_->Recover("r", 0, absl::UnavailableError("stage 2 is gone"));
  const auto failed = WaitFailed();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].second.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(failed[0].second.message(),
              HasSubstr("stage 2 is gone; no new plan: model needs 9 MiB: 3 MiB short"));
  EXPECT_EQ(Get().state, OriginState::kRecovering);
}

TEST_F(OriginRecoveryUnitTest, ACacheMissCancelsEverywhereThenRestartsFromPositionZero) {
  AddRunning(0, /*reuse_len=*/2);
  ASSERT_TRUE(recovery_->RetryWithoutReuseLater("r", 0));
  const v1::StageStepRequest retry = transport_.WaitStep(1).second;
  EXPECT_EQ(transport_.WaitCancels(3), (std::vector<std::string>{"o r#0", "b r#0", "c r#0"}))
      << "every stage forgets the failed attempt before the retry's first step";
  EXPECT_EQ(retry.request_id(), "r#1");
  EXPECT_EQ(retry.position(), 0u);
  EXPECT_EQ(retry.reuse_len(), 0u);
  EXPECT_EQ(retry.tokens_size(), 4);
  EXPECT_TRUE(retry.has_plan());
  EXPECT_FALSE(retry.parts_omitted());
  const ActiveRequest a = Get();
  EXPECT_EQ(a.attempt, 1u);
  EXPECT_EQ(a.recoveries, 0u);
  EXPECT_EQ(a.request.generation.reuse.reuse_len, 0u);
  // A retry for an attempt the request no longer runs does nothing.
  ASSERT_TRUE(recovery_->RetryWithoutReuseLater("r", 0));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(transport_.steps(), 1u);
  EXPECT_EQ(Get().attempt, 1u);
}

TEST_F(OriginRecoveryUnitTest, ACacheMissWhoseCancelFailsRecoversInstead) {
  {
    absl::MutexLock lock(&mu_);
    plans_ = {PlanOf({"o", "c"}, 2)};
  }
  transport_.FailCallsTo({"b"});
  AddRunning(0, /*reuse_len=*/2);
  ASSERT_TRUE(recovery_->RetryWithoutReuseLater("r", 0));
  const v1::StageStepRequest replay = transport_.WaitStep(1).second;
  EXPECT_EQ(replay.request_id(), "r#1");
  EXPECT_EQ(replay.reuse_len(), 2u) << "no reply yet: the original claim stands";
  EXPECT_EQ(replay.plan().stages_size(), 2);
  EXPECT_EQ(Get().recoveries, 1u);
}

TEST_F(OriginRecoveryUnitTest, TheWatchdogRecoversAStall) {
  OriginOptions options;
  options.no_progress_timeout = 300ms;
  Start(options);
  {
    absl::MutexLock lock(&mu_);
    plans_ = {PlanOf({"o", "b", "c"}, 2)};
  }
  AddRunning(1);
  EXPECT_EQ(transport_.WaitStep(1).second.request_id(), "r#1");
  EXPECT_EQ(Get().recoveries, 1u);
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(unreachable_.empty());
}

TEST_F(OriginRecoveryUnitTest, TheWatchdogRecoversFromAStageThatStopsAnswering) {
  OriginOptions options;
  options.health_interval = 100ms;
  Start(options);
  {
    absl::MutexLock lock(&mu_);
    plans_ = {PlanOf({"o", "c"}, 2)};
  }
  AddRunning(1);
  {
    absl::MutexLock lock(&mu_);
    dead_ = {"b"};
  }
  const v1::StageStepRequest replay = transport_.WaitStep(1).second;
  EXPECT_EQ(replay.request_id(), "r#1");
  EXPECT_EQ(replay.generated(), 1u);
  absl::MutexLock lock(&mu_);
  EXPECT_THAT(unreachable_, Contains("b"));
  ASSERT_FALSE(avoided_.empty());
  EXPECT_EQ(avoided_[0], std::vector<std::string>{"b"});
}

TEST_F(OriginRecoveryUnitTest, TheWatchdogReplaysFromAStageThatRestartedWithoutReportingIt) {
  OriginOptions options;
  options.health_interval = 100ms;
  Start(options);
  {
    absl::MutexLock lock(&mu_);
    plans_ = {PlanOf({"o", "b", "c"}, 2)};
  }
  AddRunning(1);
  {
    absl::MutexLock lock(&mu_);
    restarted_ = {"b"};
  }
  const v1::StageStepRequest replay = transport_.WaitStep(1).second;
  EXPECT_EQ(replay.request_id(), "r#1");
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(unreachable_.empty());
}

TEST_F(OriginRecoveryUnitTest, AResumedAttemptCountsItsReplay) {
  AddRunning(3, /*reuse_len=*/0);
  absl::MutexLock lock(&table_.mu);
  ActiveRequest& a = table_.requests.at("r");
  a.request.generation.reuse.reuse_len = 6;
  a.failed_at = std::chrono::steady_clock::now();
  recovery_->ResumedLocked(a);
  recovery_->ResumedLocked(a);
  EXPECT_EQ(a.replay_reused, 12u);
  EXPECT_EQ(a.replay_positions, 14u);  // 4 prompt + 3 reply, twice
}

}  // namespace
}  // namespace ringlm
