// Speculative decoding through a two-stage ring (two runtimes, one process):
// a request's tokens and their logprobs are the same bits with and without
// drafts, alone and batched, greedy and seeded, with a JSON constraint and a
// penalty or without; drafts are accepted; and
// the rejected ones leave no positions behind on either stage.
#include "inference/sampling/speculation.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/stage/stage_runtime.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

// Routes steps between the runtimes of a ring by node id, as node `self`;
// keeps what the last stage delivers.
class RingTransport : public Transport {
 public:
  struct Delivered {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;  // the chosen token's, bit for bit
    uint32_t drafted = 0;
    uint32_t accepted = 0;
  };
  struct Shared {
    std::map<std::string, StageRuntime*> nodes;
    absl::Mutex mu;
    std::map<std::string, Delivered> delivered ABSL_GUARDED_BY(mu);
    int finished ABSL_GUARDED_BY(mu) = 0;
  };
  RingTransport(std::string self, Shared* shared) : self_(std::move(self)), shared_(shared) {}

  absl::Status StageStep(const std::string& to, const v1::StageStepRequest& r) override {
    return shared_->nodes.at(to)->Enqueue(r, Caller{Caller::Role::kNode, self_, true, ""});
  }
  absl::Status DeliverToken(const std::string&, const v1::DeliverTokenRequest& r,
                            v1::DeliverTokenReply*) override {
    absl::MutexLock lock(&shared_->mu);
    Take(r);
    for (const v1::DeliverTokenRequest& then : r.then()) Take(then);
    return absl::OkStatus();
  }
  absl::Status Cancel(const std::string&, const std::string&) override { return absl::OkStatus(); }
  absl::Status DropSession(const std::string&, const std::string&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<uint32_t> AdoptPrefix(const std::string&, const v1::AdoptPrefixRequest&) override {
    return 0u;
  }

 private:
  void Take(const v1::DeliverTokenRequest& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared_->mu) {
    EXPECT_NE(r.finish_reason(), v1::FINISH_REASON_ERROR) << r.error();
    Delivered& d = shared_->delivered[r.request_id()];
    EXPECT_EQ(r.index(), d.tokens.size()) << r.request_id();
    d.tokens.push_back(r.token());
    d.logprobs.push_back(r.logprobs().chosen().logprob());
    d.drafted += r.drafted();
    d.accepted += r.accepted();
    if (r.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) ++shared_->finished;
  }

  const std::string self_;
  Shared* const shared_;
};

class SpeculationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Model>> m =
        Model::Load(std::string(RINGLM_SHARED_DIR) + "/models/stories260K-f32.gguf", {});
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = *std::move(m);
  }

  // Request i: a prompt of the bundled model's kind, greedy or (every
  // third) seeded, with logprobs; drafting up to `max_drafts` a step.
  v1::StageStepRequest Request(int i, uint32_t max_drafts) const {
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 425, 300, 270, 403, 407};
    v1::StageStepRequest r;
    r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    r.set_request_id("r" + std::to_string(i));
    r.set_session_id("s" + std::to_string(i));
    r.set_origin("o");
    v1::Plan* plan = r.mutable_plan();
    plan->set_model_fingerprint(model_->fingerprint());
    const uint32_t n_layer = model_->config().n_layer;
    plan->set_n_layers(n_layer);
    for (const auto& [node, first, last] :
         {std::tuple{"b", 0u, n_layer / 2}, std::tuple{"c", n_layer / 2, n_layer}}) {
      v1::PlanStage* s = plan->add_stages();
      s->set_node_id(node);
      s->set_first_layer(first);
      s->set_last_layer(last);
    }
    r.mutable_tokens()->Add(prompt.begin(), prompt.begin() + 4 + i % 7);
    r.mutable_limits()->set_max_tokens(40 + i);
    r.mutable_limits()->set_ignore_eos(true);
    r.mutable_logprobs()->set_enabled(true);
    if (i % 3 == 2) {
      r.mutable_sampling()->set_temperature(0.7f);
      r.mutable_sampling()->set_seed(100 + i);
    }
    // Requests 1 (greedy) and 5 (seeded) must reply in JSON, with a
    // frequency penalty: the grammar and the penalties see drafts too.
    if (i % 4 == 1) {
      r.set_constraint(R"({"type":"json_object"})");
      r.mutable_sampling()->set_frequency_penalty(0.3f);
    }
    r.mutable_speculation()->set_max_drafts(max_drafts);
    r.set_sample(true);
    return r;
  }

  // Runs requests `which` at once through a fresh two-stage ring; what
  // each got, and the positions each stage's sessions hold at the end.
  struct Run {
    std::map<std::string, RingTransport::Delivered> delivered;
    std::map<std::string, uint32_t> positions_b, positions_c;
  };
  Run RunRing(const std::vector<int>& which, uint32_t max_drafts) {
    RingTransport::Shared shared;
    RingTransport to_b("b", &shared), to_c("c", &shared);
    auto member = [](const std::string& id) { return id == "b" || id == "c" || id == "o"; };
    const uint32_t n_layer = model_->config().n_layer;
    StageRuntime b(*model_, &pool_, &to_b, "b", member, StageOptions{});
    StageRuntime c(*model_, &pool_, &to_c, "c", member, StageOptions{});
    shared.nodes = {{"b", &b}, {"c", &c}};
    EXPECT_TRUE(b.SetRange(LayerRange{0, n_layer / 2}).ok());
    EXPECT_TRUE(c.SetRange(LayerRange{n_layer / 2, n_layer}).ok());
    for (int i : which) {
      EXPECT_TRUE(
          b.Enqueue(Request(i, max_drafts), Caller{Caller::Role::kNode, "o", true, ""}).ok());
    }
    Run run;
    {
      absl::MutexLock lock(&shared.mu);
      auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared.mu) {
        return shared.finished >= static_cast<int>(which.size());
      };
      EXPECT_TRUE(shared.mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(60)));
      run.delivered = shared.delivered;
    }
    b.Stop();
    c.Stop();
    for (const SessionInfo& s : b.sessions().Stats().sessions)
      run.positions_b[s.id] = s.n_positions;
    for (const SessionInfo& s : c.sessions().Stats().sessions)
      run.positions_c[s.id] = s.n_positions;
    return run;
  }

  std::unique_ptr<Model> model_;
  ThreadPool pool_{1};
};

