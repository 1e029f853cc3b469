// What goes into the origin and what comes out of it: a checked request in
// the form the origin keeps, and the events it tells the request's owner.
#ifndef RINGLM_DAEMON_ORIGIN_ORIGIN_REQUEST_H_
#define RINGLM_DAEMON_ORIGIN_ORIGIN_REQUEST_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "inference/sampling/logprobs.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// What the origin tells the request's owner (e.g. a streaming RPC).
struct OriginEvent {
  bool has_token = false;
  int32_t token = -1;
  // Set on the last event of a request.
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  absl::Status error;  // with FINISH_REASON_ERROR
  // On the first token: prompt positions taken from the stages' caches.
  uint32_t cached_tokens = 0;
  // With the token, when the request asked for logprobs.
  std::optional<TokenLogprobs> logprobs;
};
// Called once per event, in order, never concurrently for one request, and
// never with a lock held. Must not block.
using OriginSink = std::function<void(const OriginEvent&)>;

// A checked request, with its ids and plan: the form the origin keeps, with
// the ring's proto parts ready to send.
struct OriginRequest {
  std::string request_id;
  std::string session_id;
  v1::Plan plan;
  std::vector<int32_t> prompt;
  v1::SamplingParams sampling;
  v1::GenerationLimits limits;
  v1::LogprobOptions logprobs;
  std::string constraint;  // output_constraint.h spec; empty = free text
  v1::DType wire_dtype = v1::DTYPE_F32;
  // Continue from the first reuse_len positions of session_id (or of
  // fork_from, copied). A stage that does not hold them exactly reports a
  // miss, and the request starts over from position 0.
  uint32_t reuse_len = 0;
  std::string fork_from;
  bool keep_session = false;  // false: every stage drops the session at the end
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_ORIGIN_ORIGIN_REQUEST_H_
