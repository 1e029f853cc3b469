#include "daemon/stage/step_validator.h"

#include "gtest/gtest.h"
#include "inference/sampling/output_constraint.h"
#include "inference/sampling/speculation.h"

namespace ringlm {
namespace {

StepLimits Limits() {
  return StepLimits{.self_id = "b",
                    .model_fingerprint = "fp",
                    .n_layer = 4,
                    .n_embd = 8,
                    .n_vocab = 100,
                    .context_size = 64,
                    .max_step_tokens = 16};
}

// Stage 1 of a two-stage plan, on node "b", with valid hidden states.
v1::StageStepRequest Valid() {
  v1::StageStepRequest r;
  r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  r.set_request_id("r");
  r.set_session_id("s");
  r.set_origin("a");
  v1::Plan* plan = r.mutable_plan();
  plan->set_model_fingerprint("fp");
  plan->set_n_layers(4);
  for (auto [id, first, last] : {std::tuple{"a", 0, 2}, std::tuple{"b", 2, 4}}) {
    v1::PlanStage* s = plan->add_stages();
    s->set_node_id(id);
    s->set_first_layer(first);
    s->set_last_layer(last);
  }
  r.set_stage_index(1);
  r.add_tokens(1);
  r.add_tokens(2);
  v1::Tensor* h = r.mutable_hidden();
  h->set_dtype(v1::DTYPE_F32);
  h->add_shape(2);
  h->add_shape(8);
  h->set_data(std::string(2 * 8 * 4, '\0'));
  return r;
}

void ExpectInvalid(const v1::StageStepRequest& r, const std::string& words) {
  absl::Status s = ValidateStageStep(r, Limits());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(words), absl::string_view::npos) << s;
}

TEST(StepValidatorTest, AcceptsAWellFormedStep) {
  EXPECT_TRUE(ValidateStageStep(Valid(), Limits()).ok());
}

TEST(StepValidatorTest, HiddenBytesMustMatchTheShapeAndDtype) {
  v1::StageStepRequest r = Valid();
  r.mutable_hidden()->set_data(std::string(16 << 20, '\0'));
  ExpectInvalid(r, "need 64 bytes");
  r = Valid();
  r.mutable_hidden()->set_dtype(v1::DTYPE_F16);
  ExpectInvalid(r, "need 32 bytes");
  r = Valid();
  r.mutable_hidden()->set_dtype(v1::DTYPE_UNSPECIFIED);
  ExpectInvalid(r, "f32 or f16");
  r = Valid();
  r.mutable_hidden()->set_shape(1, 9);
  ExpectInvalid(r, "shape");
}

TEST(StepValidatorTest, BoundsTokensPositionsAndIds) {
  v1::StageStepRequest r = Valid();
  r.set_tokens(0, 100);
  ExpectInvalid(r, "outside the vocabulary");
  r = Valid();
  r.set_position(63);
  ExpectInvalid(r, "context size");
  r = Valid();
  r.clear_tokens();
  ExpectInvalid(r, "no tokens");
  r = Valid();
  for (int i = 0; i < 20; ++i) r.add_tokens(1);
  ExpectInvalid(r, "at most 16");
  r = Valid();
  r.set_request_id(std::string(129, 'x'));
  ExpectInvalid(r, "request_id");
  r = Valid();
  r.set_origin("");
  ExpectInvalid(r, "origin");
}

TEST(StepValidatorTest, BoundsLogprobsAndTheConstraint) {
  v1::StageStepRequest r = Valid();
  r.mutable_logprobs()->set_enabled(true);
  r.mutable_logprobs()->set_top(20);
  EXPECT_TRUE(ValidateStageStep(r, Limits()).ok());
  r.mutable_logprobs()->set_top(21);
  ExpectInvalid(r, "logprobs.top");
  r = Valid();
  r.set_constraint(R"({"type":"json_object"})");
  EXPECT_TRUE(ValidateStageStep(r, Limits()).ok());
  r.set_constraint(std::string(kMaxConstraintBytes + 1, ' '));
  ExpectInvalid(r, "constraint");
}

TEST(StepValidatorTest, BoundsDraftsAndDiscardedPositions) {
  v1::StageStepRequest r = Valid();
  r.set_sample(true);
  r.set_drafts(1);  // tokens 1, 2: the second a draft
  r.set_discard(kMaxDiscard);
  r.mutable_speculation()->set_max_drafts(kMaxDrafts);
  r.mutable_speculation()->set_steps_in_flight(kMaxStepsInFlight);
  EXPECT_TRUE(ValidateStageStep(r, Limits()).ok());
  r.set_drafts(2);
  ExpectInvalid(r, "fewer than the tokens");
  r.set_drafts(1);
  r.set_sample(false);
  ExpectInvalid(r, "on a step that samples");
  r = Valid();
  r.set_discard(kMaxDiscard + 1);
  ExpectInvalid(r, "discard");
  r = Valid();
  r.mutable_speculation()->set_max_drafts(kMaxDrafts + 1);
  ExpectInvalid(r, "max_drafts");
  r = Valid();
  r.mutable_speculation()->set_steps_in_flight(kMaxStepsInFlight + 1);
  ExpectInvalid(r, "steps_in_flight");
}

TEST(StepValidatorTest, ChecksThePlanAndTheClaim) {
  v1::StageStepRequest r = Valid();
  r.set_stage_index(0);
  ExpectInvalid(r, "meant for node a");
  r = Valid();
  r.mutable_plan()->mutable_stages(1)->set_last_layer(5);
  ExpectInvalid(r, "layers");
  r = Valid();
  r.set_reuse_len(3);
  ExpectInvalid(r, "reused prefix");
  r = Valid();
  r.set_fork_from("s0");
  ExpectInvalid(r, "fork_from");
  r = Valid();
  r.set_protocol_version(1);
  ExpectInvalid(r, "protocol version");
}

TEST(StepValidatorTest, NothingLargerThanMaxStepBytesIsWellFormed) {
  v1::StageStepRequest r = Valid();
  r.mutable_plan()->mutable_stages(0)->set_address(std::string(200000, 'a'));
  ExpectInvalid(r, "larger than");
  r = Valid();
  r.set_reuse_digest(std::string(32, 'x'));
  ExpectInvalid(r, "reuse_digest needs reuse_len");
}

TEST(StepValidatorTest, MaxStepBytesCoversTheLargestValidStep) {
  v1::StageStepRequest r = Valid();
  r.clear_tokens();
  for (int i = 0; i < 16; ++i) r.add_tokens(99);
  r.mutable_hidden()->set_shape(0, 16);
  r.mutable_hidden()->set_data(std::string(16 * 8 * 4, '\0'));
  ASSERT_TRUE(ValidateStageStep(r, Limits()).ok());
  EXPECT_LE(r.ByteSizeLong(), MaxStepBytes(Limits()));
}

TEST(StepValidatorTest, AnAdoptionOffersAscendingLengthsInsideTheContextWithDigests) {
  auto offer = [](std::vector<uint32_t> lengths) {
    v1::AdoptPrefixRequest r;
    r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    r.set_session_id("s");
    for (uint32_t n : lengths) {
      r.add_lengths(n);
      r.add_digests(std::string(32, 'd'));
    }
    return r;
  };
  auto message = [](const v1::AdoptPrefixRequest& r) {
    absl::Status s = ValidateAdoptPrefix(r, Limits());
    EXPECT_TRUE(s.ok() || s.code() == absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  EXPECT_TRUE(ValidateAdoptPrefix(offer({1, 16, 63}), Limits()).ok());
  EXPECT_NE(message(offer({})).find("1 to 64 lengths"), std::string::npos);
  std::vector<uint32_t> too_many(65);
  for (uint32_t i = 0; i < 65; ++i) too_many[i] = i + 1;
  EXPECT_NE(message(offer(too_many)).find("1 to 64 lengths"), std::string::npos);
  for (const auto& bad : {std::vector<uint32_t>{0}, {4, 4}, {8, 4}, {64}}) {
    EXPECT_NE(message(offer(bad)).find("ascend strictly inside [1, 64)"), std::string::npos);
  }
  v1::AdoptPrefixRequest r = offer({4});
  r.set_digests(0, "short");
  EXPECT_NE(message(r).find("32 bytes"), std::string::npos);
  r = offer({4});
  r.add_digests(std::string(32, 'e'));
  EXPECT_NE(message(r).find("each with a digest"), std::string::npos);
  r = offer({4});
  r.set_session_id("");
  EXPECT_NE(message(r).find("session_id"), std::string::npos);
  r = offer({4});
  r.set_protocol_version(1);
  EXPECT_NE(message(r).find("protocol version"), std::string::npos);
}

}  // namespace
}  // namespace ringlm
