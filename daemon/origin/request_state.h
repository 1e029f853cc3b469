// The state of one request at its origin, as one enum and the data each
// state uses, and the table of an origin's requests with their lock.
#ifndef RINGLM_DAEMON_ORIGIN_REQUEST_STATE_H_
#define RINGLM_DAEMON_ORIGIN_REQUEST_STATE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/origin/origin_request.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// Where a request stands at its origin. Each attempt is a new request at the
// stages ("<request id>#<attempt>", StageRequestId); a cache-miss retry and
// a recovery begin the next attempt.
//
//   Start
//     |
//     v           the pump sends the attempt's
//   kQueued ----- first chunk, with the parts ------> kPrefill <--+ later chunks,
//     ^  ^                                             |  |  |    | parts omitted
//     |  |                                             |  |  +----+
//     |  +--- a cache miss: RetryWithoutReuse ---------+  |
//     |       (next attempt, from position 0)             | the attempt's first token
//     |                                                   v
//     |                                                kDecode <--+ a token each
//     |                                                   |  |    |
//     |                                                   |  +----+
//     | Replan: a new plan, to replay                     |
//     | prompt + reply, claiming the stages' KV           |
//     |                                                   |
//   kRecovering <------ StartRecovery: a stage's error, a failed send, a stall,
//                       a stage that stopped answering (from kQueued, kPrefill
//                       or kDecode; the next attempt begins, so whatever the
//                       failed one still sends is ignored)
//
// From any state a request ends in kDone (stop, length), kCancelled or
// kFailed (an error, no new plan, out of recoveries) and leaves the table.
// A request with max_tokens 0 is never begun: it waits in kQueued, with no
// prompt, for its end.
enum class OriginState {
  kQueued,      // this attempt's prompt waits for its first chunk to be sent
  kPrefill,     // its prompt goes in, chunk by chunk, or is in: no token yet
  kDecode,      // tokens come back from the last stage
  kRecovering,  // waiting for a plan without the failed nodes
  kDone,
  kCancelled,
  kFailed,
};
std::string_view OriginStateName(OriginState state);
// The end a request's last event gives it.
OriginState EndState(v1::FinishReason finish);

// Stages see "<request id>#<attempt>", so steps of an abandoned attempt can
// never be taken for the retry's.
std::string StageRequestId(const std::string& request_id, uint32_t attempt);

// A request this origin started, while it runs. A plain value: whoever
// holds it must hold the RequestTable's lock it lives under. The state
// changes only through the methods below (and the registry's end).
struct ActiveRequest {
  OriginRequest request;
  OriginSink sink;
  OriginState state = OriginState::kQueued;
  uint32_t attempt = 0;        // bumped by a cache-miss retry and by a recovery
  std::vector<int32_t> reply;  // tokens delivered so far
  uint32_t cached_tokens = 0;  // reused prompt positions (0 after a miss)
  uint32_t recoveries = 0;
  uint32_t drafted = 0;           // draft tokens the last stage checked
  uint32_t accepted = 0;          // ... and accepted (tokens that came without a trip of their own)
  uint32_t replay_reused = 0;     // positions replays took from the stages' KV
  uint32_t replay_positions = 0;  // positions replays sent
  std::chrono::steady_clock::time_point failed_at;  // of the latest recovery
  std::chrono::steady_clock::time_point start;
  std::chrono::steady_clock::time_point first_token;
  std::chrono::steady_clock::time_point last_progress;
  // The furthest prompt position the last stage noted in this attempt: a
  // note must go further, so notes cannot hold a request off the watchdog
  // for ever.
  uint32_t noted_positions = 0;
  // This attempt's prompt, going in: it sends positions [reuse_len,
  // prompt_end) in chunks, and has sent them up to `sent`.
  uint32_t prompt_end = 0;
  uint32_t sent = 0;
  uint64_t order = 0;  // requests send their prompts in this order

  // -> kQueued: the attempt sends prompt + reply from the reuse point.
  void BeginAttempt();
  // kQueued or kPrefill -> kPrefill: positions up to `end` are sent.
  void ChunkSent(uint32_t end);
  // -> kDecode: the next token of the reply is back.
  void TakeToken(int32_t token);
  // -> kRecovering, with the next attempt: the current one failed at `now`.
  void StartRecovery(std::chrono::steady_clock::time_point now);
  // A stage missed the claimed prefix: -> kQueued with the next attempt,
  // which sends the whole prompt without reuse.
  void RestartWithoutReuse();
  // kRecovering -> kQueued on `plan`: replays prompt + reply, claiming all
  // but the last token delivered from the stages' KV (or, with no reply
  // yet, the original claim).
  void Replanned(v1::Plan plan);

  // Whether no token of this attempt is back yet (kQueued, kPrefill).
  bool AwaitsFirstToken() const;
  bool Recovering() const { return state == OriginState::kRecovering; }
  // Positions this attempt has sent and its last stage has not noted (0
  // once its first token is back), and whether it has more to send.
  uint32_t InFlight() const;
  bool SendsPrompt() const;
  // Whether it has sent all its prompt (it decodes, or soon will).
  bool Streams() const;
};

// An origin's running requests by request id, with the lock every part of
// the origin takes to read or change them. Thread-safe through `mu`; it
// never hands out what it holds beyond a caller's lock.
struct RequestTable {
  mutable absl::Mutex mu;
  std::map<std::string, ActiveRequest> requests ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;  // the origin shuts down
  // Non-empty: new requests are refused with this (the model is being
  // removed), and requests still running at Stop end with it.
  std::string refusing ABSL_GUARDED_BY(mu);

  // The request `request_id` if it still runs `attempt`, else null. Valid
  // while the caller holds `mu`.
  ActiveRequest* FindLocked(const std::string& request_id, uint32_t attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_ORIGIN_REQUEST_STATE_H_
