// The origin side of the ring: requests that this node started, waiting for
// their tokens to come back from the last stage.
#ifndef RINGLM_DAEMON_ORIGIN_ORIGIN_H_
#define RINGLM_DAEMON_ORIGIN_ORIGIN_H_

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/log_rate_limiter.h"
#include "base/task_queue.h"
#include "daemon/origin/generation_request.h"
#include "daemon/origin/origin_metrics.h"
#include "daemon/rpc/transport.h"
#include "inference/sampling/logprobs.h"
#include "inference/sampling/sampling_params.h"
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
  // Recoveries per request at most; the next failure ends it with an error.
  uint32_t max_recoveries = 3;
  // How long a recovery waits for the nodes to agree on a new plan.
  std::chrono::milliseconds recovery_timeout{15000};
};

// What the origin needs from the cluster. Each may block, within a
// deadline; all are called without the origin's locks held.
struct OriginClusterHooks {
  // Checks one stage's node (with a deadline).
  std::function<absl::Status(const v1::PlanStage&)> health;
  // A node failed its health check: the cluster forgets it.
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

// The gRPC Generate call's form of a GenerationRequest, until that handler
// builds a GenerationRequest itself.
struct NewRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int32_t max_tokens = 0;
  bool ignore_eos = false;  // generate max_tokens even past end-of-sequence
  bool logprobs = false;
  int top_logprobs = 0;     // clamped to [0, kMaxTopLogprobs]
  std::string constraint;   // output_constraint.h spec; empty = free text
  bool f16_hidden = false;  // hidden states travel the ring as F16
  // Continue from the first reuse_len positions of session_id (or of
  // fork_from); an empty session_id is a session of the request's own.
  std::string session_id;
  uint32_t reuse_len = 0;
  std::string fork_from;
  bool keep_session = false;
};

// What the origin checks a request against.
struct OriginModel {
  uint32_t n_embd = 0;
  uint32_t context_size = 0;
  uint32_t n_vocab = 0;
};

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

// Starts requests by sending their prompt to stage 0 in chunks, no further
// ahead of what their last stages noted than max_prompt_positions_in_flight
// allows, and matches the tokens that come back to them.
//
// Recovery (docs/recovery.md): the origin keeps each request's reply so far.
// When a stage reports a failure, stops answering health calls, or nothing
// happens for no_progress_timeout, the request waits for a new agreed plan
// without the failed nodes and is replayed on it: prompt plus reply as one
// prefill, claiming whatever prefix the stages still hold (checked by
// digest). The last stage rebuilds the sampler from the reply, so the
// client's stream goes on with the very tokens an undisturbed run gives,
// nothing repeated and nothing skipped. After max_recoveries, or when no plan
// comes within recovery_timeout, the request fails with a clear error. A
// request the stages refuse as malformed fails at once.
//
// Owns a sender thread, a recovery thread, a cleanup thread and a watchdog
// thread. Thread-safe.
class OriginRegistry : public LocalOrigin {
 public:
  OriginRegistry(OriginOptions options, Transport* transport, std::string self_id,
                 OriginModel model, OriginClusterHooks cluster,
                 const OriginMetrics* metrics = nullptr);
  ~OriginRegistry();

  // The one check of a new request, for every frontend: a prompt that fits
  // the context (CheckPromptFits) inside the vocabulary, max_tokens >= 0, valid
  // sampling (InvalidArgument naming what is wrong). Then it draws the
  // request id (and a session id when none is given) from the CSPRNG and
  // takes the serving plan (Unavailable when there is none).
  absl::StatusOr<OriginRequest> Prepare(GenerationRequest request) const;
  absl::StatusOr<OriginRequest> Prepare(NewRequest request) const;
  // Registers a prepared request and queues its prompt. InvalidArgument for
  // an empty prompt or a duplicate id.
  absl::Status Start(OriginRequest request, OriginSink sink);
  // A DeliverToken call from node `caller`. Tokens are taken only from the
  // last stage of the request's plan, error reports from any of its stages;
  // PermissionDenied for anyone else (and the request goes on untouched).
  // Otherwise returns true when the sender should stop (the request is
  // unknown, finished or cancelled).
  absl::StatusOr<bool> Deliver(const v1::DeliverTokenRequest& delivery,
                               const std::string& caller) override;
  // Ends a request early (client gone, stop string): tells every stage.
  void Cancel(const std::string& request_id);
  // Drops a kept session on every stage of `plan`, in the background.
  void DropSessionEverywhere(const v1::Plan& plan, const std::string& session_id);
  size_t active() const;
  void Stop();

