// The prompt pump over a request table, against a recording transport: the
// chunk size, the step it builds (with the request's parts on an attempt's
// first chunk only), the in-flight window, and a failed send.
#include "daemon/origin/prompt_pump.h"

#include <memory>

#include "daemon/origin/test_origin.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/token_digest.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;

class PromptPumpTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(OriginOptions{}); }

  void Start(OriginOptions options) {
    pump_.reset();
    context_.options = options;
    context_.transport = &transport_;
    context_.self_id = "o";
    context_.model = OriginModel{.n_embd = 8, .context_size = 64, .n_vocab = 1000};
    pump_ = std::make_unique<PromptPump>(
        &context_, &table_,
        [this](const std::string& id, uint32_t attempt, const absl::Status& status) {
          absl::MutexLock lock(&mu_);
          failures_.push_back(absl::StrCat(id, "#", attempt, ": ", status.message()));
        });
  }
  void TearDown() override { pump_->Stop(); }

  // Adds request `id` with an n-token prompt on plan o, b, c, begins its
  // attempt and schedules the pump.
  void Add(const std::string& id, uint32_t n) {
    absl::MutexLock lock(&table_.mu);
    ActiveRequest& a = table_.requests[id];
    a.request.request_id = id;
    a.request.generation.reuse.session_id = "s-" + id;
    a.request.plan = PlanOf({"o", "b", "c"}, 1);
    for (uint32_t i = 0; i < n; ++i)
      a.request.generation.prompt.push_back(static_cast<int32_t>(100 + i));
    a.request.generation.sampling.temperature = 0.5f;
    a.request.generation.max_tokens = 9;
    a.request.generation.logprobs = true;
    a.request.generation.constraint = R"({"type":"regex","pattern":"a+"})";
    a.request.generation.f16_hidden = true;
    a.order = order_++;
    a.BeginAttempt();
    pump_->ScheduleLocked();
  }
  // Changes request `id` under the lock, then schedules the pump.
  template <typename F>
  void Edit(const std::string& id, F&& edit) {
    absl::MutexLock lock(&table_.mu);
    edit(table_.requests.at(id));
    pump_->ScheduleLocked();
  }
  OriginState StateOf(const std::string& id) {
    absl::MutexLock lock(&table_.mu);
    return table_.requests.at(id).state;
  }
  std::vector<std::string> Failures() {
    absl::MutexLock lock(&mu_);
    return failures_;
  }

  RecordingTransport transport_;
  OriginContext context_;
  RequestTable table_;
  uint64_t order_ = 0;
  absl::Mutex mu_;
  std::vector<std::string> failures_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<PromptPump> pump_;
};

bool HasParts(const v1::StageStepRequest& step) {
  return step.has_plan() || step.has_sampling() || step.has_limits() || step.has_logprobs() ||
         !step.constraint().empty() || step.wire_dtype() != v1::DTYPE_UNSPECIFIED;
}

TEST_F(PromptPumpTest, ChunksFollowTheOptionsAndTheStreams) {
  OriginOptions options;
  options.max_chunk_tokens = 100;
  options.max_chunk_bytes = 8 * 4 * 50;  // 50 tokens of 8 F32 values
  options.busy_chunk_tokens = 16;
  options.busy_chunk_tokens_per_stream = 2;
  options.busy_chunk_depth_per_embd = 0;
  Start(options);
  EXPECT_EQ(pump_->ChunkTokens(0, 0), 50u) << "alone: bounded by the bytes";
  EXPECT_EQ(pump_->ChunkTokens(1, 0), 4u) << "2 * (1 + 1)";
  EXPECT_EQ(pump_->ChunkTokens(3, 0), 8u);
  EXPECT_EQ(pump_->ChunkTokens(20, 0), 16u) << "at most busy_chunk_tokens";
  options.busy_chunk_depth_per_embd = 1;  // D = 8
  Start(options);
  EXPECT_EQ(pump_->ChunkTokens(3, 8), 4u) << "8 * 8 / (8 + 8)";
  EXPECT_EQ(pump_->ChunkTokens(3, 10000), 1u) << "never below one token";
  EXPECT_EQ(pump_->ChunkTokens(0, 10000), 50u) << "alone it does not shrink";
}

