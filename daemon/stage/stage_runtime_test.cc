// The stage runtime's rules, against a fake transport and the bundled model:
// who may send a step, cancel or drop; that sessions are namespaced by
// origin; that a wrong prefix claim changes nothing; and the queue bounds.
#include "daemon/stage/stage_runtime.h"

#include <set>
#include <thread>
#include <tuple>

#include "base/metrics.h"
#include "base/testing/temp_dir.h"
#include "daemon/rpc/proto_convert.h"
#include "daemon/stage/request_parts.h"
#include "gtest/gtest.h"
#include "inference/token_digest.h"

namespace ringlm {
namespace {

using namespace std::chrono_literals;

// Records what the runtime sends; never calls back into it.
class FakeTransport : public Transport {
 public:
  absl::Status StageStep(const std::string& to, const v1::StageStepRequest& r) override {
    absl::MutexLock lock(&mu_);
    steps_.push_back({to, r});
    return absl::OkStatus();
  }
  absl::Status DeliverToken(const std::string& origin, const v1::DeliverTokenRequest& r,
                            v1::DeliverTokenReply*) override {
    absl::MutexLock lock(&mu_);
    deliveries_.push_back({origin, r});
    return absl::OkStatus();
  }
  absl::Status Cancel(const std::string&, const std::string&) override { return absl::OkStatus(); }
  absl::Status Rollback(const std::string&, const v1::RollbackRequest&) override {
    return absl::OkStatus();
  }
  absl::Status DropSession(const std::string&, const std::string&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<uint32_t> AdoptPrefix(const std::string&, const v1::AdoptPrefixRequest&) override {
    return 0u;
  }
  // Forgets what was sent so far.
  void Clear() {
    absl::MutexLock lock(&mu_);
    steps_.clear();
    deliveries_.clear();
  }
  // Waits until `n` steps were sent; returns the n-th.
  v1::StageStepRequest WaitStep(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return steps_.size() >= n; };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30)));
    return steps_.size() >= n ? steps_[n - 1].second : v1::StageStepRequest{};
  }
  // Waits until `n` deliveries arrived; returns the n-th.
  v1::DeliverTokenRequest WaitDelivery(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return deliveries_.size() >= n; };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30)));
    return deliveries_.size() >= n ? deliveries_[n - 1].second : v1::DeliverTokenRequest{};
  }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<std::string, v1::StageStepRequest>> steps_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, v1::DeliverTokenRequest>> deliveries_ ABSL_GUARDED_BY(mu_);
};

class StageRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Model>> m =
        Model::Load(std::string(RINGLM_SHARED_DIR) + "/models/stories260K-f32.gguf", {});
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = *std::move(m);
    Start(StageOptions{});
  }

  void Start(StageOptions options) {
    runtime_.reset();
    runtime_ = std::make_unique<StageRuntime>(
        *model_, &pool_, &transport_, "b",
        [this](const std::string& id) { return members_.count(id) > 0; }, options);
    ASSERT_TRUE(runtime_->SetRange(LayerRange{0, model_->config().n_layer}).ok());
  }

  // A one-stage plan on node "b": its previous stage is itself.
  v1::StageStepRequest Step(const std::string& origin, const std::string& request,
                            const std::string& session, std::vector<int32_t> tokens) {
    v1::StageStepRequest r;
    r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    r.set_request_id(request);
    r.set_session_id(session);
    r.set_origin(origin);
    v1::Plan* plan = r.mutable_plan();
    plan->set_model_fingerprint(model_->fingerprint());
    plan->set_n_layers(model_->config().n_layer);
    v1::PlanStage* s = plan->add_stages();
    s->set_node_id("b");
    s->set_first_layer(0);
    s->set_last_layer(model_->config().n_layer);
    r.mutable_tokens()->Add(tokens.begin(), tokens.end());
    r.mutable_limits()->set_max_tokens(4);
    r.set_sample(true);
    return r;
  }

  static Caller Node(const std::string& id) { return Caller{Caller::Role::kNode, id, true, ""}; }

  // Waits until no session is leased: a delivery is sent while its step
  // still holds the session, which it releases right after.
  void WaitIdle() {
    for (int i = 0; i < 3000; ++i) {
      bool busy = false;
      for (const SessionInfo& s : runtime_->sessions().Stats().sessions) busy |= s.busy;
      if (!busy) return;
      std::this_thread::sleep_for(1ms);
    }
    ADD_FAILURE() << "a session stayed busy";
  }

  uint64_t TotalPositions() {
    uint64_t n = 0;
    for (const SessionInfo& s : runtime_->sessions().Stats().sessions) n += s.n_positions;
    return n;
  }

  std::unique_ptr<Model> model_;
  ThreadPool pool_{1};
  FakeTransport transport_;
  std::set<std::string> members_ = {"b", "o", "c"};
  std::unique_ptr<StageRuntime> runtime_;
  const std::vector<int32_t> prompt_ = {1, 403, 407, 261, 378, 425, 300, 270};
};

