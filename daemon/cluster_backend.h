// The cluster as the HTTP API sees it: a GenerationBackend over this node's
// origin registry and current plan.
#ifndef RINGLM_DAEMON_CLUSTER_BACKEND_H_
#define RINGLM_DAEMON_CLUSTER_BACKEND_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "api/generation_backend.h"
#include "daemon/membership/cluster_view.h"
#include "daemon/origin/origin.h"
#include "inference/model.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// What the backend uses of its node (Node::BackendParts). Pointers are
// borrowed and must outlive the backend; the functions must be thread-safe.
struct ClusterBackendParts {
  OriginRegistry* origin = nullptr;  // requests are submitted to it
  const Model* model = nullptr;      // tokenizer, name, chat template, context
  // The cluster as this node's view has it now.
  std::function<std::shared_ptr<const ClusterSnapshot>()> cluster;
  // OK when every member of the plan agrees on it now (no waiting), else
  // Unavailable with the reason.
  std::function<absl::Status()> serving;
  // This node, as the topology shows it.
  std::string node_id;
  std::function<std::string()> address;
  uint64_t usable_memory_bytes = 0;
  std::string security_mode;  // "mutual-tls" or "insecure"
  // The model's weight bytes of each layer (index = layer), as the partition
  // charges them; empty leaves the topology's memory used by layers null.
  std::vector<uint64_t> layer_bytes;
  // Live figures for the topology (all optional: unset, they show as null).
  // This node's /metrics text and state.
  std::function<std::string()> own_metrics;
  std::function<v1::NodeState()> own_state;
  // A peer's Topology reply (its state and /metrics text), by address. Must
  // give up within about a second: the page waits for it.
  std::function<absl::StatusOr<v1::TopologyReply>(const std::string& address)> peer_topology;
};

// RingFigures
//
// Purpose: the live figures of each node of a ring for the topology: its
// state, tokens its stage forwarded per second, and the mean forward time of
// its recent batches. A rate needs two samples, so it keeps each node's last
// counters (one entry per node asked for at the last refresh; a node that
// left is dropped). Refreshes at most once per `max_age`: callers within it
// get the cached figures, so pages polling together cost one round of calls.
// A refresh asks every peer at once and waits for the slowest answer, which
// the peer_topology hook bounds (about a second). Thread-safe; one refresh
// runs at a time, and concurrent callers wait for it.
class RingFigures {
 public:
  struct Member {
    std::string node_id;
    std::string address;
    bool self = false;
  };
  struct Figures {
    std::string state;  // ready, starting, idle, no-fit, fetching, unreachable, unknown
    std::string error;  // why unreachable
    // Mean ms of a forward pass over the batches since the last refresh, or
    // over all batches when none ran since; nullopt before the first batch.
    std::optional<double> forward_ms;
    // Tokens this stage forwarded (prompt and generated) per second since
    // the last refresh; nullopt at the first refresh.
    std::optional<double> tokens_per_s;
    // Tokens this node generated as a head per second since the last refresh.
    std::optional<double> generated_tokens_per_s;
  };

  RingFigures(const ClusterBackendParts* parts, std::chrono::milliseconds max_age);

  // The figures of `members`, by node id (each member has an entry).
  std::map<std::string, Figures> Get(const std::vector<Member>& members);

 private:
  // A node's counters at one refresh.
  struct Counters {
    std::chrono::steady_clock::time_point at;
    double forward_count = 0;
    double forward_seconds = 0;
    double stage_tokens = 0;
    double generated_tokens = 0;
  };
  // The figures of one node from its state and metrics text; updates its
  // counters.
  Figures Compute(const std::string& node_id, v1::NodeState state, const std::string& metrics,
                  std::chrono::steady_clock::time_point at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClusterBackendParts* const parts_;
  const std::chrono::milliseconds max_age_;
  absl::Mutex refresh_mu_;  // held across a refresh, so one runs at a time
  absl::Mutex mu_ ABSL_ACQUIRED_AFTER(refresh_mu_);
  std::optional<std::chrono::steady_clock::time_point> refreshed_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Counters> counters_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Figures> figures_ ABSL_GUARDED_BY(mu_);
};

// ClusterBackend
//
// Purpose: submits API requests as origin requests on the current plan
// (OriginRegistry::Prepare checks them, and awaits a serving plan, once for
// every frontend); reports readiness and the topology for /health and the
// web page (TopologyJson: the ring in stage order, each node's layers,
// memory and live figures). Thread-safe.
class ClusterBackend : public GenerationBackend {
 public:
  explicit ClusterBackend(ClusterBackendParts parts);

  absl::StatusOr<std::unique_ptr<GenerationHandle>> Submit(
      GenerationRequest request, std::function<void(const GenerationEvent&)> on_event) override;
  absl::Status Ready() const override;
  void DropSession(const std::string& session_id) override;
  const Tokenizer& tokenizer() const override;
  std::string model_id() const override;
  std::string chat_template() const override;
  uint32_t context_size() const override;
  // {model, security, n_layers, epoch, ready, error?, generated_tokens_per_s,
  //  nodes: [{node_id, address, self, ring_position (null: idle), idle,
  //           layers [first, last) or null, usable_memory_mb,
  //           memory_offered_bytes, memory_used_bytes (its layers' weights),
  //           state, error?, forward_ms, tokens_per_s}]}
  // with the nodes in ring order (the plan's stages, first stage first),
  // then the idle ones. Live figures are at most a second old; null where
  // unknown.
  std::string TopologyJson() const override;

 private:
  const ClusterBackendParts parts_;
  const std::unique_ptr<RingFigures> figures_;  // points into parts_
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_CLUSTER_BACKEND_H_
