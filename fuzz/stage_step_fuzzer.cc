// libFuzzer target: ValidateStageStep (daemon/stage/step_validator.h), the one check
// an untrusted StageStep from the network passes before it is queued.
//
// The input is parsed as a serialized ringlm.v1.StageStepRequest, as gRPC
// would; inputs that are not one are skipped. A step that omits its parts
// (parts_omitted) first gets them from a RequestPartsTable holding one
// request's (step_limits.h), as the stage does. The step is validated against a
// node running stories260K (fuzz_constants.h). A rejection must be
// InvalidArgument (and map to gRPC's INVALID_ARGUMENT). An accepted step must
// satisfy every promise of the header, each re-checked here independently:
// version, ids, a plan that covers the model's layers and names this node at
// stage_index, 1..max_step_tokens tokens inside the vocabulary at positions
// inside the context, bounded drafts, discards and steps in flight, hidden states of exactly tokens
// * n_embd * width bytes (none on stage 0) that DecodeHidden (what the stage runs next) accepts, a
// consistent prefix claim, valid sampling, and a wire size within
// MaxStepBytes (which sizes the node's gRPC receive limit). The last can only
// fail for inputs past MaxStepBytes' 64 KiB allowance, so it is exercised by
// -max_len runs only, not by the default 4 KiB inputs.
//
// The same input, parsed as an AdoptPrefixRequest, goes through
// ValidateAdoptPrefix, the other check of a peer's call that a stage runs on
// its fields: an accepted one must keep that header's promises too.
#include <cstddef>
#include <cstdint>
#include <string>

#include "daemon/rpc/proto_convert.h"
#include "daemon/stage/step_validator.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/step_limits.h"
#include "google/protobuf/stubs/logging.h"
#include "inference/sampling/speculation.h"
#include "proto/ringlm.pb.h"

