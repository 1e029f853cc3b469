// Speculative decoding through a ring of two or three stages (runtimes in
// one process): a request's tokens and their logprobs are the same bits
// with and without drafts, with one step in flight or several, alone and
// batched, greedy and seeded, with a JSON constraint and a penalty or
// without; drafts are accepted; and rejected drafts and voided steps in
// flight leave no positions behind on any stage.
#include "inference/sampling/speculation.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "daemon/stage/stage_runtime.h"
#include "gtest/gtest.h"
#include "inference/draft_model.h"

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
  absl::Status Rollback(const std::string& to, const v1::RollbackRequest& r) override {
    return shared_->nodes.at(to)->Rollback(r, Caller{Caller::Role::kNode, self_, true, ""});
  }
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
  v1::StageStepRequest Request(int i, uint32_t max_drafts, uint32_t steps_in_flight) const {
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 425, 300, 270, 403, 407};
    v1::StageStepRequest r;
    r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    r.set_request_id("r" + std::to_string(i));
    r.set_session_id("s" + std::to_string(i));
    r.set_origin("o");
    v1::Plan* plan = r.mutable_plan();
    plan->set_model_fingerprint(model_->fingerprint());
    plan->set_n_layers(model_->config().n_layer);
    for (size_t k = 0; k < stages_.size(); ++k) {
      v1::PlanStage* s = plan->add_stages();
      s->set_node_id(stages_[k]);
      s->set_first_layer(Range(k).first);
      s->set_last_layer(Range(k).last);
    }
    r.mutable_tokens()->Add(prompt.begin(), prompt.begin() + 4 + i % 7);
    r.mutable_limits()->set_max_tokens(reply_tokens_ + i);
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
    r.mutable_speculation()->set_steps_in_flight(steps_in_flight);
    r.set_sample(true);
    return r;
  }

  // Stage k's layers: an even split of the model among stages_.
  LayerRange Range(size_t k) const {
    const uint32_t n_layer = model_->config().n_layer;
    const uint32_t n = static_cast<uint32_t>(stages_.size());
    return LayerRange{n_layer * static_cast<uint32_t>(k) / n,
                      n_layer * static_cast<uint32_t>(k + 1) / n};
  }

  // What each request got, the positions each stage's sessions hold at
  // the end (by stage, then session), and the steps the last stage sent
  // ahead and saw voided.
  struct Run {
    std::map<std::string, RingTransport::Delivered> delivered;
    std::vector<std::map<std::string, uint32_t>> positions;
    double steps_ahead = 0, steps_voided = 0;
  };
  // Runs requests `which` at once through a fresh ring of stages_. With
  // `settle`, waits (up to 30 s) after the last token until every stage
  // holds the positions it lists: rollbacks travel after the last token.
  Run RunRing(const std::vector<int>& which, uint32_t max_drafts, uint32_t steps_in_flight = 1,
              const Run* settle = nullptr) {
    RingTransport::Shared shared;
    MetricsRegistry registry;
    Counter* ahead = *registry.AddCounter("ahead", "");
    Counter* voided = *registry.AddCounter("voided", "");
    auto member = [this](const std::string& id) {
      return id == "o" || std::find(stages_.begin(), stages_.end(), id) != stages_.end();
    };
    std::vector<std::unique_ptr<RingTransport>> transports;
    std::vector<std::unique_ptr<StageRuntime>> runtimes;
    for (size_t k = 0; k < stages_.size(); ++k) {
      transports.push_back(std::make_unique<RingTransport>(stages_[k], &shared));
      StageOptions options;
      options.steps_ahead = ahead;
      options.steps_voided = voided;
      options.draft_model = draft_.get();
      runtimes.push_back(std::make_unique<StageRuntime>(*model_, &pool_, transports.back().get(),
                                                        stages_[k], member, options));
      shared.nodes[stages_[k]] = runtimes.back().get();
      EXPECT_TRUE(runtimes.back()->SetRange(Range(k)).ok());
    }
    for (int i : which) {
      EXPECT_TRUE(runtimes.front()
                      ->Enqueue(Request(i, max_drafts, steps_in_flight),
                                Caller{Caller::Role::kNode, "o", true, ""})
                      .ok());
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
    auto positions = [&] {
      std::vector<std::map<std::string, uint32_t>> all;
      for (const auto& runtime : runtimes) {
        std::map<std::string, uint32_t>& held = all.emplace_back();
        for (const SessionInfo& s : runtime->sessions().Stats().sessions) {
          held[s.id] = s.n_positions;
        }
      }
      return all;
    };
    for (int waited_ms = 0;
         settle != nullptr && positions() != settle->positions && waited_ms < 30000;
         waited_ms += 5) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    for (const auto& runtime : runtimes) runtime->Stop();
    run.positions = positions();
    run.steps_ahead = ahead->Value();
    run.steps_voided = voided->Value();
    return run;
  }

  // Requests 0..n-1.
  static std::vector<int> First(int n) {
    std::vector<int> all;
    for (int i = 0; i < n; ++i) all.push_back(i);
    return all;
  }

  // Expects `run` to have given every request the tokens and logprobs of
  // `plain`, bit for bit; returns the drafts accepted and checked.
  static std::pair<uint32_t, uint32_t> ExpectSameReplies(const Run& plain, const Run& run) {
    uint32_t accepted = 0, drafts = 0;
    EXPECT_EQ(run.delivered.size(), plain.delivered.size());
    for (const auto& [id, p] : plain.delivered) {
      auto it = run.delivered.find(id);
      if (it == run.delivered.end()) {
        ADD_FAILURE() << id << " got nothing";
        continue;
      }
      EXPECT_EQ(it->second.tokens, p.tokens) << id;
      EXPECT_EQ(it->second.logprobs, p.logprobs) << id;
      accepted += it->second.accepted;
      drafts += it->second.drafted;
    }
    return {accepted, drafts};
  }

  std::vector<std::string> stages_ = {"b", "c"};
  int reply_tokens_ = 40;              // request i asks for reply_tokens_ + i
  std::unique_ptr<DraftModel> draft_;  // the last stage's, when set; else n-gram lookup
  std::unique_ptr<Model> model_;
  ThreadPool pool_{1};
};