TEST_F(StageRuntimeTest, TakesStepsOnlyFromTheOriginOrThePreviousStage) {
  EXPECT_TRUE(runtime_->Enqueue(Step("o", "r1", "s1", prompt_), Node("o")).ok());
  EXPECT_TRUE(runtime_->Enqueue(Step("o", "r2", "s2", prompt_), Node("b")).ok());  // previous
  absl::Status s = runtime_->Enqueue(Step("o", "r3", "s3", prompt_), Node("c"));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  s = runtime_->Enqueue(Step("o", "r4", "s4", prompt_),
                        Caller{Caller::Role::kClient, "client-1", true, ""});
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
}

TEST_F(StageRuntimeTest, RefusesPlansAndOriginsThatAreNotMembers) {
  v1::StageStepRequest r = Step("x", "r1", "s1", prompt_);
  EXPECT_EQ(runtime_->Enqueue(r, Node("x")).code(), absl::StatusCode::kPermissionDenied);
  r = Step("o", "r2", "s2", prompt_);
  r.mutable_plan()->mutable_stages(0)->set_node_id("b");
  r.mutable_plan()->mutable_stages(0)->set_last_layer(2);
  v1::PlanStage* rogue = r.mutable_plan()->add_stages();
  rogue->set_node_id("rogue");
  rogue->set_first_layer(2);
  rogue->set_last_layer(model_->config().n_layer);
  EXPECT_EQ(runtime_->Enqueue(r, Node("o")).code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(StageRuntimeTest, ARequestIdBelongsToItsFirstOrigin) {
  ASSERT_TRUE(runtime_->Enqueue(Step("o", "r1", "s1", prompt_), Node("o")).ok());
  EXPECT_EQ(runtime_->Enqueue(Step("c", "r1", "s1", prompt_), Node("c")).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(runtime_->Cancel("r1", Node("c")).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(runtime_->Cancel("r1", Node("o")).ok());
  // A cancel that comes first claims the id for the canceller.
  EXPECT_TRUE(runtime_->Cancel("r9", Node("c")).ok());
  EXPECT_EQ(runtime_->Enqueue(Step("o", "r9", "s9", prompt_), Node("o")).code(),
            absl::StatusCode::kPermissionDenied);
}

// A rollback (steps in flight, docs/speculation.md) comes only from the
// request's last stage; it truncates this stage's session and drops the
// request's later steps of the voided branches.
TEST_F(StageRuntimeTest, OnlyTheLastStageRollsARequestBack) {
  // Stage 0 of a plan whose last stage is "c".
  auto two_stages = [&](v1::StageStepRequest r) {
    r.mutable_plan()->mutable_stages(0)->set_last_layer(1);
    v1::PlanStage* last = r.mutable_plan()->add_stages();
    last->set_node_id("c");
    last->set_first_layer(1);
    last->set_last_layer(model_->config().n_layer);
    return r;
  };
  ASSERT_TRUE(runtime_->SetRange(LayerRange{0, 1}).ok());
  ASSERT_TRUE(runtime_->Enqueue(two_stages(Step("o", "r1", "s1", prompt_)), Node("o")).ok());
  transport_.WaitStep(1);
  WaitIdle();
  ASSERT_EQ(TotalPositions(), prompt_.size());

  v1::RollbackRequest rollback;
  rollback.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  rollback.set_request_id("r1");
  rollback.set_branch(1);
  rollback.set_positions(5);
  for (const Caller& stranger :
       {Node("o"), Node("b"), Caller{Caller::Role::kClient, "client-1", true, ""}}) {
    const absl::Status s = runtime_->Rollback(rollback, stranger);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << stranger.node_id << ": " << s;
  }
  EXPECT_EQ(TotalPositions(), prompt_.size()) << "a refused rollback changed the session";
  v1::RollbackRequest branch0 = rollback;
  branch0.set_branch(0);
  EXPECT_EQ(runtime_->Rollback(branch0, Node("c")).code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(runtime_->Rollback(rollback, Node("c")).ok());
  EXPECT_EQ(TotalPositions(), 5u);
  // A step of the voided branch is dropped unrun; one of the new branch runs.
  v1::StageStepRequest late = two_stages(Step("o", "r1", "s1", {300}));
  late.set_position(8);
  ASSERT_TRUE(runtime_->Enqueue(late, Node("o")).ok());
  v1::StageStepRequest next = two_stages(Step("o", "r1", "s1", {261}));
  next.set_position(5);
  next.set_branch(1);
  ASSERT_TRUE(runtime_->Enqueue(next, Node("o")).ok());
  const v1::StageStepRequest sent = transport_.WaitStep(2);
  EXPECT_EQ(sent.position(), 5u);
  EXPECT_EQ(sent.branch(), 1u);
  WaitIdle();
  EXPECT_EQ(TotalPositions(), 6u);
}

TEST_F(StageRuntimeTest, SessionsLiveInTheirOriginsNamespace) {
  ASSERT_TRUE(runtime_->Enqueue(Step("o", "r1", "s1", prompt_), Node("o")).ok());
  transport_.WaitDelivery(1);
  WaitIdle();
  EXPECT_EQ(TotalPositions(), prompt_.size());
  // Another origin can neither drop nor reuse "s1".
  EXPECT_EQ(*runtime_->DropSession("s1", Node("c")), false);
  v1::StageStepRequest claim = Step("c", "r2", "s1", {5});
  claim.set_position(prompt_.size());
  claim.set_reuse_len(prompt_.size());
  claim.set_reuse_digest(TokenDigest(prompt_));
  ASSERT_TRUE(runtime_->Enqueue(claim, Node("c")).ok());
  EXPECT_TRUE(transport_.WaitDelivery(2).cache_miss());
  WaitIdle();
  EXPECT_EQ(TotalPositions(), prompt_.size());
  EXPECT_EQ(*runtime_->DropSession("s1", Node("o")), true);
  EXPECT_EQ(TotalPositions(), 0u);
}

// Another head adopts a prefix that origin "o" left here only by presenting
// its digests; the adopted prefix lives in the adopter's own namespace, and
// its claim then continues exactly as "o"'s own would.
TEST_F(StageRuntimeTest, AnotherHeadAdoptsAPrefixOnlyByItsDigests) {
  ASSERT_TRUE(runtime_->Enqueue(Step("o", "r1", "s1", prompt_), Node("o")).ok());
  const int32_t first = transport_.WaitDelivery(1).token();
  WaitIdle();
  auto offer = [&](std::vector<int32_t> tokens, std::vector<uint32_t> lengths) {
    v1::AdoptPrefixRequest r;
    r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    r.set_session_id("s-c");
    for (uint32_t n : lengths) {
      r.add_lengths(n);
      r.add_digests(TokenDigest(std::span<const int32_t>(tokens.data(), n)));
    }
    return r;
  };
  // Malformed offers and callers that are no node are refused; another
  // prompt's digests adopt nothing.
  EXPECT_EQ(runtime_->AdoptPrefix(offer(prompt_, {4, 2}), Node("c")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime_->AdoptPrefix(offer(prompt_, {}), Node("c")).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::AdoptPrefixRequest short_digest = offer(prompt_, {4});
  short_digest.set_digests(0, "x");
  EXPECT_EQ(runtime_->AdoptPrefix(short_digest, Node("c")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime_->AdoptPrefix(offer(prompt_, {4}), Caller{Caller::Role::kClient, "x", true, ""})
                .status()
                .code(),
            absl::StatusCode::kPermissionDenied);
  std::vector<int32_t> other = prompt_;
  other[0] += 1;
  EXPECT_EQ(*runtime_->AdoptPrefix(offer(other, {4, 7}), Node("c")), 0u);
  EXPECT_EQ(runtime_->sessions().Stats().sessions.size(), 1u);

  // The right digests: "c" now holds 7 positions of its own, and "o"'s
  // session is untouched.
  ASSERT_EQ(*runtime_->AdoptPrefix(offer(prompt_, {4, 7}), Node("c")), 7u);
  EXPECT_EQ(runtime_->sessions().Stats().sessions.size(), 2u);
  EXPECT_EQ(TotalPositions(), prompt_.size() + 7);
  v1::StageStepRequest claim = Step("c", "r2", "s-c", {prompt_[7]});
  claim.set_position(7);
  claim.set_reuse_len(7);
  claim.set_reuse_digest(TokenDigest(std::span<const int32_t>(prompt_.data(), 7)));
  ASSERT_TRUE(runtime_->Enqueue(claim, Node("c")).ok());
  const v1::DeliverTokenRequest adopted = transport_.WaitDelivery(2);
  EXPECT_FALSE(adopted.cache_miss()) << adopted.error();
  EXPECT_EQ(adopted.token(), first);
  WaitIdle();
  // "o" still drops its own, and "c" cannot drop it.
  EXPECT_EQ(*runtime_->DropSession("s1", Node("c")), false);
  EXPECT_EQ(*runtime_->DropSession("s1", Node("o")), true);
}

TEST_F(StageRuntimeTest, AWrongPrefixClaimChangesNothingAndRevealsNothing) {
  ASSERT_TRUE(runtime_->Enqueue(Step("o", "r1", "s1", prompt_), Node("o")).ok());
  transport_.WaitDelivery(1);
  WaitIdle();
  const size_t sessions = runtime_->sessions().Stats().sessions.size();
  // Claims of every length with a wrong digest, forking from s1 and in place.
  size_t n = 1;
  for (uint32_t len = 1; len <= prompt_.size(); ++len) {
    for (const std::string fork_from : {"s1", ""}) {
      v1::StageStepRequest claim = Step("o", "probe-" + std::to_string(n), "s-probe", {5});
      if (fork_from.empty()) claim.set_session_id("s1");
      claim.set_position(len);
      claim.set_reuse_len(len);
      claim.set_fork_from(fork_from);
      std::vector<int32_t> guess(prompt_.begin(), prompt_.begin() + len);
      guess.back() += 1;
      claim.set_reuse_digest(TokenDigest(guess));
      ASSERT_TRUE(runtime_->Enqueue(claim, Node("o")).ok());
      const v1::DeliverTokenRequest d = transport_.WaitDelivery(++n);
      WaitIdle();
      EXPECT_TRUE(d.cache_miss());
      EXPECT_EQ(d.error(), "stage 0 (node b): prefix cache miss");
      EXPECT_EQ(runtime_->sessions().Stats().sessions.size(), sessions);
      EXPECT_EQ(TotalPositions(), prompt_.size());
    }
  }
  // The right claim forks, as a positive control.
  v1::StageStepRequest claim = Step("o", "fork-ok", "s2", {5});
  claim.set_position(4);
  claim.set_reuse_len(4);
  claim.set_fork_from("s1");
  claim.set_reuse_digest(TokenDigest(std::vector<int32_t>(prompt_.begin(), prompt_.begin() + 4)));
  ASSERT_TRUE(runtime_->Enqueue(claim, Node("o")).ok());
  EXPECT_FALSE(transport_.WaitDelivery(++n).cache_miss());
  WaitIdle();
  EXPECT_EQ(runtime_->sessions().Stats().sessions.size(), sessions + 1);
}

TEST_F(StageRuntimeTest, TheQueueIsBoundedInBytes) {
  StageOptions options;
  options.max_queued_bytes = 64;  // less than any step
  Start(options);
  EXPECT_EQ(runtime_->Enqueue(Step("o", "r1", "s1", prompt_), Node("o")).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(StageRuntimeTest, StepsLongerThanAChunkAreRefused) {
  StageOptions options;
  options.max_step_tokens = 4;
  Start(options);
  absl::Status s = runtime_->Enqueue(Step("o", "r1", "s1", prompt_), Node("o"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

// A new partition must not break a request on the old plan: its sessions
// stay while this node still holds the old range (as the previous one), and
// go when that range is gone.
TEST_F(StageRuntimeTest, ANewRangeKeepsTheSessionsOfThePreviousOne) {
  const uint32_t n_layer = model_->config().n_layer;
  ASSERT_TRUE(runtime_->Enqueue(Step("o", "r1", "s1", prompt_), Node("o")).ok());
  ASSERT_NE(transport_.WaitDelivery(1).finish_reason(), v1::FINISH_REASON_ERROR);
  const v1::StageStepRequest next = transport_.WaitStep(1);
  WaitIdle();
  ASSERT_TRUE(runtime_->SetRange(LayerRange{0, n_layer - 1}).ok());
  EXPECT_EQ(runtime_->sessions().Stats().sessions.size(), 1u);
  ASSERT_TRUE(runtime_->Enqueue(next, Node("b")).ok());
  const v1::DeliverTokenRequest second = transport_.WaitDelivery(2);
  EXPECT_NE(second.finish_reason(), v1::FINISH_REASON_ERROR) << second.error();
  EXPECT_EQ(second.index(), 1u);
  WaitIdle();
  // Another partition: the old range is neither current nor previous.
  ASSERT_TRUE(runtime_->SetRange(LayerRange{1, n_layer}).ok());
  EXPECT_EQ(runtime_->sessions().Stats().sessions.size(), 0u);
  EXPECT_EQ(runtime_->Enqueue(transport_.WaitStep(2), Node("b")).code(),
            absl::StatusCode::kFailedPrecondition);
}

// A request replayed mid-reply (a new plan after a stage died) arrives as
// one prefill of prompt plus reply so far, with `generated` set. The last
// stage has no sampler for it and must rebuild it from the session, so the
// seeded draw, the penalties and the grammar continue exactly.
// A prompt in chunks: the last stage notes the end of each chunk that
// samples nothing, then delivers the first token.
TEST_F(StageRuntimeTest, TheLastStageNotesAPromptsProgressToItsOrigin) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 90; ++i) prompt.push_back(prompt_[i % prompt_.size()]);
  for (uint32_t start : {0u, 20u, 40u, 70u}) {
    const uint32_t end = std::min<uint32_t>(90, start + (start == 0 ? 20 : start == 20 ? 20 : 30));
    v1::StageStepRequest step =
        Step("o", "r1", "s1", std::vector<int32_t>(prompt.begin() + start, prompt.begin() + end));
    step.set_position(start);
    step.set_sample(end == 90);
    ASSERT_TRUE(runtime_->Enqueue(step, Node("o")).ok());
  }
  // 0-20, 20-40 and 40-70 are noted; 70-90 samples.
  const v1::DeliverTokenRequest first = transport_.WaitDelivery(1);
  EXPECT_EQ(first.prompt_positions(), 20u) << first.error();
  EXPECT_EQ(first.finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
  EXPECT_EQ(transport_.WaitDelivery(2).prompt_positions(), 40u);
  EXPECT_EQ(transport_.WaitDelivery(3).prompt_positions(), 70u);
  const v1::DeliverTokenRequest token = transport_.WaitDelivery(4);
  EXPECT_EQ(token.prompt_positions(), 0u);
  EXPECT_EQ(token.index(), 0u);
  EXPECT_NE(token.finish_reason(), v1::FINISH_REASON_ERROR) << token.error();
}

TEST_F(StageRuntimeTest, AReplayedRequestContinuesItsSampledReplyExactly) {
  auto configure = [](v1::StageStepRequest& r) {
    r.mutable_sampling()->set_temperature(0.9f);
    r.mutable_sampling()->set_seed(4242);
    r.mutable_sampling()->set_frequency_penalty(0.4f);
    r.mutable_limits()->set_max_tokens(24);
    r.set_constraint(R"({"type":"json_object"})");
  };
  // The undisturbed run: each step the stage sends itself is fed back.
  v1::StageStepRequest step = Step("o", "r1", "s1", prompt_);
  configure(step);
  std::vector<int32_t> reply;
  for (size_t n = 1; n <= 24; ++n) {
    ASSERT_TRUE(runtime_->Enqueue(step, Node("o")).ok());
    const v1::DeliverTokenRequest d = transport_.WaitDelivery(n);
    ASSERT_EQ(d.finish_reason() == v1::FINISH_REASON_ERROR, false) << d.error();
    reply.push_back(d.token());
    if (d.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) break;
    step = transport_.WaitStep(n);
  }
  ASSERT_GE(reply.size(), 8u);
  size_t delivered = reply.size();
  for (size_t cut : {size_t{1}, size_t{5}, reply.size() - 1}) {
    std::vector<int32_t> tokens = prompt_;
    tokens.insert(tokens.end(), reply.begin(), reply.begin() + cut);
    v1::StageStepRequest replay = Step("o", "replay-" + std::to_string(cut), "s-replay", tokens);
    configure(replay);
    replay.set_generated(static_cast<uint32_t>(cut));
    ASSERT_TRUE(runtime_->Enqueue(replay, Node("o")).ok());
    const v1::DeliverTokenRequest d = transport_.WaitDelivery(++delivered);
    EXPECT_EQ(d.token(), reply[cut]) << "replayed after " << cut << " tokens: " << d.error();
    EXPECT_EQ(d.index(), cut);
  }
}

// A json_schema constraint spec of at least `bytes` bytes: an object of
// many integer fields.
std::string JsonSchemaSpec(size_t bytes) {
  std::string properties;
  for (int i = 0; properties.size() < bytes; ++i) {
    if (i > 0) properties += ",";
    properties += "\"field_" + std::to_string(i) + "\":{\"type\":\"integer\"}";
  }
  return R"({"type":"json_schema","schema":{"type":"object","properties":{)" + properties + "}}}";
}

TEST_F(StageRuntimeTest, AStepThatOmitsItsPartsRunsWithThoseOfTheRequestsFirstStep) {
  // Unknown request: nothing to fill in.
  v1::StageStepRequest orphan = Step("o", "r0", "s0", prompt_);
  orphan.clear_plan();
  orphan.clear_limits();
  orphan.set_parts_omitted(true);
  EXPECT_EQ(runtime_->Enqueue(orphan, Node("o")).code(), absl::StatusCode::kFailedPrecondition);

  // The whole prompt in one step, for reference.
  ASSERT_TRUE(runtime_->Enqueue(Step("o", "whole", "s1", prompt_), Node("o")).ok());
  const v1::DeliverTokenRequest whole = transport_.WaitDelivery(1);
  ASSERT_NE(whole.finish_reason(), v1::FINISH_REASON_ERROR) << whole.error();
  const v1::StageStepRequest decode = transport_.WaitStep(1);
  EXPECT_TRUE(decode.parts_omitted());
  EXPECT_FALSE(HasParts(decode));

  // The same prompt in two chunks; the second omits the parts.
  const std::vector<int32_t> head(prompt_.begin(), prompt_.begin() + 4);
  const std::vector<int32_t> tail(prompt_.begin() + 4, prompt_.end());
  v1::StageStepRequest first = Step("o", "split", "s2", head);
  first.set_sample(false);
  ASSERT_TRUE(runtime_->Enqueue(first, Node("o")).ok());
  v1::StageStepRequest second = Step("o", "split", "s2", tail);
  second.clear_plan();
  second.clear_limits();
  second.set_parts_omitted(true);
  second.set_position(4);
  // Another origin may not use the parts of this one's request.
  v1::StageStepRequest foreign = second;
  foreign.set_origin("c");
  EXPECT_EQ(runtime_->Enqueue(foreign, Node("c")).code(), absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(runtime_->Enqueue(second, Node("o")).ok());
  EXPECT_EQ(transport_.WaitDelivery(2).prompt_positions(), 4u);
  const v1::DeliverTokenRequest split = transport_.WaitDelivery(3);
  ASSERT_NE(split.finish_reason(), v1::FINISH_REASON_ERROR) << split.error();
  EXPECT_EQ(split.token(), whole.token());
}

// Issue 37's wire bytes: a decode step's size per hop, with and without a
// 4 KiB json_schema. Printed, and the schema may add at most 10%.
TEST_F(StageRuntimeTest, ADecodeStepIsNoLargerWithAJsonSchema) {
  const uint32_t n_layer = model_->config().n_layer;
  const uint32_t split = n_layer / 2;
  // Bytes of the first decode step on each hop: from the last stage back
  // to stage 0 (one-stage ring on "b"), and from stage 0 to stage 1 (a
  // two-stage ring b [0, split) -> c [split, n_layer)).
  auto measure = [&](const std::string& constraint, const std::string& tag) {
    Start(StageOptions{});
    v1::StageStepRequest step = Step("o", "ret-" + tag, "s-ret-" + tag, prompt_);
    step.set_constraint(constraint);
    step.mutable_limits()->set_max_tokens(8);
    transport_.Clear();
    EXPECT_TRUE(runtime_->Enqueue(step, Node("o")).ok());
    const v1::DeliverTokenRequest d = transport_.WaitDelivery(1);
    EXPECT_NE(d.finish_reason(), v1::FINISH_REASON_ERROR) << d.error();
    const size_t back = transport_.WaitStep(1).ByteSizeLong();

    Start(StageOptions{});
    EXPECT_TRUE(runtime_->SetRange(LayerRange{0, split}).ok());
    transport_.Clear();
    v1::StageStepRequest first = Step("o", "fwd-" + tag, "s-fwd-" + tag, prompt_);
    first.set_constraint(constraint);
    first.mutable_plan()->mutable_stages(0)->set_last_layer(split);
    v1::PlanStage* c = first.mutable_plan()->add_stages();
    c->set_node_id("c");
    c->set_first_layer(split);
    c->set_last_layer(n_layer);
    EXPECT_TRUE(runtime_->Enqueue(first, Node("o")).ok());
    const v1::StageStepRequest carrier = transport_.WaitStep(1);
    EXPECT_TRUE(HasParts(carrier));  // stage 1 needs them once
    // The last stage's first decode step comes back to stage 0 ...
    v1::StageStepRequest decode;
    decode.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    decode.set_request_id(first.request_id());
    decode.set_session_id(first.session_id());
    decode.set_origin("o");
    decode.set_parts_omitted(true);
    decode.set_position(static_cast<uint32_t>(prompt_.size()));
    decode.add_tokens(d.token());
    decode.set_sample(true);
    decode.set_generated(1);
    EXPECT_TRUE(runtime_->Enqueue(decode, Node("c")).ok());
    // ... and goes on to stage 1 without the parts.
    const v1::StageStepRequest forwarded = transport_.WaitStep(2);
    EXPECT_FALSE(HasParts(forwarded));
    // What every decode step would weigh with the parts: the forwarded step
    // with the first step's parts put back.
    v1::StageStepRequest with_parts = forwarded;
    CopyParts(carrier, with_parts);
    return std::tuple<size_t, size_t, size_t>{forwarded.ByteSizeLong(), back,
                                              with_parts.ByteSizeLong()};
  };
  const std::string schema = JsonSchemaSpec(4096);
  ASSERT_GE(schema.size(), 4096u);
  const auto [plain_forward, plain_back, plain_full] = measure("", "none");
  const auto [schema_forward, schema_back, schema_full] = measure(schema, "json");
  std::printf(
      "decode step bytes per hop (stories260K, f32 hidden, %zu-byte json_schema):\n"
      "  stage 0 -> stage 1: %zu without, %zu with\n"
      "  last -> stage 0:    %zu without, %zu with\n"
      "  (stage 0 -> stage 1 if every step carried the parts: %zu without, %zu with)\n",
      schema.size(), plain_forward, schema_forward, plain_back, schema_back, plain_full,
      schema_full);
  EXPECT_LE(schema_forward * 10, plain_forward * 11);
  EXPECT_LE(schema_back * 10, plain_back * 11);
}

// Sends every step back into the runtime (a one-node ring) and keeps the
// tokens each request gets.
class LoopingTransport : public Transport {
 public:
  void Attach(StageRuntime* runtime) { runtime_ = runtime; }
  absl::Status StageStep(const std::string&, const v1::StageStepRequest& r) override {
    return runtime_->Enqueue(r, Caller{Caller::Role::kNode, "b", true, ""});
  }
  absl::Status DeliverToken(const std::string&, const v1::DeliverTokenRequest& r,
                            v1::DeliverTokenReply*) override {
    absl::MutexLock lock(&mu_);
    EXPECT_NE(r.finish_reason(), v1::FINISH_REASON_ERROR) << r.error();
    tokens_[r.request_id()].push_back(r.token());
    // The chosen token's logprob, bit for bit: the logits themselves must
    // not differ, not only their argmax.
    logprobs_[r.request_id()].push_back(r.logprobs().chosen().logprob());
    if (r.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) ++finished_;
    return absl::OkStatus();
  }
  absl::Status Cancel(const std::string&, const std::string&) override { return absl::OkStatus(); }
  absl::Status Rollback(const std::string&, const v1::RollbackRequest&) override {
    return absl::OkStatus();
  }
  absl::Status DropSession(const std::string&, const std::string&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<uint32_t> AdoptPrefix(const std::string&, const v1::AdoptPrefixRequest&) override {
    return 0u;
  }
  // Per request: its tokens and their logprobs.
  std::map<std::string, std::pair<std::vector<int32_t>, std::vector<float>>> WaitFinished(int n) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ >= n; };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(60)));
    std::map<std::string, std::pair<std::vector<int32_t>, std::vector<float>>> out;
    for (const auto& [id, tokens] : tokens_) out[id] = {tokens, logprobs_[id]};
    return out;
  }

 private:
  StageRuntime* runtime_ = nullptr;
  absl::Mutex mu_;
  std::map<std::string, std::vector<int32_t>> tokens_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<float>> logprobs_ ABSL_GUARDED_BY(mu_);
  int finished_ ABSL_GUARDED_BY(mu_) = 0;
};

// 12 requests of mixed prompts, lengths and sampling at once: the stage runs
// them in batches, and each gets exactly the tokens it gets alone.
TEST_F(StageRuntimeTest, ConcurrentRequestsAreBatchedAndEachGetsItsSoloTokens) {
  constexpr int kRequests = 12;
  auto request = [&](int i) {
    std::vector<int32_t> prompt(prompt_.begin(), prompt_.begin() + 2 + i % 6);
    v1::StageStepRequest r = Step("o", "r" + std::to_string(i), "s" + std::to_string(i), prompt);
    r.mutable_limits()->set_max_tokens(8 + 3 * i);
    r.mutable_limits()->set_ignore_eos(true);
    r.mutable_logprobs()->set_enabled(true);
    if (i % 3 == 0) {
      r.mutable_sampling()->set_temperature(0.8f);
      r.mutable_sampling()->set_seed(i);
    }
    return r;
  };
  MetricsRegistry registry;
  absl::StatusOr<Histogram*> batch_steps =
      registry.AddHistogram("batch", "steps per batch", ExponentialBuckets(1, 2, 8));
  ASSERT_TRUE(batch_steps.ok());
  auto run = [&](const std::vector<int>& which, Histogram* histogram) {
    LoopingTransport transport;
    StageOptions options;
    options.batch_steps = histogram;
    StageRuntime runtime(
        *model_, &pool_, &transport, "b",
        [this](const std::string& id) { return members_.count(id) > 0; }, options);
    transport.Attach(&runtime);
    EXPECT_TRUE(runtime.SetRange(LayerRange{0, model_->config().n_layer}).ok());
    for (int i : which) EXPECT_TRUE(runtime.Enqueue(request(i), Node("o")).ok());
    auto tokens = transport.WaitFinished(static_cast<int>(which.size()));
    runtime.Stop();
    return tokens;
  };
  std::vector<int> all;
  for (int i = 0; i < kRequests; ++i) all.push_back(i);
  const auto together = run(all, *batch_steps);
  EXPECT_GT((*batch_steps)->Sum(), static_cast<double>((*batch_steps)->Count()))
      << "no batch held more than one step";
  for (int i = 0; i < kRequests; ++i) {
    const std::string id = "r" + std::to_string(i);
    const auto alone = run({i}, nullptr);
    ASSERT_EQ(together.count(id), 1u);
    EXPECT_EQ(together.at(id), alone.at(id)) << id;
    EXPECT_EQ(together.at(id).first.size(), static_cast<size_t>(8 + 3 * i));
  }
}

// Another daemon of the machine has the turn at the cores: the steps that
// queue meanwhile wait, and then run as one batch, with their solo tokens.
TEST_F(StageRuntimeTest, StepsQueuedDuringAnotherDaemonsTurnRunAsOneBatch) {
  const std::string path = testing::MakeTempDir("stage_turns_test") + "/compute.lock";
  auto ours = ComputeLock::Open(path);
  auto other = ComputeLock::Open(path);
  ASSERT_TRUE(ours.ok() && other.ok());
  MetricsRegistry registry;
  absl::StatusOr<Histogram*> batch_steps =
      registry.AddHistogram("batch", "steps per batch", ExponentialBuckets(1, 2, 8));
  absl::StatusOr<Histogram*> turn_wait =
      registry.AddHistogram("turn", "turn wait", ExponentialBuckets(0.0001, 2, 18));
  ASSERT_TRUE(batch_steps.ok() && turn_wait.ok());
  StageOptions options;
  options.compute_lock = ours->get();
  options.batch_steps = *batch_steps;
  options.turn_wait_seconds = *turn_wait;
  Start(options);

  ASSERT_TRUE((*other)->Acquire([] { return false; }));
  constexpr int kSteps = 3;
  for (int i = 0; i < kSteps; ++i) {
    const std::string n = std::to_string(i);
    ASSERT_TRUE(runtime_->Enqueue(Step("o", "r" + n, "s" + n, prompt_), Node("o")).ok());
  }
  for (int i = 0; i < 3000 && !(*other)->OthersWaiting(); ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE((*other)->OthersWaiting()) << "the stage does not wait for its turn";
  EXPECT_EQ(runtime_->queued(), static_cast<size_t>(kSteps)) << "a step ran out of turn";
  (*other)->Release();
  const v1::DeliverTokenRequest last = transport_.WaitDelivery(kSteps);
  EXPECT_EQ((*batch_steps)->Count(), 1u);
  EXPECT_EQ((*batch_steps)->Sum(), kSteps) << "the waiting steps did not run as one batch";
  EXPECT_EQ((*turn_wait)->Count(), 1u);
  // Each got the token a solo run of the same prompt gives.
  Start(StageOptions{});
  ASSERT_TRUE(runtime_->Enqueue(Step("o", "solo", "solo", prompt_), Node("o")).ok());
  EXPECT_EQ(transport_.WaitDelivery(kSteps + 1).token(), last.token());
}

// Sends to node "c" hang until Release; every other send is recorded.
class StallingTransport : public Transport {
 public:
  absl::Status StageStep(const std::string& to, const v1::StageStepRequest& r) override {
    absl::MutexLock lock(&mu_);
    if (to == "c") {
      ++stalled_;
      auto released = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return released_; };
      mu_.Await(absl::Condition(&released));
      return absl::DeadlineExceededError("stalled");
    }
    sent_to_.push_back(to);
    return absl::OkStatus();
  }
  absl::Status DeliverToken(const std::string&, const v1::DeliverTokenRequest&,
                            v1::DeliverTokenReply*) override {
    return absl::OkStatus();
  }
  absl::Status Cancel(const std::string&, const std::string&) override { return absl::OkStatus(); }
  absl::Status Rollback(const std::string&, const v1::RollbackRequest&) override {
    return absl::OkStatus();
  }
  absl::Status DropSession(const std::string&, const std::string&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<uint32_t> AdoptPrefix(const std::string&, const v1::AdoptPrefixRequest&) override {
    return 0u;
  }
  bool WaitStalled() {
    absl::MutexLock lock(&mu_);
    auto stalled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stalled_ > 0; };
    return mu_.AwaitWithTimeout(absl::Condition(&stalled), absl::Seconds(30));
  }
  bool WaitSentTo(const std::string& to) {
    absl::MutexLock lock(&mu_);
    auto sent = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::find(sent_to_.begin(), sent_to_.end(), to) != sent_to_.end();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&sent), absl::Seconds(30));
  }
  bool still_stalled() {
    absl::MutexLock lock(&mu_);
    return !released_;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }

 private:
  absl::Mutex mu_;
  int stalled_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> sent_to_ ABSL_GUARDED_BY(mu_);
};

// Stage 0 on node "b" of two plans, one going on to "c" and one to "d".
// Node "c" stops answering: the request on the other plan still gets its
// step through at once.
TEST_F(StageRuntimeTest, AStalledNextHopDoesNotStallRequestsWhosePlansDoNotIncludeIt) {
  StallingTransport transport;
  members_.insert("d");
  StageRuntime runtime(
      *model_, &pool_, &transport, "b",
      [this](const std::string& id) { return members_.count(id) > 0; }, StageOptions{});
  const uint32_t n_layer = model_->config().n_layer;
  ASSERT_TRUE(runtime.SetRange(LayerRange{0, 2}).ok());
  auto step_via = [&](const std::string& next, const std::string& id) {
    v1::StageStepRequest r = Step("o", id, "s-" + id, prompt_);
    v1::Plan* plan = r.mutable_plan();
    plan->mutable_stages(0)->set_last_layer(2);
    v1::PlanStage* s = plan->add_stages();
    s->set_node_id(next);
    s->set_first_layer(2);
    s->set_last_layer(n_layer);
    return r;
  };
  ASSERT_TRUE(runtime.Enqueue(step_via("c", "r1"), Node("o")).ok());
  ASSERT_TRUE(transport.WaitStalled());
  ASSERT_TRUE(runtime.Enqueue(step_via("d", "r2"), Node("o")).ok());
  EXPECT_TRUE(transport.WaitSentTo("d"));
  EXPECT_TRUE(transport.still_stalled());
  transport.Release();
  runtime.Stop();
}

}  // namespace
}  // namespace ringlm
