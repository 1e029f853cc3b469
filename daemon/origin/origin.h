// The origin side of the ring: requests that this node started, waiting for
// their tokens to come back from the last stage.
#ifndef RINGLM_DAEMON_ORIGIN_ORIGIN_H_
#define RINGLM_DAEMON_ORIGIN_ORIGIN_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/log_rate_limiter.h"
#include "base/task_queue.h"
#include "daemon/origin/generation_request.h"
#include "daemon/origin/origin_metrics.h"
#include "daemon/origin/origin_options.h"
#include "daemon/origin/origin_request.h"
#include "daemon/origin/prompt_pump.h"
#include "daemon/origin/recovery.h"
#include "daemon/origin/request_state.h"
#include "daemon/rpc/transport.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

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
// Each request moves through the states drawn in request_state.h. The
// registry keeps the table of them (Start, Deliver, Cancel, the end of a
// request and its metrics) and wires its two workers over it: the
// PromptPump sends prompts (prompt_pump.h) and OriginRecovery replans
// failed attempts (recovery.h).
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
  // takes the serving plan (Unavailable when there is none). A request that
  // keeps its session and reuses nothing asks the plan's stages for a
  // prefix of its prompt that another head's conversation left there
  // (AdoptPrefix); it starts from what every stage holds.
  absl::StatusOr<OriginRequest> Prepare(GenerationRequest request) const;
  // Registers a prepared request and queues its prompt. InvalidArgument for
  // an empty prompt or a duplicate id.
  absl::Status Start(OriginRequest request, OriginSink sink);
  // A DeliverToken call from node `caller`. Tokens are taken only from the
  // last stage of the request's plan, error reports from any of its stages;
  // PermissionDenied for anyone else (and the request goes on untouched).
  // Otherwise returns true when the sender should stop (the request is
  // unknown, finished or cancelled).
  // A delivery may carry more tokens of its request (`then`: a verified
  // step's); each is taken in turn, as if it came alone, until one says stop.
  absl::StatusOr<bool> Deliver(const v1::DeliverTokenRequest& delivery,
                               const std::string& caller) override;
  // Ends a request early (client gone, stop string): tells every stage.
  void Cancel(const std::string& request_id);
  // Drops a kept session on every stage of `plan`, in the background.
  void DropSessionEverywhere(const v1::Plan& plan, const std::string& session_id);
  size_t active() const;
  // From now on Start refuses new requests (Unavailable: `reason`); the
  // running ones go on. For draining before Stop.
  void StopAccepting(const std::string& reason);
  void Stop();

 private:
  // One token (or an error, or a progress note) of a delivery.
  absl::StatusOr<bool> DeliverOne(const v1::DeliverTokenRequest& delivery,
                                  const std::string& caller);
  // One line per request at its end: id, tokens in/out, cached, TTFT,
  // decode speed, plan.
  void LogRequest(const ActiveRequest& a, const OriginEvent& last);
  // Removes the request and emits its last event; false if already gone.
  bool Finish(const std::string& request_id, const OriginEvent& last);
  void Fail(const std::string& request_id, const absl::Status& status);
  void CleanUpStages(const OriginRequest& request, uint32_t attempt, v1::FinishReason finish);

  const OriginContext context_;
  RequestTable table_;  // the requests, in the states of request_state.h
  uint64_t next_order_ ABSL_GUARDED_BY(table_.mu) = 0;
  // Serializes sink calls so events of one request never interleave.
  absl::Mutex sink_mu_;
  LogRateLimiter warnings_{std::chrono::seconds(10)};  // what members send
  TaskQueue cleanup_;                                  // Cancel / DropSession calls to stages
  PromptPump pump_;                                    // the sender thread
  OriginRecovery recovery_;                            // the recovery and watchdog threads
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_ORIGIN_ORIGIN_H_
