#include "daemon/stage/last_stage_sampler.h"

#include <memory>
#include <string>
#include <vector>

#include "daemon/rpc/proto_convert.h"
#include "gtest/gtest.h"
#include "inference/model.h"

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
  absl::StatusOr<v1::DeliverTokenRequest> d = sampler.Sample(Step("r", 0, 8), Peak(77), history);
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
      sampler.Sample(Step("r", 3, 4), Peak(77), History{1, 40, 41, 77, 77, 77});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(sampler.size(), 0u);
}

TEST_F(LastStageSamplerTest, AFullContextEndsWithLength) {
  LastStageSampler sampler(tokenizer(), kContext, 16);
  const std::vector<int32_t> full(kContext, 40);
  absl::StatusOr<v1::DeliverTokenRequest> d = sampler.Sample(Step("r", 0, 1000), Peak(77), full);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->finish_reason(), v1::FINISH_REASON_LENGTH);
}

TEST_F(LastStageSamplerTest, EndOfGenerationStopsUnlessIgnored) {
  const int32_t eos = tokenizer().eos_id();
  ASSERT_GE(eos, 0);
  LastStageSampler sampler(tokenizer(), kContext, 16);
  absl::StatusOr<v1::DeliverTokenRequest> d =
      sampler.Sample(Step("a", 0, 8), Peak(eos), History{1, 40});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->finish_reason(), v1::FINISH_REASON_STOP);

  v1::StageStepRequest ignoring = Step("b", 0, 8);
  ignoring.mutable_limits()->set_ignore_eos(true);
  d = sampler.Sample(ignoring, Peak(eos), History{1, 40});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->token(), eos);
  EXPECT_EQ(d->finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
}

TEST_F(LastStageSamplerTest, LogprobsComeWithTheTokenWhenAskedFor) {
  LastStageSampler sampler(tokenizer(), kContext, 16);
  v1::StageStepRequest step = Step("r", 0, 8);
  step.mutable_logprobs()->set_enabled(true);
  step.mutable_logprobs()->set_top(3);
  absl::StatusOr<v1::DeliverTokenRequest> d = sampler.Sample(step, Peak(77), History{1});
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
          sampler.Sample(Step("r", i, 100, seeded), Peak(static_cast<int32_t>(50 + i), 2), history);
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
  absl::StatusOr<v1::DeliverTokenRequest> d = sampler.Sample(step, Peak(77, 50), History{1});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string piece = tokenizer().TokenToPiece(d->token());
  ASSERT_FALSE(piece.empty());
  // A JSON object may only start with blanks or '{'.
  EXPECT_TRUE(piece.find_first_not_of(" \n\t") == std::string::npos ||
              piece[piece.find_first_not_of(" \n\t")] == '{')
      << "piece '" << piece << "'";
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

}  // namespace
}  // namespace ringlm