TEST_F(SpeculationTest, TokensAreTheSameBitsWithAndWithoutDrafts) {
  constexpr int kRequests = 8;
  std::vector<int> all;
  for (int i = 0; i < kRequests; ++i) all.push_back(i);
  const Run plain = RunRing(all, 0);
  const Run drafted = RunRing(all, 8);
  uint32_t accepted = 0, drafts = 0;
  for (int i = 0; i < kRequests; ++i) {
    const std::string id = "r" + std::to_string(i);
    ASSERT_EQ(plain.delivered.count(id), 1u);
    ASSERT_EQ(drafted.delivered.count(id), 1u);
    const RingTransport::Delivered& p = plain.delivered.at(id);
    const RingTransport::Delivered& d = drafted.delivered.at(id);
    EXPECT_EQ(p.tokens.size(), static_cast<size_t>(40 + i));
    EXPECT_EQ(d.tokens, p.tokens) << id;
    EXPECT_EQ(d.logprobs, p.logprobs) << id;
    EXPECT_EQ(p.drafted, 0u);
    accepted += d.accepted;
    drafts += d.drafted;
    std::printf("%s: %u of %u drafts accepted\n", id.c_str(), d.accepted, d.drafted);
  }
  std::printf("%u of %u drafts accepted over %d requests\n", accepted, drafts, kRequests);
  EXPECT_GT(accepted, 0u) << "no draft was ever accepted: nothing was tested";
  EXPECT_LT(accepted, drafts) << "no draft was ever rejected: nothing was tested";
  // One request alone gets what it got in the batch.
  const Run alone = RunRing({kRequests - 1}, 8);
  const std::string last = "r" + std::to_string(kRequests - 1);
  EXPECT_EQ(alone.delivered.at(last).tokens, plain.delivered.at(last).tokens);
}

// Every stage ends a request holding the positions of a plain run: the
// prompt and the reply but its last token (rejected drafts dropped; the
// last step's, which nothing follows, only beyond those).
TEST_F(SpeculationTest, RejectedDraftsLeaveNoPositionsBehind) {
  const Run plain = RunRing({0, 1, 2}, 0);
  const Run drafted = RunRing({0, 1, 2}, 8);
  EXPECT_EQ(drafted.positions_c, plain.positions_c);
  ASSERT_EQ(drafted.positions_b.size(), plain.positions_b.size());
  for (const auto& [key, n] : plain.positions_b) {
    ASSERT_EQ(drafted.positions_b.count(key), 1u) << key;
    EXPECT_GE(drafted.positions_b.at(key), n) << key;
    EXPECT_LE(drafted.positions_b.at(key), n + kMaxDrafts) << key;
  }
}

}  // namespace
}  // namespace ringlm
