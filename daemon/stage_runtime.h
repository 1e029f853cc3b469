// The stage side of the ring: queued steps run through this node's layers,
// then go to the next stage, or, on the last stage, get sampled.
#ifndef RINGLM_DAEMON_STAGE_RUNTIME_H_
#define RINGLM_DAEMON_STAGE_RUNTIME_H_

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/metrics.h"
#include "daemon/task_queue.h"
#include "daemon/transport.h"
#include "inference/model.h"
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
  Histogram* forward_seconds = nullptr;  // observes each step's forward pass; may be null
};

// Runs this node's share of every request's steps, in arrival order, on one
// worker thread (the kernels use the shared pool). Holds the weights of the
// node's current layer range and of the previous one, so a request that
// started before a re-partition can finish on its own plan.
//
// `model`, `pool` and `transport` must outlive it. Thread-safe.
class StageRuntime {
 public:
  StageRuntime(const Model& model, ThreadPool* pool, Transport* transport, std::string self_id,
               StageOptions options);
  ~StageRuntime();

  // The layers this node holds from now on; nullopt when it holds none.
  // Drops idle sessions of other ranges.
  absl::Status SetRange(std::optional<LayerRange> range);
  std::optional<LayerRange> range() const;

  // Checks a step from the network and queues it. InvalidArgument for a
  // malformed step (bad plan, wrong stage, shapes, token ids, version);
  // FailedPrecondition when this node does not hold the plan's layers;
  // ResourceExhausted when the queue is full.
  absl::Status Enqueue(v1::StageStepRequest request);
  // Forgets a request: its queued steps are skipped, its sampler dropped.
  void Cancel(const std::string& request_id);

  SessionStore& sessions() { return sessions_; }
  size_t queued() const { return queue_.pending(); }
  void Stop();

 private:
  struct Bundle {
    std::unique_ptr<StageWeights> weights;
    std::unique_ptr<StageEngine> engine;
  };
  struct SamplerState {
    std::unique_ptr<Sampler> sampler;
    std::chrono::steady_clock::time_point last_used;
  };

  std::shared_ptr<const Bundle> BundleFor(uint32_t first, uint32_t last) const;
  void Process(const v1::StageStepRequest& request);
  absl::Status Run(const v1::StageStepRequest& request);
  // The step's session, positioned for it. A claimed prefix (reuse_len > 0)
  // must be held exactly, by digest; otherwise a cache-miss error.
  absl::StatusOr<SessionStore::Lease> AcquireSession(const v1::StageStepRequest& request,
                                                     const Bundle& bundle);
  absl::Status Sample(const v1::StageStepRequest& request, const std::vector<float>& logits,
                      uint32_t n_positions);
  void ReportError(const v1::StageStepRequest& request, const absl::Status& status);
  bool IsCancelled(const std::string& request_id) const;
  void ForgetRequest(const std::string& request_id);

  const Model& model_;
  ThreadPool* const pool_;
  Transport* const transport_;
  const std::string self_id_;
  const StageOptions options_;
  SessionStore sessions_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const Bundle> current_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Bundle> previous_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::chrono::steady_clock::time_point> cancelled_ ABSL_GUARDED_BY(mu_);
  // Only the worker thread touches samplers.
  std::map<std::string, SamplerState> samplers_;
  TaskQueue queue_;  // last: stopped first
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_STAGE_RUNTIME_H_