namespace ringlm {
namespace {

void CheckAccepted(const v1::StageStepRequest& step, const StepLimits& limits) {
  FUZZ_CHECK(step.protocol_version() == v1::PROTOCOL_VERSION_CURRENT);
  for (const std::string* id : {&step.request_id(), &step.session_id(), &step.origin()}) {
    FUZZ_CHECK(!id->empty() && id->size() <= kMaxWireIdBytes);
  }

  // The plan: this model, contiguous non-empty stages covering [0, n_layer).
  const v1::Plan& plan = step.plan();
  FUZZ_CHECK(plan.model_fingerprint() == limits.model_fingerprint);
  FUZZ_CHECK(plan.stages_size() >= 1);
  FUZZ_CHECK(static_cast<uint32_t>(plan.stages_size()) <= limits.n_layer);
  uint32_t next = 0;
  for (const v1::PlanStage& s : plan.stages()) {
    FUZZ_CHECK(s.first_layer() == next);
    FUZZ_CHECK(s.last_layer() > s.first_layer());
    FUZZ_CHECK(!s.node_id().empty() && s.node_id().size() <= 64);
    next = s.last_layer();
  }
  FUZZ_CHECK(next == limits.n_layer);
  FUZZ_CHECK(step.stage_index() < static_cast<uint32_t>(plan.stages_size()));
  FUZZ_CHECK(plan.stages(static_cast<int>(step.stage_index())).node_id() == limits.self_id);

  // Tokens and positions.
  const uint64_t n = static_cast<uint64_t>(step.tokens_size());
  FUZZ_CHECK(n >= 1 && n <= limits.max_step_tokens);
  FUZZ_CHECK(uint64_t{step.position()} + n <= limits.context_size);
  for (int32_t t : step.tokens()) FUZZ_CHECK(t >= 0 && static_cast<uint32_t>(t) < limits.n_vocab);

  // Speculation: drafts on a sampling step, fewer than its tokens; the
  // positions it may discard and the steps in flight bounded.
  FUZZ_CHECK(step.drafts() <= kMaxDrafts && step.drafts() < n);
  FUZZ_CHECK(step.drafts() == 0 || step.sample());
  FUZZ_CHECK(step.discard() <= kMaxDiscard);
  FUZZ_CHECK(step.speculation().max_drafts() <= kMaxDrafts);
  FUZZ_CHECK(step.speculation().steps_in_flight() <= kMaxStepsInFlight);

  // Hidden states: none on stage 0; else exactly [n, n_embd] of f32 or f16,
  // which the stage's decoder then reads without complaint.
  if (step.stage_index() == 0) {
    FUZZ_CHECK(!step.has_hidden());
  } else {
    const v1::Tensor& h = step.hidden();
    FUZZ_CHECK(h.shape_size() == 2 && h.shape(0) == n && h.shape(1) == limits.n_embd);
    FUZZ_CHECK(h.dtype() == v1::DTYPE_F32 || h.dtype() == v1::DTYPE_F16);
    const uint64_t width = h.dtype() == v1::DTYPE_F32 ? 4 : 2;
    FUZZ_CHECK(h.data().size() == n * limits.n_embd * width);
    absl::StatusOr<std::vector<float>> values = DecodeHidden(h, n, limits.n_embd);
    FUZZ_CHECK(values.ok());
    FUZZ_CHECK(values->size() == n * limits.n_embd);
  }
  FUZZ_CHECK(step.wire_dtype() == v1::DTYPE_UNSPECIFIED || step.wire_dtype() == v1::DTYPE_F32 ||
             step.wire_dtype() == v1::DTYPE_F16);

  // The prefix claim.
  if (step.reuse_len() > 0) {
    FUZZ_CHECK(step.position() == step.reuse_len());
    FUZZ_CHECK(step.reuse_digest().size() == 32);
    FUZZ_CHECK(step.fork_from().size() <= kMaxWireIdBytes);
  } else {
    FUZZ_CHECK(step.fork_from().empty());
  }
  FUZZ_CHECK(step.limits().max_tokens() >= 0);
  FUZZ_CHECK(SamplingFromProto(step.sampling()).Validate().ok());

  // The node's gRPC receive limit is MaxStepBytes: an accepted step fits it.
  FUZZ_CHECK(step.ByteSizeLong() <= MaxStepBytes(limits));

  // Validation is a function of the message, not of its encoding.
  std::string wire;
  FUZZ_CHECK(step.SerializeToString(&wire));
  v1::StageStepRequest again;
  FUZZ_CHECK(again.ParseFromString(wire));
  FUZZ_CHECK(ValidateStageStep(again, limits).ok());
}

void CheckAdoption(const v1::AdoptPrefixRequest& request, const StepLimits& limits) {
  const absl::Status status = ValidateAdoptPrefix(request, limits);
  if (!status.ok()) {
    FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  FUZZ_CHECK(request.protocol_version() == v1::PROTOCOL_VERSION_CURRENT);
  FUZZ_CHECK(!request.session_id().empty() && request.session_id().size() <= kMaxWireIdBytes);
  FUZZ_CHECK(request.lengths_size() >= 1 && request.lengths_size() <= kMaxAdoptClaims);
  FUZZ_CHECK(request.digests_size() == request.lengths_size());
  uint32_t previous = 0;
  for (int i = 0; i < request.lengths_size(); ++i) {
    FUZZ_CHECK(request.lengths(i) > previous && request.lengths(i) < limits.context_size);
    FUZZ_CHECK(request.digests(i).size() == 32);
    previous = request.lengths(i);
  }
}

}  // namespace
}  // namespace ringlm

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // Protobuf logs every proto3 string that is not UTF-8 (and fails the
  // parse, as it would under gRPC); at 50k inputs/s that is only noise.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ringlm::StepLimits* const limits =
      new ringlm::StepLimits(ringlm::fuzz::StoriesStepLimits());
  ringlm::v1::AdoptPrefixRequest adoption;
  const bool is_adoption = adoption.ParseFromArray(data, static_cast<int>(size));
  if (is_adoption) ringlm::CheckAdoption(adoption, *limits);
  ringlm::v1::StageStepRequest step;
  if (!step.ParseFromArray(data, static_cast<int>(size))) {
    return is_adoption ? 0 : -1;  // not a message: don't keep
  }
  if (step.parts_omitted()) {
    // As StageRuntime::Enqueue: the kept parts go in first. A refusal is a
    // malformed step, an unknown request or another origin's.
    ringlm::RequestPartsTable table = ringlm::fuzz::KeptPartsTable();
    const absl::Status filled = table.Fill(step);
    if (!filled.ok()) {
      FUZZ_CHECK(filled.code() == absl::StatusCode::kInvalidArgument ||
                 filled.code() == absl::StatusCode::kFailedPrecondition ||
                 filled.code() == absl::StatusCode::kPermissionDenied);
      return 0;
    }
    FUZZ_CHECK(step.request_id() == ringlm::fuzz::kKeptRequestId);
    FUZZ_CHECK(step.origin() == ringlm::fuzz::kKeptOrigin);
  }
  const absl::Status status = ringlm::ValidateStageStep(step, *limits);
  if (!status.ok()) {
    FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(ringlm::ToGrpc(status).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    return 0;
  }
  ringlm::CheckAccepted(step, *limits);
  return 0;
}
