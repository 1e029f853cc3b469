// The stage side of the ring: queued steps run through this node's layers,
// then go to the next stage, or, on the last stage, get sampled.
#ifndef RINGLM_DAEMON_STAGE_STAGE_RUNTIME_H_
#define RINGLM_DAEMON_STAGE_STAGE_RUNTIME_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/log_rate_limiter.h"
#include "base/metrics.h"
#include "daemon/rpc/caller.h"
#include "daemon/rpc/transport.h"
#include "daemon/stage/compute_lock.h"
#include "daemon/stage/last_stage_sampler.h"
#include "daemon/stage/request_parts.h"
#include "daemon/stage/ring_sender.h"
#include "daemon/stage/step_queue.h"
#include "daemon/stage/step_validator.h"
#include "inference/model.h"
#include "inference/sampling/output_constraint.h"
#include "inference/sampling/sampler.h"
#include "inference/session_store.h"
#include "inference/stage_engine.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

struct StageOptions {
  SessionStoreOptions sessions;
  // Requests cancelled here are remembered this long, so late steps of
  // theirs are dropped.
  std::chrono::seconds cancel_memory{120};
  Histogram* forward_seconds = nullptr;     // observes each batch's forward pass; may be null
  Histogram* batch_steps = nullptr;         // observes the steps of each batch; may be null
  Histogram* batch_tokens = nullptr;        // observes the tokens of each batch; may be null
  Histogram* queue_wait_seconds = nullptr;  // observes each step's wait; may be null
  // Bounds on the steps waiting for the worker, by count and by bytes.
  size_t max_queued_steps = 1024;
  uint64_t max_queued_bytes = uint64_t{256} << 20;
  // New positions per step at most (the origin's prompt chunk).
  uint32_t max_step_tokens = 512;
  // Requests remembered at most (their origin, whether cancelled).
  size_t max_requests = 65536;
  // Steps of different sessions that run as one forward pass, at most.
  BatchLimits batch;
  // Samplers (one per request this node samples) kept at most.
  size_t max_samplers = 4096;
  // Bytes of requests' parts (plan, sampling, constraint) kept at most, for
  // the steps that omit them (RequestPartsTable).
  uint64_t max_parts_bytes = uint64_t{64} << 20;
  // The turns at the cores this daemon takes with the others of its machine
  // (ComputeLock); null = none. Must outlive the runtime.
  ComputeLock* compute_lock = nullptr;
  // Guesses for the requests this node samples (speculative decoding),
  // instead of n-gram lookup; null = none. Only the worker thread uses it.
  // Must outlive the runtime.
  DraftModel* draft_model = nullptr;
  Histogram* turn_wait_seconds = nullptr;  // observes each wait for a turn; may be null
  // Steps in flight (docs/speculation.md), as the last stage: those it sent
  // ahead, and those a rejection voided. May be null.
  Counter* steps_ahead = nullptr;
  Counter* steps_voided = nullptr;
  // Before a batch, wait at most this long (and at most a tenth of the last
  // forward pass) for as many steps as the last batch had: the steps of one
  // upstream batch arrive one by one, and should run as one batch again.
  absl::Duration gather_wait = absl::Milliseconds(3);
  // With turns, when another daemon waits for one: before the turn passes,
  // wait at most this long for the batch's messages to reach their next
  // hops, so that the next stage on this machine finds them in its queue.
  absl::Duration handoff_wait = absl::Milliseconds(20);
};

// True when `node_id` is this node or a peer whose identity was proven.
using MembershipCheck = std::function<bool(const std::string& node_id)>;

// Runs this node's share of every request's steps on one worker thread (the
// kernels use the shared pool). Steps of different sessions that wait
// together run as one batched forward pass (StepQueue::PopBatch), each with
// exactly the bits of a solo run; a session's steps run in arrival order.
// With a ComputeLock, the worker runs a batch only in its turn at the
// machine's cores, and takes what queued while it waited.
// Holds the weights of the node's current layer range and of the previous
// one, so a request that started before a re-partition can finish on its own
// plan.
//
// Authorization (docs/security.md): a step is taken only when every node of
// its plan and its origin are members, and it comes from the previous stage
// of the plan or from the origin; a request id belongs to the first origin
// that used it. Sessions live in their origin's namespace, so no head can
// name, read or drop another head's sessions; a head can only adopt a
// prefix of one by presenting its tokens' digests (AdoptPrefix). A claimed
// prefix is checked by digest before anything is forked or truncated, and a
// miss says nothing about what the stage holds.
//
// `model`, `pool` and `transport` must outlive it. Thread-safe.
class StageRuntime : public LocalStage {
 public:
  StageRuntime(const Model& model, ThreadPool* pool, Transport* transport, std::string self_id,
               MembershipCheck is_member, StageOptions options);
  ~StageRuntime();

