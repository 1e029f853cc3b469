#include "daemon/stage/step_validator.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/rpc/proto_convert.h"
#include "inference/sampling/output_constraint.h"
#include "inference/sampling/speculation.h"

namespace ringlm {
namespace {

absl::Status CheckId(const std::string& id, const char* what) {
  if (id.empty() || id.size() > kMaxWireIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must have 1 to ", kMaxWireIdBytes, " bytes, got ", id.size()));
  }
  return absl::OkStatus();
}

absl::Status CheckHidden(const v1::Tensor& h, uint64_t n, uint64_t n_embd) {
  if (h.shape_size() != 2 || h.shape(0) != n || h.shape(1) != n_embd) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden states must have shape [", n, ", ", n_embd, "]"));
  }
  uint64_t width = 0;
  if (h.dtype() == v1::DTYPE_F32) width = 4;
  if (h.dtype() == v1::DTYPE_F16) width = 2;
  if (width == 0) return absl::InvalidArgumentError("hidden states must be f32 or f16");
  if (h.data().size() != n * n_embd * width) {
    return absl::InvalidArgumentError(absl::StrCat("hidden states of shape [", n, ", ", n_embd,
                                                   "] need ", n * n_embd * width, " bytes, got ",
                                                   h.data().size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateStageStep(const v1::StageStepRequest& step, const StepLimits& limits) {
  if (step.protocol_version() != v1::PROTOCOL_VERSION_CURRENT) {
    return absl::InvalidArgumentError(absl::StrCat("protocol version ", step.protocol_version(),
                                                   ", expected ", v1::PROTOCOL_VERSION_CURRENT));
  }
  RINGLM_RETURN_IF_ERROR(CheckId(step.request_id(), "request_id"));
  RINGLM_RETURN_IF_ERROR(CheckId(step.session_id(), "session_id"));
  RINGLM_RETURN_IF_ERROR(CheckId(step.origin(), "origin"));
  RINGLM_RETURN_IF_ERROR(ValidatePlan(step.plan(), limits.n_layer, limits.model_fingerprint));
  if (step.stage_index() >= static_cast<uint32_t>(step.plan().stages_size())) {
    return absl::InvalidArgumentError(absl::StrCat("stage_index ", step.stage_index(),
                                                   " is outside the plan's ",
                                                   step.plan().stages_size(), " stages"));
  }
  const v1::PlanStage& stage = step.plan().stages(step.stage_index());
  if (stage.node_id() != limits.self_id) {
    return absl::InvalidArgumentError(absl::StrCat("step for stage ", step.stage_index(),
                                                   " is meant for node ", stage.node_id(), ", not ",
                                                   limits.self_id));
  }
  const int n = step.tokens_size();
  if (n == 0) return absl::InvalidArgumentError("step has no tokens");
  if (static_cast<uint32_t>(n) > limits.max_step_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("step has ", n, " tokens, at most ", limits.max_step_tokens, " are allowed"));
  }
  if (static_cast<uint64_t>(step.position()) + n > limits.context_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("positions [", step.position(), ", ", uint64_t{step.position()} + n,
                     ") pass the context size ", limits.context_size));
  }
  for (int i = 0; i < n; ++i) {
    if (step.tokens(i) < 0 || static_cast<uint32_t>(step.tokens(i)) >= limits.n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", step.tokens(i), " at index ", i,
                                                     " is outside the vocabulary [0, ",
                                                     limits.n_vocab, ")"));
    }
  }
  if (step.drafts() > 0 &&
      (step.drafts() > kMaxDrafts || step.drafts() >= static_cast<uint32_t>(n) || !step.sample())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "drafts must be at most ", kMaxDrafts, ", fewer than the tokens, on a step that samples"));
  }
  if (step.discard() > kMaxDiscard) {
    return absl::InvalidArgumentError(absl::StrCat("discard must be at most ", kMaxDiscard));
  }
  if (step.speculation().steps_in_flight() > kMaxStepsInFlight) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculation.steps_in_flight must be at most ", kMaxStepsInFlight));
  }
  if (step.speculation().max_drafts() > kMaxDrafts) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculation.max_drafts must be at most ", kMaxDrafts));
  }
  if (step.stage_index() == 0) {
    if (step.has_hidden()) {
      return absl::InvalidArgumentError("stage 0 takes token ids, not hidden states");
    }
  } else {
    RINGLM_RETURN_IF_ERROR(CheckHidden(step.hidden(), n, limits.n_embd));
  }
  // Unspecified (proto3's zero) means f32.
  if (step.wire_dtype() != v1::DTYPE_UNSPECIFIED && step.wire_dtype() != v1::DTYPE_F32 &&
      step.wire_dtype() != v1::DTYPE_F16) {
    return absl::InvalidArgumentError("wire_dtype must be f32 or f16");
  }
  if (step.reuse_len() > 0) {
    if (step.position() != step.reuse_len() || step.reuse_digest().size() != 32) {
      return absl::InvalidArgumentError(
          "a reused prefix needs position == reuse_len and a 32-byte digest");
    }
    if (!step.fork_from().empty()) RINGLM_RETURN_IF_ERROR(CheckId(step.fork_from(), "fork_from"));
  } else if (!step.fork_from().empty()) {
    return absl::InvalidArgumentError("fork_from needs reuse_len > 0");
  }
  if (step.reuse_len() == 0 && !step.reuse_digest().empty()) {
    return absl::InvalidArgumentError("reuse_digest needs reuse_len > 0");
  }
  if (step.limits().max_tokens() < 0) {
    return absl::InvalidArgumentError("max_tokens must be >= 0");
  }
  RINGLM_RETURN_IF_ERROR(SamplingFromProto(step.sampling()).Validate());
  if (step.constraint().size() > kMaxConstraintBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("constraint must be at most ", kMaxConstraintBytes, " bytes"));
  }
  if (step.logprobs().top() > static_cast<uint32_t>(kMaxTopLogprobs)) {
    return absl::InvalidArgumentError(
        absl::StrCat("logprobs.top must be at most ", kMaxTopLogprobs));
  }
  // Whatever else it carries (long addresses, unknown fields), a well-formed
  // step is never larger than the bound the gRPC server is configured with.
  if (step.ByteSizeLong() > MaxStepBytes(limits)) {
    return absl::InvalidArgumentError(absl::StrCat("step of ", step.ByteSizeLong(),
                                                   " bytes is larger than the ",
                                                   MaxStepBytes(limits), " a step may be"));
  }
  return absl::OkStatus();
}

