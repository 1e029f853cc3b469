// The figures a node exports at /metrics and in its Topology reply.
#ifndef RINGLM_DAEMON_NODE_METRICS_H_
#define RINGLM_DAEMON_NODE_METRICS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "base/metrics.h"
#include "daemon/layer_fetcher.h"
#include "daemon/model_share.h"

namespace ringlm {

// One registry per node and the metrics the node's parts update. Created
// once; the pointers live as long as it. Thread-safe (the metrics are).
struct NodeMetrics {
  static absl::StatusOr<std::unique_ptr<NodeMetrics>> Create();

  MetricsRegistry registry;
  // Requests this node started, by how they ended.
  Counter* requests_stop = nullptr;
  Counter* requests_length = nullptr;
  Counter* requests_cancelled = nullptr;
  Counter* requests_error = nullptr;
  Counter* prompt_tokens = nullptr;
  Counter* generated_tokens = nullptr;
  // Prefix cache, at the origin: a hit reused a prefix, a miss was a claim
  // that some stage could not honour (the prompt was recomputed).
  Counter* cache_hits = nullptr;
  Counter* cache_misses = nullptr;
  Counter* cached_tokens = nullptr;
  // Recovery (docs/recovery.md): requests moved to a new plan after a stage
  // failed, the pause each one cost (failure found to the next token), and
  // the replayed positions, by whether a stage's KV still held them.
  Counter* recoveries = nullptr;
  Histogram* recovery_seconds = nullptr;
  Counter* replay_reused_tokens = nullptr;
  Counter* replay_recomputed_tokens = nullptr;
  Histogram* ttft_seconds = nullptr;
  Histogram* time_per_token_seconds = nullptr;
  // This node's forward pass over its layers, per batch, and the steps (of
  // different requests) each batch ran.
  Histogram* forward_seconds = nullptr;
  Histogram* batch_steps = nullptr;
  Histogram* batch_tokens = nullptr;
  // How long steps wait in the stage's queue before their batch runs.
  Histogram* queue_wait_seconds = nullptr;
  // How long the stage waited for its turn at the machine's cores.
  Histogram* turn_wait_seconds = nullptr;
  // Model distribution: what this node fetched, and what it served.
  LayerFetcherMetrics fetch;
  ModelShareMetrics share;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_NODE_METRICS_H_
