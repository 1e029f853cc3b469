#include "daemon/node_metrics.h"

#include "base/status_macros.h"

namespace ringlm {

absl::StatusOr<std::unique_ptr<NodeMetrics>> NodeMetrics::Create() {
  auto m = std::make_unique<NodeMetrics>();
  MetricsRegistry& r = m->registry;
  constexpr char kRequests[] = "ringlm_requests_total";
  constexpr char kRequestsHelp[] = "Requests this node started, by how they ended.";
  RINGLM_ASSIGN_OR_RETURN(m->origin.requests_stop,
                          r.AddCounter(kRequests, kRequestsHelp, {{"finish", "stop"}}));
  RINGLM_ASSIGN_OR_RETURN(m->origin.requests_length,
                          r.AddCounter(kRequests, kRequestsHelp, {{"finish", "length"}}));
  RINGLM_ASSIGN_OR_RETURN(m->origin.requests_cancelled,
                          r.AddCounter(kRequests, kRequestsHelp, {{"finish", "cancelled"}}));
  RINGLM_ASSIGN_OR_RETURN(m->origin.requests_error,
                          r.AddCounter(kRequests, kRequestsHelp, {{"finish", "error"}}));
  RINGLM_ASSIGN_OR_RETURN(m->origin.prompt_tokens,
                          r.AddCounter("ringlm_prompt_tokens_total", "Prompt tokens received."));
  RINGLM_ASSIGN_OR_RETURN(m->origin.generated_tokens,
                          r.AddCounter("ringlm_generated_tokens_total", "Tokens generated."));
  RINGLM_ASSIGN_OR_RETURN(
      m->origin.cache_hits,
      r.AddCounter("ringlm_prefix_cache_hits_total", "Requests that reused a cached prefix."));
  RINGLM_ASSIGN_OR_RETURN(
      m->origin.cache_misses,
      r.AddCounter("ringlm_prefix_cache_misses_total",
                   "Claimed prefixes a stage could not honour (the prompt was recomputed)."));
  RINGLM_ASSIGN_OR_RETURN(
      m->origin.cached_tokens,
      r.AddCounter("ringlm_prefix_cache_tokens_total", "Prompt tokens taken from the cache."));
  RINGLM_RETURN_IF_ERROR(
      r.AddCallbackGauge("ringlm_prefix_cache_hit_ratio",
                         "Share of the prompt tokens received that were taken from the cache.", {},
                         [prompt = m->origin.prompt_tokens, cached = m->origin.cached_tokens] {
                           const double all = static_cast<double>(prompt->Value());
                           return all > 0 ? static_cast<double>(cached->Value()) / all : 0.0;
                         }));
  RINGLM_ASSIGN_OR_RETURN(
      m->origin.recoveries,
      r.AddCounter("ringlm_request_recoveries_total",
                   "Times a request this node started moved to a new plan after a stage failed."));
  RINGLM_ASSIGN_OR_RETURN(
      m->origin.recovery_seconds,
      r.AddHistogram("ringlm_recovery_seconds",
                     "From a stage failure found to the recovered request's next token.",
                     ExponentialBuckets(0.01, 2, 14)));
  constexpr char kReplay[] = "ringlm_replay_tokens_total";
  constexpr char kReplayHelp[] =
      "Positions recovered requests replayed, by where their KV came from.";
  RINGLM_ASSIGN_OR_RETURN(m->origin.replay_reused_tokens,
                          r.AddCounter(kReplay, kReplayHelp, {{"kv", "reused"}}));
  RINGLM_ASSIGN_OR_RETURN(m->origin.replay_recomputed_tokens,
                          r.AddCounter(kReplay, kReplayHelp, {{"kv", "recomputed"}}));
  RINGLM_ASSIGN_OR_RETURN(
      m->origin.drafted_tokens,
      r.AddCounter("ringlm_speculation_drafted_tokens_total",
                   "Draft tokens the last stage checked for this node's requests."));
  RINGLM_ASSIGN_OR_RETURN(
      m->origin.accepted_tokens,
      r.AddCounter("ringlm_speculation_accepted_tokens_total",
                   "Draft tokens that matched what the last stage sampled (each saved a trip)."));
  RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
      "ringlm_speculation_acceptance_ratio", "Share of the draft tokens checked that matched.", {},
      [drafted = m->origin.drafted_tokens, accepted = m->origin.accepted_tokens] {
        const double all = static_cast<double>(drafted->Value());
        return all > 0 ? static_cast<double>(accepted->Value()) / all : 0.0;
      }));
  RINGLM_ASSIGN_OR_RETURN(
      m->steps_ahead,
      r.AddCounter("ringlm_speculation_steps_ahead_total",
                   "Steps this node, as a last stage, sent before the ones ahead of them were "
                   "verified (steps in flight)."));
  RINGLM_ASSIGN_OR_RETURN(
      m->steps_voided,
      r.AddCounter("ringlm_speculation_voided_steps_total",
                   "Steps in flight that a rejection voided; every stage drops them."));
  RINGLM_ASSIGN_OR_RETURN(
      m->origin.request_acceptance,
      r.AddHistogram("ringlm_speculation_request_acceptance",
                     "Per finished request that drafted: the share of its drafts accepted.",
                     {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0}));
  RINGLM_ASSIGN_OR_RETURN(
      m->origin.ttft_seconds,
      r.AddHistogram("ringlm_time_to_first_token_seconds", "Time to the first token.",
                     ExponentialBuckets(0.005, 2, 14)));
  RINGLM_ASSIGN_OR_RETURN(
      m->origin.time_per_token_seconds,
      r.AddHistogram("ringlm_time_per_token_seconds", "Decode time per token after the first.",
                     ExponentialBuckets(0.0005, 2, 14)));
  RINGLM_ASSIGN_OR_RETURN(m->forward_seconds, r.AddHistogram("ringlm_stage_forward_seconds",
                                                             "This node's forward pass per batch.",
                                                             ExponentialBuckets(0.0001, 2, 18)));
  RINGLM_ASSIGN_OR_RETURN(m->batch_steps,
                          r.AddHistogram("ringlm_stage_batch_steps",
                                         "Steps (of different requests) per batched forward pass.",
                                         ExponentialBuckets(1, 2, 8)));
  RINGLM_ASSIGN_OR_RETURN(m->batch_tokens,
                          r.AddHistogram("ringlm_stage_batch_tokens",
                                         "Tokens per batched forward pass (decode steps count 1).",
                                         ExponentialBuckets(1, 2, 12)));
  RINGLM_ASSIGN_OR_RETURN(
      m->queue_wait_seconds,
      r.AddHistogram("ringlm_stage_queue_wait_seconds",
                     "How long a step waited in the stage's queue before its batch ran.",
                     ExponentialBuckets(0.0001, 2, 18)));
  RINGLM_ASSIGN_OR_RETURN(
      m->turn_wait_seconds,
      r.AddHistogram("ringlm_stage_turn_wait_seconds",
                     "How long the stage waited for its turn at the cores it shares with the "
                     "other daemons of its machine (--compute-turns).",
                     ExponentialBuckets(0.0001, 2, 18)));
  RINGLM_ASSIGN_OR_RETURN(m->fetch.bytes,
                          r.AddCounter("ringlm_model_fetch_bytes_total",
                                       "Verified tensor bytes fetched from members."));
  RINGLM_ASSIGN_OR_RETURN(m->fetch.tensors, r.AddCounter("ringlm_model_fetch_tensors_total",
                                                         "Tensors fetched and committed."));
  RINGLM_ASSIGN_OR_RETURN(
      m->fetch.bad_chunks,
      r.AddCounter("ringlm_model_fetch_bad_chunks_total",
                   "Fetched chunks that failed verification (their source is avoided)."));
  RINGLM_ASSIGN_OR_RETURN(m->fetch.failed_calls,
                          r.AddCounter("ringlm_model_fetch_failed_calls_total",
                                       "Fetch calls to members that failed in transport."));
  RINGLM_ASSIGN_OR_RETURN(m->fetch.pending_bytes,
                          r.AddGauge("ringlm_model_fetch_pending_bytes",
                                     "Bytes the fetch in progress must still bring in."));
  RINGLM_ASSIGN_OR_RETURN(m->share.served_bytes,
                          r.AddCounter("ringlm_model_served_bytes_total",
                                       "Tensor bytes this node sent to members that fetch."));
  RINGLM_ASSIGN_OR_RETURN(
      m->share.refused_streams,
      r.AddCounter("ringlm_model_served_refused_total",
                   "Fetches refused because this node served as many as it allows."));
  return m;
}

}  // namespace ringlm
