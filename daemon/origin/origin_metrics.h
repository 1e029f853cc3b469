// The figures the origin of requests updates: how requests ended, their
// tokens, prefix-cache use, recoveries and latencies.
#ifndef RINGLM_DAEMON_ORIGIN_ORIGIN_METRICS_H_
#define RINGLM_DAEMON_ORIGIN_ORIGIN_METRICS_H_

#include "base/metrics.h"

namespace ringlm {

// Pointers into a MetricsRegistry that outlives the origin (the node's; see
// daemon/node_metrics.h). All set, or the struct is not handed out.
// Thread-safe (the metrics are).
struct OriginMetrics {
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
  // Speculative decoding (docs/speculation.md): drafts the last stages
  // checked and accepted for this node's requests, and each finished
  // request's share of its drafts accepted.
  Counter* drafted_tokens = nullptr;
  Counter* accepted_tokens = nullptr;
  Histogram* request_acceptance = nullptr;
  Histogram* ttft_seconds = nullptr;
  Histogram* time_per_token_seconds = nullptr;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_ORIGIN_ORIGIN_METRICS_H_