TEST_F(PromptPumpTest, TheStepCarriesTheClaimAndThePartsOnTheAttemptsFirstChunk) {
  ActiveRequest a;
  a.request.request_id = "r";
  a.request.generation.reuse.session_id = "s";
  a.request.plan = PlanOf({"o", "b"}, 3);
  a.request.generation.prompt = {1, 2, 3};
  a.request.generation.reuse.reuse_len = 2;
  a.request.generation.reuse.fork_from = "f";
  a.request.generation.sampling.seed = 5;
  a.request.generation.max_tokens = 4;
  a.request.generation.f16_hidden = false;
  a.reply = {7, 8};
  a.attempt = 2;
  a.BeginAttempt();  // positions [2, 5) of 1 2 3 7 8
  const v1::StageStepRequest first = PromptPump::PromptStep(a, "o", 2, 4);
  EXPECT_EQ(first.request_id(), "r#2");
  EXPECT_EQ(first.session_id(), "s");
  EXPECT_EQ(first.origin(), "o");
  EXPECT_EQ(first.stage_index(), 0u);
  EXPECT_EQ(first.position(), 2u);
  EXPECT_EQ(std::vector<int32_t>(first.tokens().begin(), first.tokens().end()),
            (std::vector<int32_t>{3, 7}));
  EXPECT_EQ(first.reuse_len(), 2u);
  const std::vector<int32_t> claimed = {1, 2};
  EXPECT_EQ(first.reuse_digest(), TokenDigest(claimed));
  EXPECT_EQ(first.fork_from(), "f");
  EXPECT_FALSE(first.sample());
  EXPECT_EQ(first.generated(), 2u);
  EXPECT_FALSE(first.parts_omitted());
  EXPECT_EQ(first.plan().epoch(), 3u);
  EXPECT_EQ(first.sampling().seed(), 5u);
  EXPECT_EQ(first.limits().max_tokens(), 4);
  EXPECT_EQ(first.wire_dtype(), v1::DTYPE_F32);

  a.ChunkSent(4);
  const v1::StageStepRequest later = PromptPump::PromptStep(a, "o", 4, 5);
  EXPECT_EQ(later.request_id(), "r#2");
  EXPECT_EQ(later.position(), 4u);
  EXPECT_EQ(later.reuse_len(), 0u);
  EXPECT_TRUE(later.sample());
  EXPECT_TRUE(later.parts_omitted());
  EXPECT_FALSE(HasParts(later));
}

TEST_F(PromptPumpTest, OnlyEachAttemptsFirstChunkCarriesTheParts) {
  OriginOptions options;
  options.max_chunk_tokens = 4;
  Start(options);
  Add("a", 10);
  std::vector<std::string> sent;
  for (size_t n = 1; n <= 3; ++n) {
    const v1::StageStepRequest step = transport_.WaitStep(n).second;
    sent.push_back(absl::StrCat(step.request_id(), "@", step.position(), "+", step.tokens_size(),
                                HasParts(step) ? " parts" : "",
                                step.parts_omitted() ? " omitted" : ""));
  }
  EXPECT_EQ(sent,
            (std::vector<std::string>{"a#0@0+4 parts", "a#0@4+4 omitted", "a#0@8+2 omitted"}));
  const v1::StageStepRequest first = transport_.WaitStep(1).second;
  EXPECT_EQ(first.plan().stages_size(), 3);
  EXPECT_FLOAT_EQ(first.sampling().temperature(), 0.5f);
  EXPECT_EQ(first.limits().max_tokens(), 9);
  EXPECT_TRUE(first.logprobs().enabled());
  EXPECT_THAT(first.constraint(), HasSubstr("regex"));
  EXPECT_EQ(first.wire_dtype(), v1::DTYPE_F16);
  EXPECT_EQ(StateOf("a"), OriginState::kPrefill);

  // The next attempt is a new request at the stages: its first chunk
  // carries the parts again.
  Edit("a", [](ActiveRequest& a) { a.RestartWithoutReuse(); });
  const v1::StageStepRequest again = transport_.WaitStep(4).second;
  EXPECT_EQ(again.request_id(), "a#1");
  EXPECT_EQ(again.position(), 0u);
  EXPECT_TRUE(HasParts(again));
  EXPECT_FALSE(again.parts_omitted());
  EXPECT_TRUE(transport_.WaitStep(5).second.parts_omitted());
}

TEST_F(PromptPumpTest, ARecoveringRequestSendsNothingAndItsChunksNoLongerCount) {
  OriginOptions options;
  options.max_chunk_tokens = 2;
  options.max_prompt_positions_in_flight = 2;  // one chunk, or 2 * (3 + 1) for one request
  Start(options);
  Add("a", 20);
  for (size_t n = 1; n <= 4; ++n) EXPECT_EQ(transport_.WaitStep(n).second.position(), 2 * (n - 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(transport_.steps(), 4u) << "8 positions in flight: the window is full";
  Add("b", 4);  // may send one chunk (it has none in flight), not two
  EXPECT_EQ(transport_.WaitStep(5).second.request_id(), "b#0");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(transport_.steps(), 5u);
  Edit("a", [](ActiveRequest& a) { a.StartRecovery(std::chrono::steady_clock::now()); });
  const v1::StageStepRequest step = transport_.WaitStep(6).second;
  EXPECT_EQ(absl::StrCat(step.request_id(), "@", step.position()), "b#0@2");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(transport_.steps(), 6u) << "a recovers: it sends nothing";
  EXPECT_EQ(StateOf("a"), OriginState::kRecovering);
}

TEST_F(PromptPumpTest, AFailedSendDropsTheRequestsLaterChunksAndReportsTheAttempt) {
  OriginOptions options;
  options.max_chunk_tokens = 2;
  Start(options);
  transport_.FailCallsTo({"o"});
  Add("a", 6);
  for (int i = 0; i < 100 && Failures().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(Failures().size(), 1u) << "one report, however many chunks were queued";
  EXPECT_THAT(Failures()[0], HasSubstr("a#0: sending the prompt to stage 0 (node o): connection"));
  EXPECT_EQ(transport_.steps(), 0u);
}

}  // namespace
}  // namespace ringlm
