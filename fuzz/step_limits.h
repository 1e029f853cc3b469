// The StepLimits of the node that stage_step_fuzzer plays (fuzz_constants.h).
#ifndef RINGLM_FUZZ_STEP_LIMITS_H_
#define RINGLM_FUZZ_STEP_LIMITS_H_

#include <string>

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

}  // namespace ringlm::fuzz

#endif  // RINGLM_FUZZ_STEP_LIMITS_H_