 private:
  struct Active {
    OriginRequest request;
    OriginSink sink;
    uint32_t attempt = 0;        // bumped by a cache-miss retry and by a recovery
    std::vector<int32_t> reply;  // tokens delivered so far
    uint32_t attempt_start = 0;  // reply.size() when the attempt began
    uint32_t cached_tokens = 0;  // reused prompt positions (0 after a miss)
    uint32_t recoveries = 0;
    bool recovering = false;        // waiting for a plan: no watchdog, no deliveries
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
    // prompt_end) in chunks (ChunkTokens), and has sent them up to
    // `sent`.
    uint32_t prompt_end = 0;
    uint32_t sent = 0;
    uint64_t order = 0;  // requests send their prompts in this order
  };
  // One line per request at its end: id, tokens in/out, cached, TTFT,
  // decode speed, plan.
  void LogRequest(const Active& a, const OriginEvent& last);
  // Stages see "<request id>#<attempt>", so steps of an abandoned attempt
  // can never be taken for the retry's.
  static std::string StageRequestId(const std::string& request_id, uint32_t attempt);

  // A new attempt sends prompt + reply from the reuse point to stage 0.
  void BeginPromptLocked(Active& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Positions `a` has sent and its last stage has not noted (0 once its
  // first token is back), and whether it has more to send.
  static uint32_t InFlight(const Active& a);
  static bool SendsPrompt(const Active& a);
  // Whether `a` has sent all its prompt (it decodes, or soon will).
  static bool Streams(const Active& a);
  // Prompt tokens per chunk from `position` while `streams` requests stream
  // (see busy_chunk_tokens), within max_chunk_tokens and max_chunk_bytes.
  uint32_t ChunkTokens(uint32_t streams, uint32_t position) const;
  // Asks the sender thread to run PumpPrompts (once, however often asked).
  void SchedulePumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // On the sender thread, the only one that sends prompt steps (so each
  // request's steps leave in order): sends the chunks that fit within
  // max_prompt_positions_in_flight, a chunk per request and turn.
  void PumpPrompts();
  v1::StageStepRequest PromptStepLocked(const Active& a, uint32_t start, uint32_t end) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // `attempt` failed: recover the request, or fail it when `status` says
  // the request itself is bad or it has used its recoveries.
  void Recover(const std::string& request_id, uint32_t attempt, const absl::Status& status);
  // On the recovery thread: finds the failed nodes, waits for a plan
  // without them, and replays.
  void Replan(const std::string& request_id, uint32_t attempt, v1::Plan failed_plan,
              absl::Status why);
  // A stage missed the claimed prefix: cancel the attempt everywhere, then
  // resend the whole prompt without reuse.
  void RetryWithoutReuse(const std::string& request_id, uint32_t failed_attempt);
  // The first token of a recovered attempt: counts the pause and the reuse.
  void ResumedLocked(Active& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the request and emits its last event; false if already gone.
  bool Finish(const std::string& request_id, const OriginEvent& last);
  void Fail(const std::string& request_id, const absl::Status& status);
  void CleanUpStages(const OriginRequest& request, uint32_t attempt, v1::FinishReason finish);
  void WatchdogLoop();

  const OriginOptions options_;
  Transport* const transport_;
  const std::string self_id_;
  const OriginModel model_;
  const OriginClusterHooks cluster_;
  const OriginMetrics* const metrics_;  // may be null

  mutable absl::Mutex mu_;
  std::map<std::string, Active> active_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool pump_posted_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_order_ ABSL_GUARDED_BY(mu_) = 0;
  // Serializes sink calls so events of one request never interleave.
  absl::Mutex sink_mu_;
  LogRateLimiter warnings_{std::chrono::seconds(10)};  // what members send
  TaskQueue sender_;
  TaskQueue recovery_;  // Replan: waits for plans
  TaskQueue cleanup_;   // Cancel / DropSession calls to stages
  std::thread watchdog_;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_ORIGIN_ORIGIN_H_