TEST_F(SpeculationTest, TokensAreTheSameBitsWithAndWithoutDrafts) {
  constexpr int kRequests = 8;
  const Run plain = RunRing(First(kRequests), 0);
  const Run drafted = RunRing(First(kRequests), 8);
  for (int i = 0; i < kRequests; ++i) {
    const RingTransport::Delivered& p = plain.delivered.at("r" + std::to_string(i));
    EXPECT_EQ(p.tokens.size(), static_cast<size_t>(reply_tokens_ + i));
    EXPECT_EQ(p.drafted, 0u);
  }
  const auto [accepted, drafts] = ExpectSameReplies(plain, drafted);
  std::printf("%u of %u drafts accepted over %d requests\n", accepted, drafts, kRequests);
  EXPECT_GT(accepted, 0u) << "no draft was ever accepted: nothing was tested";
  EXPECT_LT(accepted, drafts) << "no draft was ever rejected: nothing was tested";
  EXPECT_EQ(drafted.steps_ahead, 0) << "one step in flight was asked for";
  // One request alone gets what it got in the batch.
  const Run alone = RunRing({kRequests - 1}, 8);
  const std::string last = "r" + std::to_string(kRequests - 1);
  EXPECT_EQ(alone.delivered.at(last).tokens, plain.delivered.at(last).tokens);
}

// Every stage ends a request holding the positions of a plain run: the
// prompt and the reply but its last token (the last step's rejected
// drafts are rolled back).
TEST_F(SpeculationTest, RejectedDraftsLeaveNoPositionsBehind) {
  const Run plain = RunRing({0, 1, 2}, 0);
  const Run drafted = RunRing({0, 1, 2}, 8, 1, &plain);
  EXPECT_EQ(drafted.positions, plain.positions);
}

// Several steps in flight through three stages, 120-token replies guessed
// by n-gram lookup and by a draft model (the target's Q8_0 copy: most of
// its greedy guesses match, not all): steps sent ahead of
// their verification, some voided by a rejection mid-ring, give the plain
// replies bit for bit, and leave every stage holding exactly the plain
// run's positions.
TEST_F(SpeculationTest, StepsInFlightGiveThePlainRepliesAndLeaveNoPositionsBehind) {
  stages_ = {"b", "c", "d"};
  reply_tokens_ = 120;
  constexpr int kRequests = 8;
  const Run plain = RunRing(First(kRequests), 0, 1);
  const Run by_ngram = RunRing(First(kRequests), 8, 4, &plain);
  ExpectSameReplies(plain, by_ngram);
  EXPECT_EQ(by_ngram.positions, plain.positions);

  absl::StatusOr<std::unique_ptr<DraftModel>> draft =
      DraftModel::Load(std::string(RINGLM_SHARED_DIR) + "/models/stories260K-q8_0.gguf",
                       model_->tokenizer(), 512, &pool_);
  ASSERT_TRUE(draft.ok()) << draft.status();
  draft_ = *std::move(draft);
  const Run by_model = RunRing(First(kRequests), 8, 4, &plain);
  const auto [accepted, drafts] = ExpectSameReplies(plain, by_model);
  std::printf(
      "n-gram: %.0f steps sent ahead, %.0f voided; draft model: %u of %u drafts "
      "accepted, %.0f steps sent ahead, %.0f voided\n",
      by_ngram.steps_ahead, by_ngram.steps_voided, accepted, drafts, by_model.steps_ahead,
      by_model.steps_voided);
  EXPECT_GT(by_model.steps_ahead, 0) << "no step went ahead: nothing was tested";
  EXPECT_GT(by_model.steps_voided, 0) << "no step in flight was voided: nothing was tested";
  EXPECT_LT(by_model.steps_voided, by_model.steps_ahead) << "every bet lost";
  EXPECT_EQ(by_model.positions, plain.positions);
  // One request alone, pipelined, gets what it got among the others.
  const Run alone = RunRing({kRequests - 1}, 8, 4);
  const std::string last = "r" + std::to_string(kRequests - 1);
  EXPECT_EQ(alone.delivered.at(last).tokens, plain.delivered.at(last).tokens);
}

}  // namespace
}  // namespace ringlm
