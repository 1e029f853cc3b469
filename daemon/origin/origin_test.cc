// The origin's recovery, against a fake transport and a fake cluster: a
// failed attempt is replayed on the next plan as prompt plus reply, the
// stream goes on without repeats or gaps, what the failed attempt still
// sends is ignored, and the bounds (recoveries, malformed requests, no plan)
// end the request with a clear error.
#include "daemon/origin/origin.h"

#include <deque>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/origin/test_origin.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/token_digest.h"

namespace ringlm {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class OriginRecoveryTest : public ::testing::Test, protected FakeClusterHooks {
 protected:
  void SetUp() override { Start(OriginOptions{}); }

  void Start(OriginOptions options) {
    options.health_interval = 100ms;
    OriginClusterHooks hooks;
    InstallOn(hooks);
    origin_.reset();
    hooks.serving_plan = [] { return PlanOf({"o", "b", "c"}, 1); };
    origin_ = std::make_unique<OriginRegistry>(
        options, &transport_, "o", OriginModel{.n_embd = 8, .context_size = 64, .n_vocab = 1000},
        std::move(hooks));
  }

  // Starts a request on plan o, b, c and returns its id.
  std::string StartRequest(int max_tokens = 10) {
    OriginRequest r;
    r.request_id = "req-1";
    r.generation.reuse.session_id = "s";
    r.plan = PlanOf({"o", "b", "c"}, 1);
    r.generation.prompt = prompt_;
    r.generation.max_tokens = max_tokens;
    r.generation.sampling.temperature = 0.8f;
    r.generation.sampling.seed = 7;
    EXPECT_TRUE(origin_
                    ->Start(std::move(r),
                            [this](const OriginEvent& e) {
                              absl::MutexLock lock(&mu_);
                              events_.push_back(e);
                            })
                    .ok());
    return "req-1";
  }

  // Starts request `id` (session `id`) on plan o, b, c with an n-token
  // prompt, its events ignored.
  void StartPrompt(const std::string& id, uint32_t n, int max_tokens) {
    OriginRequest r;
    r.request_id = id;
    r.generation.reuse.session_id = id;
    r.plan = PlanOf({"o", "b", "c"}, 1);
    for (uint32_t i = 0; i < n; ++i) r.generation.prompt.push_back(static_cast<int32_t>(100 + i));
    r.generation.max_tokens = max_tokens;
    ASSERT_TRUE(origin_->Start(std::move(r), [](const OriginEvent&) {}).ok());
  }

  // From the last stage, c, to attempt 0 of a request StartPrompt began: a
  // note that its first `positions` prompt positions are done, or token
  // `index` of its reply (the last one if `last`).
  absl::StatusOr<bool> NotePrompt(const std::string& id, uint32_t positions) {
    v1::DeliverTokenRequest d;
    d.set_request_id(id + "#0");
    d.set_prompt_positions(positions);
    return origin_->Deliver(d, "c");
  }
  absl::StatusOr<bool> TokenOf(const std::string& id, uint32_t index, bool last) {
    v1::DeliverTokenRequest d;
    d.set_request_id(id + "#0");
    d.set_index(index);
    d.set_token(7);
    if (last) d.set_finish_reason(v1::FINISH_REASON_LENGTH);
    return origin_->Deliver(d, "c");
  }

  // A token (or error) from node `from` for attempt `attempt`.
  absl::StatusOr<bool> Deliver(const std::string& from, uint32_t attempt, uint32_t index,
                               int32_t token, bool last = false) {
    v1::DeliverTokenRequest d;
    d.set_request_id(absl::StrCat("req-1#", attempt));
    d.set_index(index);
    d.set_token(token);
    if (last) d.set_finish_reason(v1::FINISH_REASON_LENGTH);
    return origin_->Deliver(d, from);
  }
  absl::StatusOr<bool> DeliverError(const std::string& from, uint32_t attempt,
                                    absl::StatusCode code, const std::string& message) {
    v1::DeliverTokenRequest d;
    d.set_request_id(absl::StrCat("req-1#", attempt));
    d.set_finish_reason(v1::FINISH_REASON_ERROR);
    d.set_error(message);
    d.set_error_code(static_cast<int32_t>(code));
    return origin_->Deliver(d, from);
  }

