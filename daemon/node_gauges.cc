#include "daemon/node_gauges.h"

#include <optional>
#include <utility>

#include "base/status_macros.h"

namespace ringlm {

absl::Status RegisterNodeGauges(MetricsRegistry& r, const NodeGaugeSources& sources) {
  const DiscoveryService* discovery = sources.discovery;
  StageRuntime* stage = sources.stage;
  const PeerClient* client = sources.client;
  const CallSlots* generate_slots = sources.generate_slots;
  const OriginRegistry* origin = sources.origin;
  RINGLM_RETURN_IF_ERROR(
      r.AddCallbackGauge("ringlm_peers", "Other nodes in the peer table.", {},
                         [discovery] { return static_cast<double>(discovery->peers().size()); }));
  RINGLM_RETURN_IF_ERROR(
      r.AddCallbackGauge("ringlm_layers_held", "Layers this node runs.", {}, [stage] {
        std::optional<LayerRange> range = stage->range();
        return range ? range->size() : 0.0;
      }));
  RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
      "ringlm_kv_cache_bytes", "KV cache bytes held, each shared block once.", {},
      [stage] { return static_cast<double>(stage->sessions().Stats().used_bytes); }));
  RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
      "ringlm_kv_cache_logical_bytes", "KV cache bytes the sessions would hold without sharing.",
      {}, [stage] { return static_cast<double>(stage->sessions().Stats().logical_bytes); }));
  for (const auto& blocks : {std::pair{"used", &SessionStoreStats::blocks},
                             {"shared", &SessionStoreStats::shared_blocks}}) {
    RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
        "ringlm_kv_blocks", "KV blocks alive, and of them those more than one session holds.",
        {{"state", blocks.first}}, [stage, field = blocks.second] {
          return static_cast<double>(stage->sessions().Stats().*field);
        }));
  }
  RINGLM_RETURN_IF_ERROR(r.AddCallbackCounter(
      "ringlm_kv_blocks_evicted_total", "KV blocks freed by evicting idle sessions.", {},
      [stage] { return static_cast<double>(stage->sessions().Stats().evicted_blocks); }));
  RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
      "ringlm_kv_sessions", "KV cache sessions held.", {},
      [stage] { return static_cast<double>(stage->sessions().Stats().sessions.size()); }));
  RINGLM_RETURN_IF_ERROR(
      r.AddCallbackGauge("ringlm_stage_queue", "Steps waiting for this node's stage.", {},
                         [stage] { return static_cast<double>(stage->queued()); }));
  RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
      "ringlm_stage_queue_bytes", "Bytes of the steps waiting for this node's stage.", {},
      [stage] { return static_cast<double>(stage->queued_bytes()); }));
  RINGLM_RETURN_IF_ERROR(
      r.AddCallbackGauge("ringlm_grpc_channels", "Open channels to other nodes.", {},
                         [client] { return static_cast<double>(client->channels()); }));
  RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
      "ringlm_generate_calls", "Generate calls running on this node.", {},
      [generate_slots] { return static_cast<double>(generate_slots->in_use()); }));
  // Why announcements were dropped (monotonic counts since start).
  using C = DiscoveryCounters;
  const std::pair<const char*, uint64_t C::*> reasons[] = {
      {"malformed", &C::ignored_malformed},
      {"oversized", &C::ignored_oversized},
      {"bad_mac", &C::ignored_bad_mac},
      {"other_version", &C::ignored_other_version},
      {"stale", &C::ignored_stale},
      {"replayed", &C::ignored_replayed},
      {"reordered", &C::ignored_reordered},
      {"other_model", &C::ignored_other_model},
      {"duplicate_id", &C::ignored_duplicate_id},
      {"id_conflict", &C::ignored_id_conflict},
      {"table_full", &C::ignored_table_full}};
  for (const auto& [reason, field] : reasons) {
    RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
        "ringlm_discovery_ignored", "Announcements dropped since start, by reason.",
        {{"reason", reason}},
        [discovery, field = field] { return static_cast<double>(discovery->counters().*field); }));
  }
  return r.AddCallbackGauge("ringlm_requests_active", "Requests this node started and runs.", {},
                            [origin] { return static_cast<double>(origin->active()); });
}

}  // namespace ringlm
