// What the origin of requests is set up with: its options, the model it
// checks requests against, what it needs from the cluster, and the bundle of
// them its parts share.
#ifndef RINGLM_DAEMON_ORIGIN_ORIGIN_OPTIONS_H_
#define RINGLM_DAEMON_ORIGIN_ORIGIN_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "daemon/origin/origin_metrics.h"
#include "daemon/rpc/transport.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

struct OriginOptions {
  // A request with no token for this long, nor a note of its prompt's
  // progress from its last stage, is recovered (a stall nobody reported).
  std::chrono::milliseconds no_progress_timeout{60000};
  // How often the stages of running requests are health-checked.
  std::chrono::milliseconds health_interval{1000};
  // Prompt chunks stay below this many bytes of hidden state per message.
  uint64_t max_chunk_bytes = 8 << 20;
  uint32_t max_chunk_tokens = 512;
  // While requests of this origin stream their replies, prompt chunks are
  // small instead, so that the streams' decode steps, batched with each
  // chunk at every stage, wait for a short chunk rather than a long one:
  // busy_chunk_tokens_per_stream times (streams + 1), at most
  // busy_chunk_tokens. A chunk of k tokens adds about k tokens' compute to
  // the streams' step; the step's own cost grows with the streams (one
  // token each) from the fixed cost of reading the weights (the "+ 1"), so
  // at 2 per stream a compute-bound step costs about 3 times its cost
  // without the prompt. Chosen chunk by chunk: a long prompt that began
  // alone shrinks its chunks when a stream starts, and regrows them as the
  // streams end.
  uint32_t busy_chunk_tokens_per_stream = 2;
  uint32_t busy_chunk_tokens = 16;
  // Deeper into a prompt, each of its tokens also attends to more positions,
  // so the busy chunk shrinks with its position s: times D / (D + s), where
  // D = busy_chunk_depth_per_embd * the model's n_embd (0: it does not
  // shrink). At D a token's attention costs about as much as its weights:
  // on an Intel Xeon (Emerald Rapids), tinyllama-1.1b Q8_0 (n_embd 2048),
  // a 16-token chunk took 8.1 ms a token at position 0 and 11.8 ms at 1500.
  double busy_chunk_depth_per_embd = 1.5;
  // Prompt positions this origin has sent to stage 0 and no last stage has
  // noted yet (each notes every chunk it finishes), over all its requests:
  // bounds the steps its prompts queue at every stage, and so what a decode
  // step waits behind. Requests take turns, a chunk each, oldest first, so
  // that the stages find many sessions' chunks to batch. A request with
  // nothing in flight may always send a chunk, and one may always keep its
  // chunk times its stage count (plus one) in flight, so a lone prompt
  // fills the ring.
  uint32_t max_prompt_positions_in_flight = 1024;
  // Speculative decoding: drafts per step at most (up to kMaxDrafts); the
  // last stage chooses how many a request's steps carry from how its drafts
  // fare (DraftBudget). 0 = never speculate.
  uint32_t max_drafts = 8;
  // Steps of one request that may travel the ring at once (up to
  // kMaxStepsInFlight; Speculation.steps_in_flight).
  uint32_t steps_in_flight = 3;
  // Recoveries per request at most; the next failure ends it with an error.
  uint32_t max_recoveries = 3;
  // How long a recovery waits for the nodes to agree on a new plan.
  std::chrono::milliseconds recovery_timeout{15000};
};

// The health hook's answer for a node that answers as itself but restarted
// since the plan was made: it serves (a member), but a request's KV there
// is gone, so the request replays. Unavailable, marked by a payload.
inline constexpr char kRestartedSincePlanPayload[] = "ringlm.dev/restarted";
inline absl::Status RestartedSincePlan() {
  absl::Status s = absl::UnavailableError("restarted since the plan was made");
  s.SetPayload(kRestartedSincePlanPayload, absl::Cord("1"));
  return s;
}
inline bool IsRestartedSincePlan(const absl::Status& s) {
  return s.GetPayload(kRestartedSincePlanPayload).has_value();
}

// What the origin needs from the cluster. Each may block, within a
// deadline; all are called without the origin's locks held.
struct OriginClusterHooks {
  // Checks one stage's node (with a deadline): OK, RestartedSincePlan(), or
  // another error when it does not answer as itself (unreachable).
  std::function<absl::Status(const v1::PlanStage&)> health;
  // A node did not answer its health check as itself: the cluster forgets
  // it. Never called for a node that only restarted.
  std::function<void(const std::string& node_id)> on_unreachable;
  // Waits until `deadline` for a plan every node agrees on that names none
  // of `avoid`; an error when none comes, or when the remaining nodes cannot
  // hold the model (with the shortfall).
  std::function<absl::StatusOr<v1::Plan>(const std::vector<std::string>& avoid,
                                         std::chrono::steady_clock::time_point deadline)>
      await_plan;
  // The plan new requests start on (waiting, within a deadline, until every
  // stage agrees); Unavailable with the reason otherwise.
  std::function<absl::StatusOr<v1::Plan>()> serving_plan;
};

// What the origin checks a request against.
struct OriginModel {
  uint32_t n_embd = 0;
  uint32_t context_size = 0;
  uint32_t n_vocab = 0;
};

// What the parts of one origin (OriginRegistry, PromptPump, OriginRecovery)
// share: its settings and its seams. Constant once built; the registry owns
// it and lends it to the others, which must not outlive it. The transport
// and the metrics are borrowed and must outlive the origin.
struct OriginContext {
  OriginOptions options;
  Transport* transport = nullptr;
  std::string self_id;  // this node: the `origin` of every prompt step
  OriginModel model;
  OriginClusterHooks cluster;
  const OriginMetrics* metrics = nullptr;  // may be null
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_ORIGIN_ORIGIN_OPTIONS_H_