  std::vector<OriginEvent> Events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  bool WaitEnded() {
    absl::MutexLock lock(&mu_);
    auto ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !events_.empty() && events_.back().finish != v1::FINISH_REASON_UNSPECIFIED;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&ended), absl::Seconds(10));
  }
  std::vector<int32_t> Tokens() {
    std::vector<int32_t> out;
    for (const OriginEvent& e : Events()) {
      if (e.has_token) out.push_back(e.token);
    }
    return out;
  }

  const std::vector<int32_t> prompt_ = {1, 50, 60, 70};
  RecordingTransport transport_;
  std::vector<OriginEvent> events_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<OriginRegistry> origin_;
};

TEST_F(OriginRecoveryTest, AFailedStageIsReplacedAndTheStreamGoesOnWithoutRepeatsOrGaps) {
  {
    absl::MutexLock lock(&mu_);
    dead_ = {"c"};
    plans_ = {PlanOf({"o", "b"}, 2)};
  }
  StartRequest();
  ASSERT_EQ(transport_.WaitStep(1).second.tokens_size(), 4);
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(Deliver("c", 0, i, 100 + i).ok());
  // Stage b cannot forward to c.
  ASSERT_TRUE(DeliverError("b", 0, absl::StatusCode::kUnavailable, "forwarding to stage 2").ok());
  const auto [to, replay] = transport_.WaitStep(2);
  EXPECT_EQ(to, "o");
  EXPECT_EQ(replay.request_id(), "req-1#1");
  EXPECT_EQ(replay.plan().stages_size(), 2);
  EXPECT_EQ(replay.generated(), 3u);
  EXPECT_TRUE(replay.sample());
  // All but the token in flight is claimed from the stages' KV, by digest.
  const std::vector<int32_t> all = {1, 50, 60, 70, 100, 101, 102};
  EXPECT_EQ(replay.reuse_len(), 6u);
  EXPECT_EQ(replay.position(), 6u);
  EXPECT_EQ(replay.reuse_digest(), TokenDigest(std::span<const int32_t>(all.data(), 6)));
  EXPECT_EQ(std::vector<int32_t>(replay.tokens().begin(), replay.tokens().end()),
            std::vector<int32_t>{102});
  {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(unreachable_, std::vector<std::string>{"c"});
    ASSERT_EQ(avoided_.size(), 1u);
    EXPECT_EQ(avoided_[0], std::vector<std::string>{"c"});
  }
  // The failed attempt's late tokens are dropped; the new last stage's count.
  EXPECT_EQ(*Deliver("c", 0, 3, 999), true);
  EXPECT_EQ(Deliver("c", 1, 3, 103).status().code(), absl::StatusCode::kPermissionDenied);
  for (uint32_t i = 3; i < 10; ++i) ASSERT_TRUE(Deliver("b", 1, i, 100 + i, i == 9).ok());
  ASSERT_TRUE(WaitEnded());
  std::vector<int32_t> expected;
  for (int32_t i = 0; i < 10; ++i) expected.push_back(100 + i);
  EXPECT_EQ(Tokens(), expected);
  EXPECT_EQ(Events().back().finish, v1::FINISH_REASON_LENGTH);
}