  // Called by SetRange once the new range is in place: the weights it now
  // runs (null for none) and those it ran before (null for none), loaded
  // once, for the caller to page in and hand back memory.
  using Handover = std::function<void(const StageWeights* taken, const StageWeights* left)>;
  // The layers this node holds from now on; nullopt when it holds none.
  // Drops idle sessions of other ranges; then runs `handover` (may be empty).
  absl::Status SetRange(std::optional<LayerRange> range, const Handover& handover = {});
  std::optional<LayerRange> range() const;

  // Checks a step from `caller` and queues it. A step that omits its
  // request's parts gets those kept from the request's first step here
  // (RequestPartsTable); one that carries them leaves them for the next.
  // InvalidArgument for a malformed step (ValidateStageStep);
  // PermissionDenied when the plan or origin names a non-member or the
  // caller may not send it; FailedPrecondition when this node does not hold
  // the plan's layers, or the step omits parts this node does not hold;
  // ResourceExhausted when the queue is full (by count or bytes).
  absl::Status Enqueue(v1::StageStepRequest request, const Caller& caller) override;
  // Forgets a request: its queued steps are skipped, its sampler dropped.
  // PermissionDenied unless `caller` is the request's origin.
  absl::Status Cancel(const std::string& request_id, const Caller& caller) override;
  // From the request's last stage: drops its steps of branches below
  // `request.branch` unrun, and truncates its session to
  // `request.positions` unless a step of that branch got here first (which
  // truncated it itself). PermissionDenied unless `caller` is the last stage
  // of the request's plan; InvalidArgument for a malformed request. A
  // request this node does not know needs nothing.
  absl::Status Rollback(const v1::RollbackRequest& request, const Caller& caller) override;
  // Drops `caller`'s session `session_id`; false when it holds none.
  absl::StatusOr<bool> DropSession(const std::string& session_id, const Caller& caller) override;
  // Drops every idle session of `caller`'s; returns how many.
  absl::StatusOr<size_t> DropAllSessions(const Caller& caller);
  // Forks into `caller`'s session `request.session_id` the longest claimed
  // prefix that an idle session of any head holds for this node's current
  // layers (SessionStore::ForkLongestHeld); returns its length, 0 for none.
  // InvalidArgument for a malformed request (ValidateAdoptPrefix),
  // PermissionDenied for a caller that is no node.
  absl::StatusOr<uint32_t> AdoptPrefix(const v1::AdoptPrefixRequest& request,
                                       const Caller& caller) override;

  SessionStore& sessions() { return sessions_; }
  size_t queued() const { return queue_.pending(); }
  uint64_t queued_bytes() const { return queue_.pending_bytes(); }
  void Stop();

 private:
  struct Bundle {
    std::unique_ptr<StageWeights> weights;
    std::unique_ptr<StageEngine> engine;
  };
  // What this node knows of a request id: whose it is, whether its origin
  // cancelled it, and its speculative branches (docs/speculation.md).
  struct RequestRecord {
    std::string origin;
    std::chrono::steady_clock::time_point last_seen;
    bool cancelled = false;
    uint64_t serial = 0;       // this node's label of it, as a KvCache writer
    std::string session_key;   // of its steps here
    std::string last_stage;    // its plan's last stage: who may roll it back
    uint32_t branch_seen = 0;  // the latest branch of its steps queued here
    uint32_t void_below = 0;   // steps of earlier branches are dropped
  };
  // A Rollback's truncation, for the worker to apply before its next batch.
  struct Truncation {
    std::string request_id;
    std::string session_key;
    uint64_t serial = 0;
    uint32_t branch = 0;
    uint32_t positions = 0;
  };