uint64_t MaxStepBytes(const StepLimits& limits) {
  // Hidden states in f32, the token ids as varints (5 bytes at most), and a
  // generous allowance for the plan and the other fields.
  return uint64_t{limits.max_step_tokens} * (uint64_t{limits.n_embd} * 4 + 5) + (64 << 10);
}

absl::Status ValidateAdoptPrefix(const v1::AdoptPrefixRequest& request, const StepLimits& limits) {
  if (request.protocol_version() != v1::PROTOCOL_VERSION_CURRENT) {
    return absl::InvalidArgumentError(
        absl::StrCat("protocol version ", request.protocol_version(), " is not supported"));
  }
  RINGLM_RETURN_IF_ERROR(CheckId(request.session_id(), "session_id"));
  const int n = request.lengths_size();
  if (n < 1 || n > kMaxAdoptClaims || request.digests_size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("an adoption needs 1 to ", kMaxAdoptClaims, " lengths, each with a digest"));
  }
  uint32_t previous = 0;
  for (int i = 0; i < n; ++i) {
    const uint32_t length = request.lengths(i);
    if (length <= previous || length >= limits.context_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "adoption lengths must ascend strictly inside [1, ", limits.context_size, ")"));
    }
    if (request.digests(i).size() != 32) {
      return absl::InvalidArgumentError("every adoption digest must have 32 bytes");
    }
    previous = length;
  }
  return absl::OkStatus();
}

}  // namespace ringlm
