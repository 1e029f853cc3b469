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
#include "daemon/origin/generation_request.h"
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

// A checked request with its id and plan: the form the origin keeps. The
// frontend's GenerationRequest is held as it came (the proto the ring
// carries is built only where a step is sent, PromptPump::PromptStep);
// recovery changes only its prefix claim (generation.reuse). A stage that
// does not hold a claimed prefix exactly reports a miss, and the request
// starts over from position 0.
struct OriginRequest {
  std::string request_id;
  v1::Plan plan;
  // reuse.session_id is never empty: Prepare draws a throwaway session
  // when the frontend names none.
  GenerationRequest generation;
  // Drafts per step the last stage may check (OriginOptions::max_drafts, 0
  // when the request does not speculate).
  uint32_t max_drafts = 0;
  uint32_t steps_in_flight = 1;  // OriginOptions::steps_in_flight

  const std::string& session_id() const { return generation.reuse.session_id; }
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_ORIGIN_ORIGIN_REQUEST_H_
