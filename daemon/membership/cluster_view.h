// This node's view of the cluster: its peers, and the partition computed
// from them.
#ifndef RINGLM_DAEMON_MEMBERSHIP_CLUSTER_VIEW_H_
#define RINGLM_DAEMON_MEMBERSHIP_CLUSTER_VIEW_H_

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
#include "daemon/rpc/peer_client.h"
#include "discovery/discovery_service.h"
#include "partition/ring_partition.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

struct ClusterOptions {
  // host:port of peers to poll by Health calls, for networks without
  // broadcast. They join the peer table like announced peers.
  std::vector<std::string> static_peers;
  std::chrono::milliseconds health_interval{1000};
  // Wait for the peer set to hold still this long before re-partitioning.
  std::chrono::milliseconds repartition_debounce{500};
  // The first partition waits this long after start, so peers already out
  // there are heard first and the node does not page in the whole model.
  std::chrono::milliseconds first_partition_delay{1500};
};

// One computed partition and the peers it came from. Immutable and shared.
struct ClusterSnapshot {
  uint64_t epoch = 0;   // bumps with every recomputation on this node
  absl::Status status;  // why there is no plan (e.g. the model does not fit)
  Partition partition;  // empty unless status is OK
  // "id[first,last) ..." for comparing views between nodes; empty without a plan.
  std::string partition_key;
  std::vector<PeerInfo> peers;
  v1::Plan plan;  // `partition` as sent on the wire
  bool has_plan() const { return status.ok() && !partition.stages.empty(); }
};

// Polls peers' health, feeds static peers into the discovery peer table,
// removes peers whose health call fails (ending the ring calls in flight to
// them), and recomputes the partition when
// the peer set has held still for the debounce time. Every node with the
// same peer set computes the same partition (a pure function of it).
//
// Trust: an announced peer is only a claim. It becomes a member (used in
// partitions, dialled for requests) once a health call over mutual TLS to
// its announced address answered with its node id from a certificate whose
// SPKI fingerprint is the announced one (PeerTable::MarkVerified).
//
// Owns one thread (Start/Stop). `on_change` runs on that thread after each
// recomputation, before current() returns the new snapshot. Thread-safe.
class ClusterView {
 public:
  ClusterView(ClusterOptions options, NodeDescriptor self, ModelFootprint footprint,
              std::string model_fingerprint, DiscoveryService* discovery, PeerClient* client,
              std::function<void(std::shared_ptr<const ClusterSnapshot>)> on_change);
  ~ClusterView();

  void Start();
  void Stop();

  std::shared_ptr<const ClusterSnapshot> current() const;
  const NodeDescriptor& self() const { return self_; }
  // Where to reach `node_id`: this node, a proven member, or nullopt.
  std::optional<std::string> AddressOf(const std::string& node_id) const;
  // True for this node and for peers whose identity was proven.
  bool IsMember(const std::string& node_id) const;
  // A call to `node_id` failed: forget it until it announces again, and end
  // the calls still in flight to it.
  void ReportUnreachable(const std::string& node_id);
  // True when `node_id` was reported unreachable and is a member in
  // `snapshot` through a peer-table entry added after the last report: it
  // announced anew (a restart, or the same process back) and then proved
  // its identity by a health call, so a plan may use it again. False for a
  // node never reported, and for the entry that was there at the report.
  bool BackSinceReported(const ClusterSnapshot& snapshot, const std::string& node_id) const;
  // True when this node has a plan and every other node in it answered its
  // latest authenticated health call, within the last few health intervals,
  // with the very same partition: requests can go out safely.
  // This node, too, must have applied the current partition (MarkApplied).
  bool Converged() const;
  // This node now holds its share of the partition with this key: what its
  // health replies report, so no one serves a plan before every stage holds
  // its layers (a node fetching its layers applies later than it computes).
  void MarkApplied(const std::string& partition_key);
  std::string applied_partition() const;

 private:
  void Loop();
  void PollHealth();
  void Recompute();

  const ClusterOptions options_;
  const NodeDescriptor self_;
  const ModelFootprint footprint_;
  const std::string fingerprint_;
  DiscoveryService* const discovery_;
  PeerClient* const client_;
  const std::function<void(std::shared_ptr<const ClusterSnapshot>)> on_change_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const ClusterSnapshot> current_ ABSL_GUARDED_BY(mu_);
  // What each peer said its partition was at its last good health call, and when.
  struct PeerHealth {
    std::string partition;
    std::chrono::steady_clock::time_point at;
  };
  std::map<std::string, PeerHealth> peer_health_ ABSL_GUARDED_BY(mu_);
  std::string applied_ ABSL_GUARDED_BY(mu_);
  // ReportUnreachable's record per node id: the peer table's version() just
  // before it removed the node's entry. Bounded (kMaxReported).
  std::map<std::string, uint64_t> reported_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  LogRateLimiter warnings_{std::chrono::seconds(30)};  // per peer
  std::thread thread_;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_MEMBERSHIP_CLUSTER_VIEW_H_
