// A ringlm node: one per machine. Serves the RingNode gRPC service, finds
// peers, holds its layer range, runs its stage of every request, and starts
// requests for clients that call Generate. This is the wiring of the parts
// that do those things (daemon/ and its subfolders).
#ifndef RINGLM_DAEMON_NODE_H_
#define RINGLM_DAEMON_NODE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/call_slots.h"
#include "daemon/cluster_backend.h"
#include "daemon/layer_range_keeper.h"
#include "daemon/membership/cluster_view.h"
#include "daemon/model_fetch/model_share.h"
#include "daemon/model_set.h"
#include "daemon/node_metrics.h"
#include "daemon/node_service.h"
#include "daemon/origin/origin.h"
#include "daemon/pinned_members.h"
#include "daemon/ring_server.h"
#include "daemon/rpc/peer_client.h"
#include "daemon/rpc/transport.h"
#include "daemon/stage/stage_runtime.h"
#include "discovery/discovery_service.h"
#include "inference/draft_model.h"
#include "inference/model.h"
#include "inference/ops/thread_pool.h"
#include "partition/capabilities.h"
#include "security/tls_credentials.h"

namespace ringlm {

struct NodeOptions {
  std::string model_path;
  // Names the API and `ringlm generate --model` know the model by, first
  // the one responses report; empty = the model file's base name. The
  // daemon's gRPC server routes calls by these and the fingerprint.
  std::vector<std::string> names;
  // The part of this machine's memory (MemAvailable or --memory-mb) this
  // model's layers may take: the daemon divides its memory among the models
  // it serves, and announces each model's part to its ring.
  MemoryPart memory_part;
  // A small model with the same vocabulary whose greedy guesses the last
  // stage checks in each step (speculative decoding); empty = n-gram
  // lookup. Loaded whole on this node, outside --memory-mb.
  std::string draft_model_path;
  // No model file: learn the model from the cluster's members and fetch this
  // node's layers from them, keeping them under the state dir
  // (docs/model-fetch.md). `model_path` must then be empty.
  bool model_from_peers = false;
  // With model_from_peers: the fingerprint of the model to fetch; empty = the
  // one model the members serve.
  std::string model_fingerprint;
  // Disk for fetched tensors; least recently used layers outside this node's
  // range are dropped past it. 0 = no limit.
  uint64_t model_cache_bytes = 0;
  // How long to wait at start for a member that serves the model.
  std::chrono::milliseconds model_wait{std::chrono::minutes(5)};
  // The cluster key file (docs/security.md). Required unless `insecure`.
  std::string cluster_key_file;
  // No TLS and no proof of identity: anyone on the network can join, read
  // prompts and disturb requests. For benchmarks and isolated labs only.
  bool insecure = false;
  // A client without a cluster certificate may call Generate with
  // "authorization: Bearer <api_key>"; empty = only key holders.
  std::string api_key;
  // Generate calls running at once at most; more get RESOURCE_EXHAUSTED.
  int max_generate_calls = 64;
  std::string grpc_host = "0.0.0.0";  // address the gRPC server binds
  // Host others should use for this node; empty = the first non-loopback
  // IPv4 address when bound to 0.0.0.0, else grpc_host.
  std::string advertise_host;
  bool discovery_enabled = true;
  DiscoveryOptions discovery;
  ClusterOptions cluster;
  std::optional<uint64_t> memory_bytes;  // --memory-mb: overrides MemAvailable
  int threads = 0;                       // 0 = physical cores
  // Whether this daemon takes turns at the cores with the other daemons of
  // its machine (ComputeLock): kAuto = when `threads` spans every core.
  enum class ComputeTurns { kAuto, kOn, kOff };
  ComputeTurns compute_turns = ComputeTurns::kAuto;
  std::string compute_lock_file;  // empty = ComputeLock::DefaultPath()
  uint32_t context_size = 0;      // 0 = the model's
  SessionStoreOptions sessions;
  std::string state_dir;  // holds node_id; empty = the XDG default
  RpcOptions rpc;
  OriginOptions origin;
  // Measure compute and read bandwidth at start (partition/device_probe.h).
  bool measure_speed = true;
  // --placement: what this node asks the partition for (capabilities.h).
  Placement placement = Placement::kSpeed;
};

// Node
//
// Purpose: this machine's member of one model's ring; a daemon serving
// several models runs one Node per model, each with its own plan, behind
// one gRPC server (RingServer). Create makes the parts (the model mapping
// and what serves it to members, the thread pool, the peer client,
// discovery); Start makes the rest (stage runtime, origin registry, layer
// range keeper, gRPC service, cluster view, gauges), hands each part
// exactly what it uses, registers the service with the server, and starts
// them; Stop stops them. Nothing reaches through it: its owner (ModelHost)
// gets the metrics registry, the parts the HTTP API's backend uses, and
// what the server and the memory division need, nothing else.
// Security: the service admits callers as docs/security.md says (the
// server refuses a caller without a certificate at its headers, all but
// Generate with the API key); announcements are authenticated, and the
// transport dials proven members only (docs/security.md, "Listening ports").
// Ownership: owns every part; the server is borrowed and must outlive Stop.
// Thread-safety: Start once, then Stop once (also run by the destructor);
// the accessors are thread-safe after Start.
class Node {
 public:
  static absl::StatusOr<std::unique_ptr<Node>> Create(NodeOptions options);
  ~Node();

