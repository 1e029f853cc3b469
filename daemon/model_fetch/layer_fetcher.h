// Fetches the tensors of the layer range a partition gives a node that has
// no full model file, before the node takes the range (docs/model-fetch.md).
#ifndef RINGLM_DAEMON_MODEL_FETCH_LAYER_FETCHER_H_
#define RINGLM_DAEMON_MODEL_FETCH_LAYER_FETCHER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/metrics.h"
#include "daemon/membership/cluster_view.h"
#include "daemon/rpc/peer_client.h"
#include "inference/stage_weights.h"
#include "model_store/model_cache.h"
#include "model_store/model_fetcher.h"

namespace ringlm {

struct LayerFetcherOptions {
  std::string fingerprint;
  // Disk the cache may use for tensors (bytes); 0 = no limit. Least
  // recently used tensors outside the new range are dropped to make room.
  uint64_t cache_budget_bytes = 0;
  // A failed fetch is tried again after this long.
  std::chrono::milliseconds retry_after{2000};
  FetchOptions fetch;  // its progress and cancelled are the LayerFetcher's own
};

// Metrics the fetcher updates (owned by the node's registry; null = none).
struct LayerFetcherMetrics {
  Counter* bytes = nullptr;
  Counter* tensors = nullptr;
  Counter* bad_chunks = nullptr;
  Counter* failed_calls = nullptr;
  Gauge* pending_bytes = nullptr;  // of the fetch in progress
};

// LayerFetcher
//
// Purpose: one thread that makes the cache hold the tensors of the latest
// requested range, from the members in that request's snapshot, then calls
// `on_fetched(snapshot)` (on its thread). A newer Request cancels the fetch in
// progress (tensors already committed stay). A failed fetch is retried until
// a newer request or Stop. Logs a progress line (MB, MB/s, ETA) about once a
// second.
// Ownership: borrows the cache and client, which must outlive it.
// Thread-safety: all methods are thread-safe; Stop (also the destructor)
// joins the thread.
class LayerFetcher {
 public:
  LayerFetcher(LayerFetcherOptions options, ModelCache* cache, PeerClient* client,
               LayerFetcherMetrics metrics,
               std::function<void(std::shared_ptr<const ClusterSnapshot>)> on_fetched);
  ~LayerFetcher();

  // Fetch `tensors` (indices into the cache's manifest), wanted for
  // `range` under `snapshot`.
  void Request(std::shared_ptr<const ClusterSnapshot> snapshot, LayerRange range,
               std::vector<size_t> tensors);
  // Forgets the pending request, stopping a fetch in progress.
  void Cancel();
  void Stop();

 private:
  struct Job {
    std::shared_ptr<const ClusterSnapshot> snapshot;
    LayerRange range;
    std::vector<size_t> tensors;
    uint64_t generation = 0;
  };
  void Loop();
  absl::Status Run(const Job& job);
  bool Superseded(uint64_t generation) const;
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || job_.has_value();
  }

  const LayerFetcherOptions options_;
  ModelCache* const cache_;
  PeerClient* const client_;
  const LayerFetcherMetrics metrics_;
  const std::function<void(std::shared_ptr<const ClusterSnapshot>)> on_fetched_;
  ModelFetcher fetcher_;

  mutable absl::Mutex mu_;
  std::optional<Job> job_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> running_generation_{0};  // of the job Run works on
  std::thread thread_;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_MODEL_FETCH_LAYER_FETCHER_H_
