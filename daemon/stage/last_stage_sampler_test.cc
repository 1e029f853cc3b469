#include "daemon/stage/last_stage_sampler.h"

#include <memory>
#include <string>
#include <vector>

#include "daemon/rpc/proto_convert.h"
#include "gtest/gtest.h"
#include "inference/model.h"
#include "inference/tokenizer/llama2c_vocab_for_test.h"

namespace ringlm {
namespace {

constexpr uint32_t kContext = 64;
using History = std::vector<int32_t>;

class LastStageSamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Model>> m =
        Model::Load(std::string(RINGLM_SHARED_DIR) + "/models/stories260K-f32.gguf", {});
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = *std::move(m);
    n_vocab_ = model_->tokenizer().n_vocab();
  }

  const Tokenizer& tokenizer() const { return model_->tokenizer(); }

  // A decode step of request `id` that has generated `generated` tokens.
  static v1::StageStepRequest Step(const std::string& id, uint32_t generated, int32_t max_tokens,
                                   SamplingParams sampling = {.temperature = 0}) {
    v1::StageStepRequest r;
    r.set_request_id(id);
    r.set_generated(generated);
    r.mutable_limits()->set_max_tokens(max_tokens);
    *r.mutable_sampling() = SamplingToProto(sampling);
    return r;
  }

  // The first (for a plain step, the only) delivery of a step.
  static absl::StatusOr<v1::DeliverTokenRequest> First(LastStageSampler& sampler,
                                                       const v1::StageStepRequest& step,
                                                       const std::vector<float>& logits,
                                                       const std::vector<int32_t>& history) {
    absl::StatusOr<LastStageSampler::Outcome> o = sampler.Sample(step, logits, history);
    if (!o.ok()) return o.status();
    EXPECT_EQ(o->deliveries.size(), 1u);
    return o->deliveries.front();
  }

  // Rows of logits peaking at `tokens`, one after another: a step's rows.
  std::vector<float> Peaks(const std::vector<int32_t>& tokens, float height = 5) const {
    std::vector<float> rows;
    for (int32_t t : tokens) {
      const std::vector<float> row = Peak(t, height);
      rows.insert(rows.end(), row.begin(), row.end());
    }
    return rows;
  }

  // Logits that peak at `token`, with a varied tail so seeded sampling has choices.
  std::vector<float> Peak(int32_t token, float height = 5) const {
    std::vector<float> logits(static_cast<size_t>(n_vocab_));
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
    logits[static_cast<size_t>(token)] = height;
    return logits;
  }

  std::unique_ptr<Model> model_;
  int32_t n_vocab_ = 0;
};

TEST_F(LastStageSamplerTest, GreedyTakesTheTopTokenAndGoesOn) {
  LastStageSampler sampler(tokenizer(), kContext, 16);
  const std::vector<int32_t> history = {1, 40, 41};
  absl::StatusOr<v1::DeliverTokenRequest> d = First(sampler, Step("r", 0, 8), Peak(77), history);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->request_id(), "r");
  EXPECT_EQ(d->token(), 77);
  EXPECT_EQ(d->index(), 0u);
  EXPECT_EQ(d->finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
  EXPECT_FALSE(d->has_logprobs());
  EXPECT_EQ(sampler.size(), 1u);  // kept for the next step
}

TEST_F(LastStageSamplerTest, TheLastAllowedTokenEndsWithLengthAndDropsTheSampler) {
  LastStageSampler sampler(tokenizer(), kContext, 16);
  absl::StatusOr<v1::DeliverTokenRequest> d =
      First(sampler, Step("r", 3, 4), Peak(77), History{1, 40, 41, 77, 77, 77});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(sampler.size(), 0u);
}

TEST_F(LastStageSamplerTest, AFullContextEndsWithLength) {
  LastStageSampler sampler(tokenizer(), kContext, 16);
  const std::vector<int32_t> full(kContext, 40);
  absl::StatusOr<v1::DeliverTokenRequest> d = First(sampler, Step("r", 0, 1000), Peak(77), full);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->finish_reason(), v1::FINISH_REASON_LENGTH);
}

TEST_F(LastStageSamplerTest, EndOfGenerationStopsUnlessIgnored) {
  const int32_t eos = tokenizer().eos_id();
  ASSERT_GE(eos, 0);
  LastStageSampler sampler(tokenizer(), kContext, 16);
  absl::StatusOr<v1::DeliverTokenRequest> d =
      First(sampler, Step("a", 0, 8), Peak(eos), History{1, 40});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->finish_reason(), v1::FINISH_REASON_STOP);

  v1::StageStepRequest ignoring = Step("b", 0, 8);
  ignoring.mutable_limits()->set_ignore_eos(true);
  d = First(sampler, ignoring, Peak(eos), History{1, 40});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->token(), eos);
  EXPECT_EQ(d->finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
}