  // Registers this model's service with `server`, then starts discovery
  // and the cluster view.
  absl::Status Start(RingServer* server);
  void Stop();
  // For removing the model: refuses new requests from now on, and waits up
  // to `patience` for the ones this node started to end; returns how many
  // still run (Stop then ends them with an error).
  size_t Drain(std::chrono::milliseconds patience);
  // After Stop: gives back the stage's weights and KV cache, and the model
  // file's resident pages. The object stays valid (calls still in flight
  // find a stopped node).
  void ReleaseMemory();

  // What the daemon's gRPC server needs from each model it hosts: the
  // cluster identity (nullopt = insecure), and the largest step message of
  // this model.
  const std::optional<TlsIdentity>& identity() const { return identity_; }
  int max_message_bytes() const { return options_.rpc.max_message_bytes; }
  // This machine's memory (MemAvailable at start, or --memory-mb), and the
  // part of it this model's layers may take.
  uint64_t machine_memory_bytes() const { return machine_memory_bytes_; }
  uint64_t memory_bytes() const { return caps_.usable_memory_bytes; }
  // The names the model is served under (NodeOptions.names, or its file's
  // base name), first the one responses report.
  const std::vector<std::string>& names() const { return options_.names; }

  // The registry of this model's metrics, for the daemon's /metrics. Lives
  // as long as the node.
  const MetricsRegistry& metrics_registry() const { return metrics_->registry; }
  // The host other nodes dial this one at (after Start).
  const std::string& advertise_host() const { return advertise_host_; }

  // What the HTTP API's backend uses of this node; valid after Start, for
  // as long as the node lives.
  ClusterBackendParts BackendParts();

  // Marks this node a head whose HTTP API listens on `host`:`port`: Health
  // and Topology report it, a wildcard host (0.0.0.0, ::) as the host other
  // nodes dial. Call after Start, once the API listens. Thread-safe.
  void SetApiAddress(const std::string& host, uint16_t port);

 private:
  // OK when the cluster has a plan every stage agrees on; waits up to
  // `patience` for that (nodes settle within a health interval or two),
  // then Unavailable with the reason (also while the node is starting).
  absl::Status WaitUntilServing(std::chrono::milliseconds patience = std::chrono::seconds(5));

  explicit Node(NodeOptions options);
  // "host:port" that other nodes dial.
  std::string address() const;
  // "mutual-tls" with a cluster key, else "insecure".
  std::string security_mode() const { return identity_ ? "mutual-tls" : "insecure"; }
  // Opens the model (from the file, or from the members with
  // model_from_peers) and what serves it to members that fetch it.
  absl::Status OpenModel(const std::string& state_dir);
  // The stage runtime, origin registry and layer range keeper, and the
  // transport between them and the other nodes.
  void MakeRing();
  // Registers the service over this node's parts with `server`.
  absl::Status Register(RingServer* server);
  NodeServiceParts ServiceParts();

  NodeOptions options_;
  std::string node_id_;
  uint64_t instance_id_ = 0;
  std::optional<TlsIdentity> identity_;  // nullopt = insecure
  std::string cluster_id_;
  std::string announce_mac_key_;
  DeviceCapabilities caps_;  // usable_memory_bytes: this model's part
  uint64_t machine_memory_bytes_ = 0;
  std::vector<uint64_t> layer_bytes_;  // each layer's weights (set by Start)
  std::unique_ptr<NodeMetrics> metrics_;
  std::shared_ptr<ModelCache> model_cache_;  // with model_from_peers only
  std::unique_ptr<Model> model_;
  std::unique_ptr<ModelShare> share_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<DraftModel> draft_model_;    // null: none
  std::unique_ptr<ComputeLock> compute_lock_;  // null: no turns
  std::unique_ptr<PeerClient> client_;
  std::unique_ptr<DiscoveryService> discovery_;
  std::unique_ptr<PinnedMembers> pinned_members_;
  std::unique_ptr<CallSlots> generate_slots_;
  std::unique_ptr<MemberTransport> transport_;
  std::unique_ptr<StageRuntime> stage_;
  std::unique_ptr<OriginRegistry> origin_;
  std::unique_ptr<LayerRangeKeeper> range_keeper_;
  std::unique_ptr<ClusterView> cluster_;
  std::unique_ptr<v1::RingNode::CallbackService> service_;
  RingServer* server_ = nullptr;  // set by Start
  // Written once by Start before ready_ (the port as soon as it is bound:
  // Health reads it before then).
  std::atomic<uint16_t> grpc_port_{0};
  std::string advertise_host_;
  std::atomic<bool> ready_{false};  // every part is wired (handlers check it)
  absl::Mutex api_mu_;
  std::string api_address_ ABSL_GUARDED_BY(api_mu_);  // empty: not a head
  std::atomic<bool> stopped_{false};
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_NODE_H_