// A verified step's tokens come in one call: each is taken in order, and
// one from the wrong sender, of another request or out of order is refused.
TEST_F(OriginRecoveryTest, AStepsTokensComeInOneDelivery) {
  StartRequest();
  transport_.WaitStep(1);
  auto token = [](uint32_t index, int32_t id) {
    v1::DeliverTokenRequest d;
    d.set_request_id("req-1#0");
    d.set_index(index);
    d.set_token(id);
    return d;
  };
  v1::DeliverTokenRequest step = token(0, 100);
  step.set_drafted(4);
  step.set_accepted(2);
  *step.add_then() = token(1, 101);
  *step.add_then() = token(2, 102);
  v1::DeliverTokenRequest foreign = step;
  foreign.mutable_then(0)->set_request_id("req-2#0");
  EXPECT_EQ(origin_->Deliver(foreign, "c").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(origin_->Deliver(step, "b").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Tokens(), std::vector<int32_t>{});
  ASSERT_EQ(*origin_->Deliver(step, "c"), false);
  EXPECT_EQ(Tokens(), (std::vector<int32_t>{100, 101, 102}));
  v1::DeliverTokenRequest last = token(3, 103);
  *last.add_then() = token(4, 104);
  last.mutable_then(0)->set_finish_reason(v1::FINISH_REASON_LENGTH);
  *last.add_then() = token(5, 105);  // past the end: never taken
  ASSERT_EQ(*origin_->Deliver(last, "c"), true);
  ASSERT_TRUE(WaitEnded());
  EXPECT_EQ(Tokens(), (std::vector<int32_t>{100, 101, 102, 103, 104}));
}

TEST_F(OriginRecoveryTest, AFailureDuringThePromptReplaysThePromptAlone) {
  {
    absl::MutexLock lock(&mu_);
    plans_ = {PlanOf({"o", "c"}, 2)};
  }
  StartRequest();
  transport_.WaitStep(1);
  ASSERT_TRUE(DeliverError("b", 0, absl::StatusCode::kFailedPrecondition,
                           "the session holds 0 positions here, the step expects 4")
                  .ok());
  const v1::StageStepRequest replay = transport_.WaitStep(2).second;
  EXPECT_EQ(replay.generated(), 0u);
  EXPECT_EQ(replay.reuse_len(), 0u);
  EXPECT_EQ(replay.tokens_size(), 4);
  {
    absl::MutexLock lock(&mu_);
    EXPECT_TRUE(avoided_.at(0).empty()) << "every stage answered its health call";
  }
}

TEST_F(OriginRecoveryTest, RecoveriesAreBoundedAndTheLastErrorSaysHowMany) {
  OriginOptions options;
  options.max_recoveries = 2;
  Start(options);
  {
    absl::MutexLock lock(&mu_);
    plans_ = {PlanOf({"o", "b", "c"}, 2), PlanOf({"o", "b", "c"}, 3)};
  }
  StartRequest();
  for (uint32_t attempt = 0; attempt <= 2; ++attempt) {
    transport_.WaitStep(attempt + 1);
    ASSERT_TRUE(
        DeliverError("b", attempt, absl::StatusCode::kResourceExhausted, "queue full").ok());
  }
  ASSERT_TRUE(WaitEnded());
  EXPECT_EQ(Events().back().finish, v1::FINISH_REASON_ERROR);
  EXPECT_THAT(Events().back().error.message(), HasSubstr("queue full (after 2 recoveries)"));
}

TEST_F(OriginRecoveryTest, AMalformedRequestFailsAtOnce) {
  StartRequest();
  transport_.WaitStep(1);
  ASSERT_TRUE(DeliverError("c", 0, absl::StatusCode::kInvalidArgument, "bad constraint").ok());
  ASSERT_TRUE(WaitEnded());
  EXPECT_EQ(Events().back().error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(transport_.steps(), 1u);
}

TEST_F(OriginRecoveryTest, WhenTheRestCannotHoldTheModelTheErrorGivesTheShortfall) {
  StartRequest();
  transport_.WaitStep(1);
  ASSERT_TRUE(DeliverError("b", 0, absl::StatusCode::kUnavailable, "stage 2 is gone").ok());
  ASSERT_TRUE(WaitEnded());
  const absl::Status error = Events().back().error;
  EXPECT_EQ(error.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(error.message(), HasSubstr("stage 2 is gone; no new plan: model needs 9 MiB"));
  EXPECT_THAT(error.message(), HasSubstr("3 MiB short"));
}

TEST_F(OriginRecoveryTest, AStageThatStopsAnsweringHealthCallsIsRecoveredFrom) {
  {
    absl::MutexLock lock(&mu_);
    plans_ = {PlanOf({"o", "c"}, 2)};
  }
  StartRequest();
  transport_.WaitStep(1);
  ASSERT_TRUE(Deliver("c", 0, 0, 100).ok());
  {
    absl::MutexLock lock(&mu_);
    dead_ = {"b"};  // hung: no error report ever comes
  }
  const v1::StageStepRequest replay = transport_.WaitStep(2).second;
  EXPECT_EQ(replay.request_id(), "req-1#1");
  EXPECT_EQ(replay.generated(), 1u);
  absl::MutexLock lock(&mu_);
  EXPECT_THAT(unreachable_, ::testing::Contains("b"));
}

// A prompt that takes longer than the no-progress timeout to go in (behind
// other requests' prompts) is not a stall while its last stage notes its
// progress; once the notes stop, the watchdog recovers it.
TEST_F(OriginRecoveryTest, PromptProgressNotesKeepALongPrefillFromCountingAsAStall) {
  OriginOptions options;
  options.no_progress_timeout = 3s;
  Start(options);
  {
    absl::MutexLock lock(&mu_);
    plans_ = {PlanOf({"o", "c"}, 2)};
  }
  StartRequest();
  transport_.WaitStep(1);
  auto note = [&](const std::string& from, uint32_t positions) {
    v1::DeliverTokenRequest d;
    d.set_request_id("req-1#0");
    d.set_prompt_positions(positions);
    return origin_->Deliver(d, from);
  };
  EXPECT_EQ(note("b", 1).status().code(), absl::StatusCode::kPermissionDenied);
  // The prompt has 4 positions: each note must go further, within them.
  EXPECT_EQ(note("c", 5).status().code(), absl::StatusCode::kInvalidArgument);
  const auto start = std::chrono::steady_clock::now();
  for (uint32_t positions = 1; positions <= 4; ++positions) {
    if (positions > 1) std::this_thread::sleep_for(800ms);
    ASSERT_TRUE(note("c", positions).ok());
  }
  std::this_thread::sleep_until(start + 3400ms);  // past the timeout since the start
  EXPECT_EQ(transport_.steps(), 1u);              // no replay
  EXPECT_TRUE(Events().empty());
  // A stage that repeats its last note does not hold the request off the
  // watchdog: it takes the silence for a stall and replays.
  EXPECT_EQ(note("c", 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(transport_.WaitStep(2).second.request_id(), "req-1#1");
}

TEST_F(OriginRecoveryTest, APromptGoesInShortChunksWhileOtherRequestsRun) {
  OriginOptions options;
  options.max_chunk_tokens = 4;
  options.busy_chunk_tokens = 2;
  options.busy_chunk_depth_per_embd = 0;  // by the streams alone
  Start(options);
  StartRequest();  // alone: its 4-token prompt is one step
  EXPECT_EQ(transport_.WaitStep(1).second.tokens_size(), 4);
  OriginRequest r;
  r.request_id = "req-2";
  r.generation.reuse.session_id = "s2";
  r.plan = PlanOf({"o", "b", "c"}, 1);
  r.generation.prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  r.generation.max_tokens = 5;
  ASSERT_TRUE(origin_->Start(std::move(r), [](const OriginEvent&) {}).ok());
  std::vector<uint32_t> positions;
  std::vector<int> sizes;
  for (size_t n = 2; n <= 6; ++n) {
    const v1::StageStepRequest step = transport_.WaitStep(n).second;
    EXPECT_EQ(step.request_id(), "req-2#0");
    positions.push_back(step.position());
    sizes.push_back(step.tokens_size());
    EXPECT_EQ(step.sample(), n == 6);
  }
  EXPECT_EQ(positions, (std::vector<uint32_t>{0, 2, 4, 6, 8}));
  EXPECT_EQ(sizes, (std::vector<int>{2, 2, 2, 2, 1}));
}

// The chunk is chosen chunk by chunk: a long prompt that began alone goes
// in short chunks once another request streams, and in long ones again when
// that stream ends.
TEST_F(OriginRecoveryTest, APromptsChunksShrinkWhileAnotherRequestStreams) {
  OriginOptions options;
  options.max_chunk_tokens = 4;
  options.busy_chunk_tokens = 2;
  options.busy_chunk_depth_per_embd = 0;       // by the streams alone
  options.max_prompt_positions_in_flight = 4;  // alone: 4 chunks (3 stages + 1)
  Start(options);
  auto start = [&](const std::string& id, uint32_t n) { StartPrompt(id, n, 2); };
  // Steps [from, to] (1-based) as "request@position+tokens".
  auto sent = [&](size_t from, size_t to) {
    std::vector<std::string> out;
    for (size_t n = from; n <= to; ++n) {
      const v1::StageStepRequest step = transport_.WaitStep(n).second;
      out.push_back(absl::StrCat(step.request_id(), "@", step.position(), "+", step.tokens_size()));
    }
    return out;
  };
  using V = std::vector<std::string>;
  start("a", 40);  // alone: long chunks
  EXPECT_EQ(sent(1, 4), (V{"a#0@0+4", "a#0@4+4", "a#0@8+4", "a#0@12+4"}));
  start("b", 3);  // a prompt too, so still long: b's goes in one step
  EXPECT_EQ(sent(5, 5), (V{"b#0@0+3"}));
  ASSERT_TRUE(TokenOf("b", 0, false).ok());  // b streams
  ASSERT_TRUE(NotePrompt("a", 12).ok());     // room for 4 positions in short chunks
  EXPECT_EQ(sent(6, 7), (V{"a#0@16+2", "a#0@18+2"}));
  ASSERT_TRUE(TokenOf("b", 1, true).ok());  // b ends: a is alone again
  ASSERT_TRUE(NotePrompt("a", 20).ok());
  EXPECT_EQ(sent(8, 11), (V{"a#0@20+4", "a#0@24+4", "a#0@28+4", "a#0@32+4"}));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(transport_.steps(), 11u);
}

// While requests stream, a prompt's chunk is busy_chunk_tokens_per_stream
// times (streams + 1), at most busy_chunk_tokens: it grows with the streams
// and shrinks as they end.
TEST_F(OriginRecoveryTest, TheBusyChunkFollowsTheNumberOfStreams) {
  OriginOptions options;
  options.max_chunk_tokens = 8;
  options.busy_chunk_tokens = 4;
  options.busy_chunk_tokens_per_stream = 1;
  options.busy_chunk_depth_per_embd = 0;       // by the streams alone
  options.max_prompt_positions_in_flight = 1;  // a request keeps 4 chunks (3 stages + 1)
  Start(options);
  auto end = [&](const std::string& id) { return TokenOf(id, 1, true); };
  // The sizes of steps n to n + 3.
  auto sizes = [&](size_t n) {
    std::vector<int> out;
    for (size_t m = n; m < n + 4; ++m) out.push_back(transport_.WaitStep(m).second.tokens_size());
    return out;
  };
  using V = std::vector<int>;
  size_t steps = 0;
  for (const std::string id : {"s1", "s2", "s3", "s4"}) {  // four streams
    StartPrompt(id, 1, 2);
    EXPECT_EQ(transport_.WaitStep(++steps).second.request_id(), id + "#0");
    ASSERT_TRUE(TokenOf(id, 0, false).ok());
  }
  StartPrompt("a", 60, 1);
  EXPECT_EQ(sizes(5), (V{4, 4, 4, 4})) << "4 streams: 1 * (4 + 1), at most 4";
  ASSERT_TRUE(end("s1").ok());
  ASSERT_TRUE(end("s2").ok());
  ASSERT_TRUE(NotePrompt("a", 16).ok());
  EXPECT_EQ(sizes(9), (V{3, 3, 3, 3})) << "2 streams: 1 * (2 + 1)";
  ASSERT_TRUE(end("s3").ok());
  ASSERT_TRUE(NotePrompt("a", 28).ok());
  EXPECT_EQ(sizes(13), (V{2, 2, 2, 2})) << "1 stream: 1 * (1 + 1)";
  ASSERT_TRUE(end("s4").ok());
  ASSERT_TRUE(NotePrompt("a", 36).ok());
  EXPECT_EQ(transport_.WaitStep(17).second.tokens_size(), 8) << "no stream: max_chunk_tokens";
}

// Deeper into the prompt the busy chunk shrinks: times D / (D + position),
// D = busy_chunk_depth_per_embd * n_embd (8 here), rounded.
TEST_F(OriginRecoveryTest, TheBusyChunkShrinksWithThePromptsDepth) {
  OriginOptions options;
  options.busy_chunk_tokens = 8;
  options.busy_chunk_tokens_per_stream = 4;  // 1 stream: 4 * (1 + 1)
  options.busy_chunk_depth_per_embd = 1;
  options.max_prompt_positions_in_flight = 1000;
  Start(options);
  StartPrompt("s", 1, 2);
  EXPECT_EQ(transport_.WaitStep(1).second.request_id(), "s#0");
  ASSERT_TRUE(TokenOf("s", 0, false).ok());  // s streams
  StartPrompt("a", 24, 1);
  std::vector<std::string> sent;
  for (size_t n = 2; n <= 8; ++n) {
    const v1::StageStepRequest step = transport_.WaitStep(n).second;
    sent.push_back(absl::StrCat(step.position(), "+", step.tokens_size()));
  }
  // 8 * 8 / (8 + position): 8, 4, 3.2, 2.78, 2.46, 2.29, 2.13, rounded.
  EXPECT_EQ(sent, (std::vector<std::string>{"0+8", "8+4", "12+3", "15+3", "18+2", "20+2", "22+2"}));
}

// Prompts go in no further ahead of their last stage's notes than the
// in-flight bound allows, taking turns a chunk each, oldest first; a request
// with nothing in flight may always send one chunk.
TEST_F(OriginRecoveryTest, PromptsTakeTurnsWithinTheInFlightBound) {
  OriginOptions options;
  options.max_chunk_tokens = 4;
  options.busy_chunk_tokens = 4;
  options.max_prompt_positions_in_flight = 16;  // = 4 chunks (3 stages + 1)
  Start(options);
  auto start = [&](const std::string& id, uint32_t n) { StartPrompt(id, n, 5); };
  // Steps [from, to] (1-based) as "request@position" ("!" when it samples).
  auto sent = [&](size_t from, size_t to) {
    std::vector<std::string> out;
    for (size_t n = from; n <= to; ++n) {
      const v1::StageStepRequest step = transport_.WaitStep(n).second;
      out.push_back(
          absl::StrCat(step.request_id(), "@", step.position(), step.sample() ? "!" : ""));
    }
    return out;
  };
  using V = std::vector<std::string>;
  start("a", 40);
  EXPECT_EQ(sent(1, 4), (V{"a#0@0", "a#0@4", "a#0@8", "a#0@12"}));
  start("b", 12);  // the bound is full, but b has nothing in flight
  EXPECT_EQ(sent(5, 5), (V{"b#0@0"}));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(transport_.steps(), 5u) << "20 positions in flight: no more";

  ASSERT_TRUE(NotePrompt("a", 8).ok());  // 12 in flight: room for one chunk, a's turn first
  EXPECT_EQ(sent(6, 6), (V{"a#0@16"}));
  ASSERT_TRUE(NotePrompt("b", 4).ok());  // 12 in flight: a's turn, then b, which has none
  EXPECT_EQ(sent(7, 8), (V{"a#0@20", "b#0@4"}));
  EXPECT_EQ(NotePrompt("a", 30).status().code(), absl::StatusCode::kInvalidArgument)
      << "a note past what was sent";
  ASSERT_TRUE(NotePrompt("a", 24).ok());  // 4 in flight: a and b take turns
  EXPECT_EQ(sent(9, 11), (V{"a#0@24", "b#0@8!", "a#0@28"}));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(transport_.steps(), 11u);
}

// The parts rule (StageStepRequest.parts_omitted): only the first prompt
// chunk of each attempt carries the request's parts; the attempt after a
// recovery, and after a cache miss, is a new request at the stages, whose
// first chunk carries them again.
TEST_F(OriginRecoveryTest, OnlyTheFirstChunkOfEachAttemptCarriesTheRequestsParts) {
  OriginOptions options;
  options.max_chunk_tokens = 3;
  Start(options);
  {
    absl::MutexLock lock(&mu_);
    plans_ = {PlanOf({"o", "c"}, 2)};
  }
  OriginRequest r;
  r.request_id = "req-1";
  r.generation.reuse.session_id = "s";
  r.plan = PlanOf({"o", "b", "c"}, 1);
  r.generation.prompt = {1, 2, 3, 4, 5, 6, 7};
  r.generation.max_tokens = 10;
  r.generation.sampling.temperature = 0.8f;
  r.generation.logprobs = true;
  r.generation.constraint = R"({"type":"regex","pattern":"a+"})";
  r.generation.f16_hidden = true;
  r.generation.reuse.reuse_len = 1;
  ASSERT_TRUE(origin_->Start(std::move(r), [](const OriginEvent&) {}).ok());
  auto has_parts = [](const v1::StageStepRequest& s) {
    return s.has_plan() || s.has_sampling() || s.has_limits() || s.has_logprobs() ||
           !s.constraint().empty() || s.wire_dtype() != v1::DTYPE_UNSPECIFIED;
  };
  auto expect_parts = [&](const v1::StageStepRequest& s, int stages) {
    EXPECT_FALSE(s.parts_omitted()) << s.request_id() << "@" << s.position();
    EXPECT_EQ(s.plan().stages_size(), stages);
    EXPECT_FLOAT_EQ(s.sampling().temperature(), 0.8f);
    EXPECT_EQ(s.limits().max_tokens(), 10);
    EXPECT_TRUE(s.logprobs().enabled());
    EXPECT_THAT(s.constraint(), HasSubstr("regex"));
    EXPECT_EQ(s.wire_dtype(), v1::DTYPE_F16);
  };
  auto expect_none = [&](const v1::StageStepRequest& s) {
    EXPECT_TRUE(s.parts_omitted()) << s.request_id() << "@" << s.position();
    EXPECT_FALSE(has_parts(s)) << s.request_id() << "@" << s.position();
  };
  // Attempt 0: positions 1..7 in chunks of 3 from the claim.
  std::vector<std::string> sent;
  for (size_t n = 1; n <= 2; ++n) {
    const v1::StageStepRequest s = transport_.WaitStep(n).second;
    sent.push_back(absl::StrCat(s.request_id(), "@", s.position()));
  }
  EXPECT_EQ(sent, (std::vector<std::string>{"req-1#0@1", "req-1#0@4"}));
  expect_parts(transport_.WaitStep(1).second, 3);
  expect_none(transport_.WaitStep(2).second);
  // A stage misses the claim: attempt 1 starts over from position 0.
  v1::DeliverTokenRequest miss;
  miss.set_request_id("req-1#0");
  miss.set_finish_reason(v1::FINISH_REASON_ERROR);
  miss.set_cache_miss(true);
  miss.set_error("no such prefix");
  miss.set_error_code(static_cast<int32_t>(absl::StatusCode::kFailedPrecondition));
  ASSERT_TRUE(origin_->Deliver(miss, "b").ok());
  const v1::StageStepRequest retry = transport_.WaitStep(3).second;
  EXPECT_EQ(absl::StrCat(retry.request_id(), "@", retry.position()), "req-1#1@0");
  expect_parts(retry, 3);
  for (size_t n = 4; n <= 5; ++n) expect_none(transport_.WaitStep(n).second);
  EXPECT_EQ(transport_.WaitStep(5).second.position(), 6u);
  EXPECT_TRUE(transport_.WaitStep(5).second.sample());
  // Attempt 1 fails after two tokens: attempt 2 replays on plan o, c, its
  // first chunk with the parts again.
  ASSERT_TRUE(Deliver("c", 1, 0, 100).ok());
  ASSERT_TRUE(Deliver("c", 1, 1, 101).ok());
  ASSERT_TRUE(DeliverError("b", 1, absl::StatusCode::kUnavailable, "forwarding to stage 2").ok());
  const v1::StageStepRequest replay = transport_.WaitStep(6).second;
  EXPECT_EQ(absl::StrCat(replay.request_id(), "@", replay.position()), "req-1#2@8");
  expect_parts(replay, 2);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(transport_.steps(), 6u);
}

TEST_F(OriginRecoveryTest, PrepareChecksARequestOnceAndDrawsItsIds) {
  auto prepare = [&](std::vector<int32_t> prompt, auto&& edit) {
    GenerationRequest n;
    n.prompt = std::move(prompt);
    edit(n);
    return origin_->Prepare(std::move(n));
  };
  auto as_is = [](GenerationRequest&) {};
  auto message = [](const absl::StatusOr<OriginRequest>& r) {
    return std::string(r.status().message());
  };
  EXPECT_THAT(message(prepare({}, as_is)), HasSubstr("the prompt is empty"));
  // The context rule at its boundary (context 64): one token must be left.
  EXPECT_TRUE(prepare(std::vector<int32_t>(63, 1), as_is).ok());
  EXPECT_THAT(message(prepare(std::vector<int32_t>(64, 1), as_is)),
              HasSubstr("maximum context length is 64 tokens. However, your prompt resulted in "
                        "64 tokens"));
  EXPECT_THAT(message(prepare(std::vector<int32_t>(65, 1), as_is)),
              HasSubstr("resulted in 65 tokens"));
  EXPECT_THAT(message(prepare({1, 1000}, as_is)),
              HasSubstr("prompt token id 1000 is outside the vocabulary [0, 1000)"));
  EXPECT_THAT(message(prepare({1, -1}, as_is)), HasSubstr("token id -1"));
  EXPECT_THAT(message(prepare({1}, [](GenerationRequest& n) { n.max_tokens = -1; })),
              HasSubstr("max_tokens must be >= 0"));
  EXPECT_THAT(message(prepare({1}, [](GenerationRequest& n) { n.sampling.temperature = -1; })),
              HasSubstr("temperature"));

  absl::StatusOr<OriginRequest> a = prepare({1, 2}, [](GenerationRequest& n) {
    n.max_tokens = 5;
    n.ignore_eos = true;
    n.logprobs = true;
    n.top_logprobs = 99;
    n.f16_hidden = true;
  });
  absl::StatusOr<OriginRequest> b = prepare({1, 2}, [](GenerationRequest& n) {
    n.reuse.session_id = "s-kept";
    n.reuse.reuse_len = 1;
    n.keep_session = true;
  });
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(a->request_id, b->request_id);
  EXPECT_EQ(a->request_id.rfind("req-", 0), 0u);
  EXPECT_EQ(a->session_id().rfind("tmp-", 0), 0u);  // a session of its own
  EXPECT_FALSE(a->generation.keep_session);
  EXPECT_EQ(b->session_id(), "s-kept");
  EXPECT_EQ(b->generation.reuse.reuse_len, 1u);
  EXPECT_TRUE(b->generation.keep_session);
  EXPECT_EQ(a->plan.stages_size(), 3);  // the serving plan
  // The request is kept as it came, but for the clamped alternatives.
  EXPECT_EQ(a->generation.max_tokens, 5);
  EXPECT_TRUE(a->generation.ignore_eos);
  EXPECT_TRUE(a->generation.logprobs);
  EXPECT_EQ(a->generation.top_logprobs, kMaxTopLogprobs);
  EXPECT_TRUE(a->generation.f16_hidden);
  EXPECT_FALSE(b->generation.f16_hidden);
}

TEST_F(OriginRecoveryTest, AKeptSessionStartingColdStartsFromWhatEveryStageAdopted) {
  std::vector<int32_t> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i + 1);
  transport_.HoldPrefix("o", 39);
  transport_.HoldPrefix("b", 39);
  transport_.HoldPrefix("c", 35);  // of the offered 16, 32 and 39: 32
  GenerationRequest kept;
  kept.prompt = prompt;
  kept.reuse.session_id = "s-new";
  kept.keep_session = true;
  absl::StatusOr<OriginRequest> r = origin_->Prepare(kept);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generation.reuse.reuse_len, 32u);
  EXPECT_TRUE(r->generation.reuse.fork_from.empty());
  EXPECT_EQ(transport_.offers().size(), 3u);

  // The first step claims those 32 positions in its own session.
  ASSERT_TRUE(origin_->Start(*std::move(r), [](const OriginEvent&) {}).ok());
  const v1::StageStepRequest first = transport_.WaitStep(1).second;
  EXPECT_EQ(first.session_id(), "s-new");
  EXPECT_EQ(first.reuse_len(), 32u);
  EXPECT_EQ(first.position(), 32u);
  EXPECT_EQ(first.reuse_digest(), TokenDigest(std::span<const int32_t>(prompt.data(), 32)));

  // A throwaway session, or one that reuses a prefix of this head's own,
  // asks nobody.
  GenerationRequest throwaway;
  throwaway.prompt = prompt;
  ASSERT_TRUE(origin_->Prepare(throwaway).ok());
  GenerationRequest own = kept;
  own.reuse.reuse_len = 8;
  absl::StatusOr<OriginRequest> o = origin_->Prepare(own);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->generation.reuse.reuse_len, 8u);
  EXPECT_EQ(transport_.offers().size(), 3u);
}

}  // namespace
}  // namespace ringlm