  struct Prepared;
  std::shared_ptr<const Bundle> BundleFor(uint32_t first, uint32_t last) const;
  void WorkerLoop();
  // Runs a batch: prepares each step (an error is reported to its origin and
  // the others go on), one forward pass over all, then each step's next hop.
  void RunBatch(const std::vector<v1::StageStepRequest>& batch);
  // The step's session (leased), position checked, input decoded.
  absl::StatusOr<Prepared> Prepare(const v1::StageStepRequest& request, const Bundle& bundle);
  static StageInput InputOf(const Prepared& p);
  // After the forward pass: to the next stage, or sample.
  absl::Status Continue(Prepared& p, const Bundle& bundle);
  // The step's session, positioned for it. A claimed prefix (reuse_len > 0)
  // must be held exactly, by digest; otherwise a cache-miss error.
  absl::StatusOr<SessionStore::Lease> AcquireSession(const v1::StageStepRequest& request,
                                                     const Bundle& bundle);
  // Samples the step's tokens from `logits` (LastStageSampler: the next
  // token, and the drafts that match), drops the rejected drafts from
  // `cache`, delivers the tokens to the origin and, unless the request ends,
  // sends the last of them, with the next drafts, to stage 0.
  absl::Status Sample(const v1::StageStepRequest& request, const std::vector<float>& logits,
                      KvCache& cache);
  // On the last stage, after a prompt chunk that samples nothing: tells the
  // origin how far the prompt has got (DeliverTokenRequest.prompt_positions).
  // That frees room for the origin's next chunks, and its no-progress
  // watchdog does not take a long prefill behind other requests for a stall.
  void ReportPromptProgress(const v1::StageStepRequest& request);
  // Which step of which request, for reports sent after the step is gone.
  struct StepRef {
    std::string request_id;
    std::string origin;
    uint32_t stage_index = 0;
  };
  static StepRef RefOf(const v1::StageStepRequest& request);
  // Tells the origin (off this thread) that the step failed, and forgets
  // the request here.
  void ReportError(const StepRef& step, const absl::Status& status);
  // Sends `step` to node `to` off the worker thread (RingSender), in order
  // per destination; a failure is reported for `from`, prefixed by `what`.
  void SendStep(const std::string& to, v1::StageStepRequest step, StepRef from, std::string what);
  // Delivers a token (or an error) to its origin in order, off the worker
  // thread. A failed delivery or a cancel in the reply forgets the request.
  void SendDelivery(const std::string& origin, v1::DeliverTokenRequest deliver);
  // Posts `send` to `to`'s lane `lane`, counted in sends_in_flight_ until
  // the task has run or was dropped. False when the lane refused it.
  bool PostCounted(const std::string& to, RingSender::Lane lane, std::function<void()> send,
                   uint64_t bytes);
  // Waits until every counted send has run, or `timeout`.
  void AwaitSendsDone(absl::Duration timeout);
  // The request is over here: its sampler goes before the next batch, and
  // its later steps are dropped. Any thread.
  void Forget(const std::string& request_id, const std::string& origin);
  absl::Status Authorize(const v1::StageStepRequest& request, const Caller& caller) const;
  // Records `request_id` as `origin`'s; PermissionDenied when another origin
  // holds it, ResourceExhausted when the table is full of live requests.
  absl::Status RecordRequestLocked(const std::string& request_id, const std::string& origin,
                                   bool cancel) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Cancelled, or of a branch a Rollback voided; on the last stage, of a
  // branch its sampler voided.
  bool IsDropped(const v1::StageStepRequest& request) const;
  // The request's label here (RequestRecord::serial); 0 when unknown.
  uint64_t SerialOf(const std::string& request_id) const;
  // Applies a Rollback's truncation unless another lease holds the
  // session (false: try again after the batch).
  bool TryTruncate(const Truncation& t);
  // Applies the Rollbacks' truncations that found their sessions busy
  // (worker thread, after a batch).
  void ApplyTruncations();
  // Sends the rollback to every stage of the request's plan but this one.
  void SendRollback(const v1::StageStepRequest& request, const LastStageSampler::Rollback& r);

  const Model& model_;
  ThreadPool* const pool_;
  Transport* const transport_;
  const std::string self_id_;
  const MembershipCheck is_member_;
  const StageOptions options_;
  const StepLimits limits_;
  SessionStore sessions_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const Bundle> current_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Bundle> previous_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, RequestRecord> requests_ ABSL_GUARDED_BY(mu_);
  RequestPartsTable parts_ ABSL_GUARDED_BY(mu_);
  // Cancelled requests whose samplers the worker drops before its next batch.
  std::vector<std::string> to_forget_ ABSL_GUARDED_BY(mu_);
  std::vector<Truncation> to_truncate_ ABSL_GUARDED_BY(mu_);
  // Held by the worker while it runs a batch, and by a rollback that
  // applies the queued truncations itself (it only tries): so a
  // truncation's moment with a session's lease never meets a step wanting
  // it, which would fail the step as "busy".
  absl::Mutex batch_mu_;
  uint64_t next_serial_ ABSL_GUARDED_BY(mu_) = 1;
  LastStageSampler sampler_;  // only the worker thread touches it
  // One warning line per kind per 10 s: a misbehaving peer cannot flood the log.
  LogRateLimiter warnings_{std::chrono::seconds(10)};
  bool Allow(std::string_view kind) { return warnings_.Allow(kind); }
  absl::Mutex sends_mu_;
  int sends_in_flight_ ABSL_GUARDED_BY(sends_mu_) = 0;
  RingSender sender_;
  StepQueue queue_;
  std::thread worker_;  // last: started once the rest exists
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_STAGE_STAGE_RUNTIME_H_