TEST_F(LastStageSamplerTest, LogprobsComeWithTheTokenWhenAskedFor) {
  LastStageSampler sampler(tokenizer(), kContext, 16);
  v1::StageStepRequest step = Step("r", 0, 8);
  step.mutable_logprobs()->set_enabled(true);
  step.mutable_logprobs()->set_top(3);
  absl::StatusOr<v1::DeliverTokenRequest> d = First(sampler, step, Peak(77), History{1});
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(d->has_logprobs());
  EXPECT_EQ(d->logprobs().top_size(), 3);
}

// A sampler rebuilt from the session's history (a replay, or an evicted
// sampler) continues exactly where the kept one would have.
TEST_F(LastStageSamplerTest, ARebuiltSeededSamplerContinuesLikeTheKeptOne) {
  const SamplingParams seeded{.temperature = 1.5f, .seed = 1234};
  auto run = [&](bool rebuild_each_step) {
    LastStageSampler sampler(tokenizer(), kContext, 16);
    std::vector<int32_t> history = {1, 40, 41};
    std::vector<int32_t> tokens;
    for (uint32_t i = 0; i < 12; ++i) {
      if (rebuild_each_step) sampler.Forget("r");
      absl::StatusOr<v1::DeliverTokenRequest> d =
          First(sampler, Step("r", i, 100, seeded), Peak(static_cast<int32_t>(50 + i), 2), history);
      EXPECT_TRUE(d.ok()) << d.status();
      if (!d.ok()) break;
      tokens.push_back(d->token());
      history.push_back(d->token());
    }
    return tokens;
  };
  const std::vector<int32_t> kept = run(false);
  EXPECT_EQ(run(true), kept);
  EXPECT_NE(kept, std::vector<int32_t>(kept.size(), kept[0])) << "the seed should vary the tokens";
}

TEST_F(LastStageSamplerTest, AConstraintOverridesTheLogits) {
  LastStageSampler sampler(tokenizer(), kContext, 16);
  v1::StageStepRequest step = Step("r", 0, 8);
  step.set_constraint(R"({"type":"json_object"})");
  absl::StatusOr<v1::DeliverTokenRequest> d = First(sampler, step, Peak(77, 50), History{1});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string piece = tokenizer().TokenToPiece(d->token());
  ASSERT_FALSE(piece.empty());
  // A JSON object may only start with blanks or '{'.
  EXPECT_TRUE(piece.find_first_not_of(" \n\t") == std::string::npos ||
              piece[piece.find_first_not_of(" \n\t")] == '{')
      << "piece '" << piece << "'";
}

// DeepSeek V3's tool-call markers are control tokens; a forced call is
// written with them (their text is what the grammar wants), not spelled
// byte by byte.
TEST(LastStageSamplerToolCallTest, AForcedDeepSeekCallUsesTheMarkerTokens) {
  const std::vector<std::string> markers = {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
                                            "<｜tool▁sep｜>",         "<｜tool▁call▁end｜>",
                                            "<｜tool▁calls▁end｜>",   "<｜other▁control｜>"};
  std::unique_ptr<Tokenizer> tokenizer = testing::Tok512WithControlTokens(markers);
  ASSERT_NE(tokenizer, nullptr);
  const int32_t calls_begin = 512, other = 517;
  LastStageSampler sampler(*tokenizer, kContext, 16);
  v1::StageStepRequest step;
  step.set_request_id("r");
  step.mutable_limits()->set_max_tokens(8);
  *step.mutable_sampling() = SamplingToProto({.temperature = 0});
  step.set_constraint(
      R"({"type":"tool_call","family":"deepseek-v3","functions":[{"name":"f","parameters":{}}]})");
  std::vector<float> logits(static_cast<size_t>(tokenizer->n_vocab()), 0.0f);
  logits[static_cast<size_t>(other)] = 9;  // not a marker: never allowed
  logits[static_cast<size_t>(calls_begin)] = 5;
  logits['<' + 3] = 4;  // the byte '<' may start the marker's text, too
  absl::StatusOr<LastStageSampler::Outcome> o = sampler.Sample(step, logits, History{1});
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->deliveries.size(), 1u);
  EXPECT_EQ(o->deliveries[0].token(), calls_begin);
}

