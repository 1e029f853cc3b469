// The figures a node exports at /metrics and in its Topology reply.
#ifndef RINGLM_DAEMON_NODE_METRICS_H_
#define RINGLM_DAEMON_NODE_METRICS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "base/metrics.h"
#include "daemon/model_fetch/layer_fetcher.h"
#include "daemon/model_fetch/model_share.h"
#include "daemon/origin/origin_metrics.h"

namespace ringlm {

// One registry per node and the metrics the node's parts update. Created
// once; the pointers live as long as it. Thread-safe (the metrics are).
struct NodeMetrics {
  static absl::StatusOr<std::unique_ptr<NodeMetrics>> Create();

  MetricsRegistry registry;
  // The origin of requests (daemon/origin/origin_metrics.h).
  OriginMetrics origin;
  // This node's forward pass over its layers, per batch, and the steps (of
  // different requests) each batch ran.
  Histogram* forward_seconds = nullptr;
  Histogram* batch_steps = nullptr;
  Histogram* batch_tokens = nullptr;
  // How long steps wait in the stage's queue before their batch runs.
  Histogram* queue_wait_seconds = nullptr;
  // How long the stage waited for its turn at the machine's cores.
  Histogram* turn_wait_seconds = nullptr;
  // Speculative steps this node, as a last stage, sent ahead, and those voided.
  Counter* steps_ahead = nullptr;
  Counter* steps_voided = nullptr;
  // Model distribution: what this node fetched, and what it served.
  LayerFetcherMetrics fetch;
  ModelShareMetrics share;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_NODE_METRICS_H_
