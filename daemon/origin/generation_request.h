// The one request type between a frontend and the origin: what the HTTP API
// (api/generation_backend.h) and the gRPC Generate call hand over, in domain
// types. OriginRegistry::Prepare checks it, once for every frontend, and
// builds the proto the ring carries from it.
#ifndef RINGLM_DAEMON_ORIGIN_GENERATION_REQUEST_H_
#define RINGLM_DAEMON_ORIGIN_GENERATION_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "inference/sampling/sampling_params.h"

namespace ringlm {

// Which cached KV to start from: positions [0, reuse_len) of session
// `session_id` on every stage (or of `fork_from`, copied into `session_id`,
// when that session is busy or must be kept). Stages check the digest of
// those tokens; on any mismatch the origin recomputes from position 0 and
// reports cached_tokens = 0. reuse_len = 0 means no reuse.
struct PrefixReuse {
  std::string session_id;  // the session the request runs in (and keeps)
  std::string fork_from;   // empty = reuse session_id itself
  uint32_t reuse_len = 0;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;  // fits the context (inference/context_limit.h)
  SamplingParams sampling;
  int32_t max_tokens = 16;  // >= 0
  bool ignore_eos = false;  // generate max_tokens even past end-of-sequence
  // Report each token's log-probability, and this many alternatives (<= 20).
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // What the reply must match (output_constraint.h spec, checked by
  // CompileConstraint); empty = free text.
  std::string constraint;
  bool f16_hidden = false;    // hidden states travel the ring as F16
  PrefixReuse reuse;          // session_id empty = a throwaway session
  bool keep_session = false;  // keep the stages' KV after the request
  // Let the last stage speculate (up to the origin's max_drafts drafts a
  // step): the reply is the same either way, only its speed differs.
  bool speculate = true;
  // Steps that may travel the ring at once when speculating (1 to
  // kMaxStepsInFlight); 0 = the origin's OriginOptions::steps_in_flight.
  uint32_t steps_in_flight = 0;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_ORIGIN_GENERATION_REQUEST_H_