TEST_F(LastStageSamplerTest, BadStepsAreRefused) {
  LastStageSampler sampler(tokenizer(), kContext, 16);
  EXPECT_EQ(sampler.Sample(Step("r", 5, 8), Peak(77), History{1, 2}).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "claims more generated tokens than the session holds";
  v1::StageStepRequest bad = Step("s", 0, 8);
  bad.set_constraint(R"({"type":"no such thing"})");
  EXPECT_EQ(sampler.Sample(bad, Peak(77), History{1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sampler.size(), 0u);
}

TEST_F(LastStageSamplerTest, PastItsBoundTheLeastRecentlyUsedSamplerGoes) {
  LastStageSampler sampler(tokenizer(), kContext, 2);
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_TRUE(sampler.Sample(Step(id, 0, 8), Peak(77), History{1}).ok());
  }
  EXPECT_EQ(sampler.size(), 2u);
}

// A step of request `id` that carries `drafts` drafts, of a request that may
// speculate up to `max_drafts`.
v1::StageStepRequest Speculating(v1::StageStepRequest step, uint32_t drafts,
                                 uint32_t max_drafts = 8) {
  step.set_drafts(drafts);
  step.mutable_speculation()->set_max_drafts(max_drafts);
  return step;
}

std::vector<int32_t> Tokens(const LastStageSampler::Outcome& o) {
  std::vector<int32_t> tokens;
  for (const v1::DeliverTokenRequest& d : o.deliveries) tokens.push_back(d.token());
  return tokens;
}

// The drafts the request's next step carries: its tokens after the first.
std::vector<int32_t> NextDrafts(const LastStageSampler::Outcome& o) {
  if (o.steps.empty()) return {};
  return {o.steps.front().tokens.begin() + 1, o.steps.front().tokens.end()};
}

TEST_F(LastStageSamplerTest, DraftsAreAcceptedWhileTheyMatchWhatIsSampled) {
  LastStageSampler sampler(tokenizer(), kContext, 16);
  // History: prompt 1 40, the step's token 41, drafts 77 78 79. The rows
  // sample 77 (matches), 78 (matches), 90 (not 79): the fourth row is never
  // looked at.
  absl::StatusOr<LastStageSampler::Outcome> o = sampler.Sample(
      Speculating(Step("r", 1, 100), 3), Peaks({77, 78, 90, 55}), History{1, 40, 41, 77, 78, 79});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(Tokens(*o), (std::vector<int32_t>{77, 78, 90}));
  EXPECT_EQ(o->accepted, 2u);
  for (size_t i = 0; i < o->deliveries.size(); ++i) {
    EXPECT_EQ(o->deliveries[i].index(), 1 + i);
    EXPECT_EQ(o->deliveries[i].finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
  }
  EXPECT_EQ(o->deliveries[0].drafted(), 3u);
  EXPECT_EQ(o->deliveries[0].accepted(), 2u);
  EXPECT_EQ(o->deliveries[1].drafted(), 0u);

  // Every draft matches: the last row's token follows them.
  o = sampler.Sample(Speculating(Step("s", 1, 100), 2), Peaks({77, 78, 90}),
                     History{1, 40, 41, 77, 78});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(Tokens(*o), (std::vector<int32_t>{77, 78, 90}));
  EXPECT_EQ(o->accepted, 2u);
}

TEST_F(LastStageSamplerTest, TheRequestEndsAmongItsDrafts) {
  const int32_t eos = tokenizer().eos_id();
  LastStageSampler sampler(tokenizer(), kContext, 16);
  absl::StatusOr<LastStageSampler::Outcome> o = sampler.Sample(
      Speculating(Step("r", 0, 100), 3), Peaks({77, eos, 5, 5}), History{1, 40, 77, eos, 5});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(Tokens(*o), (std::vector<int32_t>{77, eos}));
  EXPECT_EQ(o->deliveries.back().finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_TRUE(o->steps.empty());
  EXPECT_EQ(sampler.size(), 0u);
  // max_tokens 2: the second token is the last, whatever matched.
  o = sampler.Sample(Speculating(Step("s", 0, 2), 3), Peaks({77, 78, 79, 80}),
                     History{1, 40, 77, 78, 79});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(Tokens(*o), (std::vector<int32_t>{77, 78}));
  EXPECT_EQ(o->deliveries.back().finish_reason(), v1::FINISH_REASON_LENGTH);
}

// Drafting never changes what a seeded request samples: each position
// takes the next value of the random stream, drafted or not; and a
// constrained, penalised one's grammar and penalties follow the accepted
// drafts exactly.
class SeededDraftsTest : public LastStageSamplerTest, public ::testing::WithParamInterface<bool> {};

TEST_P(SeededDraftsTest, SeededTokensAreTheSameWithDrafts) {
  const bool constrained = GetParam();
  const SamplingParams seeded{
      .temperature = 1.5f, .frequency_penalty = constrained ? 0.5f : 0.0f, .seed = 99};
  auto step = [&](uint32_t generated) {
    v1::StageStepRequest r = Step("r", generated, 100, seeded);
    if (constrained) r.set_constraint(R"({"type":"json_object"})");
    return r;
  };
  auto logits_at = [&](size_t pos) { return Peak(static_cast<int32_t>(50 + pos % 5), 2); };
  std::vector<int32_t> plain_tokens;
  {
    LastStageSampler sampler(tokenizer(), kContext, 16);
    std::vector<int32_t> history = {1, 40, 41};
    for (uint32_t i = 0; i < 10; ++i) {
      absl::StatusOr<v1::DeliverTokenRequest> d =
          First(sampler, step(i), logits_at(history.size()), history);
      ASSERT_TRUE(d.ok()) << d.status();
      plain_tokens.push_back(d->token());
      history.push_back(d->token());
    }
  }
  ASSERT_NE(plain_tokens, std::vector<int32_t>(10, plain_tokens[0]));
  // The same, with steps drafting the true tokens two at a time, then one
  // wrong one: every token comes out as before.
  LastStageSampler sampler(tokenizer(), kContext, 16);
  std::vector<int32_t> history = {1, 40, 41};
  std::vector<int32_t> tokens;
  while (tokens.size() < plain_tokens.size()) {
    const size_t have = tokens.size();
    std::vector<int32_t> step_history = history;
    std::vector<float> rows = logits_at(history.size());
    uint32_t drafts = 0;
    for (size_t j = have; j < have + 2 && j + 1 < plain_tokens.size(); ++j, ++drafts) {
      step_history.push_back(plain_tokens[j]);
      const std::vector<float> next = logits_at(step_history.size());
      rows.insert(rows.end(), next.begin(), next.end());
    }
    step_history.push_back(7);  // a wrong draft
    const std::vector<float> next = logits_at(step_history.size());
    rows.insert(rows.end(), next.begin(), next.end());
    ++drafts;
    absl::StatusOr<LastStageSampler::Outcome> o =
        sampler.Sample(Speculating(step(static_cast<uint32_t>(have)), drafts), rows, step_history);
    ASSERT_TRUE(o.ok()) << o.status();
    for (int32_t t : Tokens(*o)) {
      tokens.push_back(t);
      history.push_back(t);
    }
  }
  tokens.resize(plain_tokens.size());
  EXPECT_EQ(tokens, plain_tokens);
}

INSTANTIATE_TEST_SUITE_P(Constraint, SeededDraftsTest, ::testing::Values(false, true));

TEST_F(LastStageSamplerTest, TheNextDraftsAreLookedUpInTheSessionWithinItsLimits) {
  LastStageSampler sampler(tokenizer(), kContext, 16);
  // "5 6 7 8 9 ... 5 6" then 7 sampled: the next drafts are what followed
  // "5 6 7" before, as many as the request allows.
  absl::StatusOr<LastStageSampler::Outcome> o = sampler.Sample(
      Speculating(Step("r", 0, 100), 0, 4), Peak(7), History{1, 5, 6, 7, 8, 9, 10, 11, 12, 5, 6});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(NextDrafts(*o), (std::vector<int32_t>{8, 9, 10, 11}));
  ASSERT_EQ(o->steps.size(), 1u);  // nothing was ever accepted: no step is sent ahead
  EXPECT_EQ(o->steps[0].tokens.front(), 7);
  EXPECT_EQ(o->steps[0].position, 11u);
  EXPECT_EQ(o->steps[0].generated, 1u);
  // Two tokens left to generate: one draft at most (the step after yields
  // the draft and its own token).
  o = sampler.Sample(Speculating(Step("s", 0, 3), 0), Peak(7),
                     History{1, 5, 6, 7, 8, 9, 10, 11, 12, 5, 6});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(NextDrafts(*o), (std::vector<int32_t>{8}));
  // A request that does not speculate gets none.
  o = sampler.Sample(Step("t", 0, 100), Peak(7), History{1, 5, 6, 7, 8, 9, 10, 11, 12, 5, 6});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(NextDrafts(*o).empty());
  ASSERT_EQ(o->steps.size(), 1u);
}

}  // namespace
}  // namespace ringlm
