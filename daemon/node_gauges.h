// The gauges a node exports that read its parts' live state at each render
// (/metrics and the Topology reply): peers, layers, KV cache, queue,
// channels, calls, dropped announcements, requests.
#ifndef RINGLM_DAEMON_NODE_GAUGES_H_
#define RINGLM_DAEMON_NODE_GAUGES_H_

#include "absl/status/status.h"
#include "base/metrics.h"
#include "daemon/call_slots.h"
#include "daemon/origin/origin.h"
#include "daemon/rpc/peer_client.h"
#include "daemon/stage/stage_runtime.h"
#include "discovery/discovery_service.h"

namespace ringlm {

// What the gauges read. Borrowed: each must be set and outlive the
// registry's last render (stop whatever renders it first).
struct NodeGaugeSources {
  const DiscoveryService* discovery = nullptr;  // peers, dropped announcements
  StageRuntime* stage = nullptr;                // layers, KV cache, queue
  const PeerClient* client = nullptr;           // open channels
  const CallSlots* generate_slots = nullptr;    // Generate calls running
  const OriginRegistry* origin = nullptr;       // requests running
};

// Registers the callback gauges (and ringlm_kv_blocks_evicted_total) over
// `sources` in `registry`, once per registry. The registry's errors
// (AlreadyExists when registered twice); some may be registered by then.
absl::Status RegisterNodeGauges(MetricsRegistry& registry, const NodeGaugeSources& sources);

}  // namespace ringlm

#endif  // RINGLM_DAEMON_NODE_GAUGES_H_
