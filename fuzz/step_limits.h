// The StepLimits of the node that stage_step_fuzzer plays (fuzz_constants.h),
// and the request parts it holds for steps that omit theirs.
#ifndef RINGLM_FUZZ_STEP_LIMITS_H_
#define RINGLM_FUZZ_STEP_LIMITS_H_

#include <string>

#include "daemon/stage/request_parts.h"
#include "daemon/stage/step_validator.h"
#include "fuzz/fuzz_constants.h"

namespace ringlm::fuzz {

inline StepLimits StoriesStepLimits() {
  StepLimits limits;
  limits.self_id = std::string(kSelfId);
  limits.model_fingerprint = std::string(kModelFingerprint);
  limits.n_layer = kNLayer;
  limits.n_embd = kNEmbd;
  limits.n_vocab = kNVocab;
  limits.context_size = kContextSize;
  limits.max_step_tokens = kMaxStepTokens;
  return limits;
}

// The request whose parts the fuzzed node holds (RequestPartsTable): the
// seeds' request id and origin, on a two-stage plan where this node is
// stage 1.
inline constexpr std::string_view kKeptRequestId = "req-7f3a";
inline constexpr std::string_view kKeptOrigin = "node-a";

// A parts table holding the parts of kKeptRequestId, as a first step that
// carried them left them.
inline RequestPartsTable KeptPartsTable() {
  v1::StageStepRequest first;
  first.set_request_id(std::string(kKeptRequestId));
  first.set_origin(std::string(kKeptOrigin));
  v1::Plan* plan = first.mutable_plan();
  plan->set_epoch(3);
  plan->set_model_fingerprint(std::string(kModelFingerprint));
  plan->set_n_layers(kNLayer);
  const char* ids[] = {"node-a", "node-b"};
  for (uint32_t i = 0; i < 2; ++i) {
    v1::PlanStage* s = plan->add_stages();
    s->set_node_id(ids[i]);
    s->set_first_layer(i == 0 ? 0 : kNLayer / 2);
    s->set_last_layer(i == 0 ? kNLayer / 2 : kNLayer);
  }
  first.mutable_sampling()->set_temperature(0.8f);
  first.mutable_sampling()->set_top_p(0.95f);
  first.mutable_limits()->set_max_tokens(64);
  first.set_wire_dtype(v1::DTYPE_F16);
  RequestPartsTable table(uint64_t{1} << 20);
  (void)table.Keep(first);
  return table;
}

}  // namespace ringlm::fuzz

#endif  // RINGLM_FUZZ_STEP_LIMITS_H_
