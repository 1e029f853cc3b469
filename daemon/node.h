// A ringlm node: one per machine. Serves the RingNode gRPC service, finds
// peers, holds its layer range, runs its stage of every request, and starts
// requests for clients that call Generate.
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
#include "daemon/membership/cluster_view.h"
#include "daemon/metrics_server.h"
#include "daemon/model_fetch/layer_fetcher.h"
#include "daemon/model_fetch/model_bootstrap.h"
#include "daemon/model_fetch/model_share.h"
#include "daemon/node_metrics.h"
#include "daemon/origin/origin.h"
#include "daemon/rpc/peer_client.h"
#include "daemon/rpc/transport.h"
#include "daemon/stage/stage_runtime.h"
#include "discovery/discovery_service.h"
#include "inference/model.h"
#include "inference/ops/thread_pool.h"
#include "partition/capabilities.h"
#include "security/tls_credentials.h"

namespace ringlm {

struct NodeOptions {
  std::string model_path;
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
  uint16_t grpc_port = 47801;         // 0 = any free port
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
  bool measure_gflops = true;
  // GET /metrics; port 0 = any free port, nullopt = off.
  std::optional<uint16_t> metrics_port;
  std::string metrics_host = "0.0.0.0";
  // The port was derived (gRPC port + 1000), not asked for: when something
  // else holds it, /metrics moves to a free port (with a warning) instead of
  // the node failing to start.
  bool metrics_port_is_default = false;
};

// Owns the model mapping, thread pool, discovery, cluster view, stage
// runtime, origin registry and gRPC server. Start once, Stop once (also run
// by the destructor). Thread-safe accessors. With a cluster key, the gRPC
// server speaks mutual TLS only, announcements are authenticated, and the
// transport dials proven members only (docs/security.md).
class Node {
 public:
  static absl::StatusOr<std::unique_ptr<Node>> Create(NodeOptions options);
  ~Node();

  // Binds the gRPC server, then starts discovery and the cluster view.
  absl::Status Start();
  void Stop();
  // False until Start has wired everything; handlers answer UNAVAILABLE.
  bool ready() const { return ready_.load(); }

  const std::string& node_id() const { return node_id_; }
  uint16_t grpc_port() const { return grpc_port_; }
  std::string address() const;
  const Model& model() const { return *model_; }
  const DeviceCapabilities& capabilities() const { return caps_; }
  const NodeOptions& options() const { return options_; }
  uint64_t instance_id() const { return instance_id_; }
  ClusterView& cluster() { return *cluster_; }
  StageRuntime& stage() { return *stage_; }
  OriginRegistry& origin() { return *origin_; }
  DiscoveryService& discovery() { return *discovery_; }
  PeerClient& peers() { return *client_; }
  // What this node serves to members that fetch the model.
  ModelShare& share() { return *share_; }
  v1::NodeState state() const;
  // OK when the cluster has a plan every stage agrees on; waits up to
  // `patience` for that (nodes settle within a health interval or two),
  // then Unavailable with the reason.
  absl::Status WaitUntilServing(std::chrono::milliseconds patience = std::chrono::seconds(5));
  NodeMetrics& metrics() { return *metrics_; }
  uint16_t metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }

  // Security: whether the node runs with a cluster key, as "mutual-tls" or
  // "insecure", and the key's public label (empty when insecure).
  bool secure() const { return identity_.has_value(); }
  std::string security_mode() const { return secure() ? "mutual-tls" : "insecure"; }
  const std::string& cluster_id() const { return cluster_id_; }
  const std::string& api_key() const { return options_.api_key; }
  // True when `node_id` is this node with its own key, or a proven peer
  // whose pinned certificate key has this SPKI fingerprint.
  bool IsPinnedMember(const std::string& node_id, const std::string& spki) const;
  // A slot for one Generate call; false when all are taken.
  bool BeginGenerateCall();
  void EndGenerateCall();

 private:
  explicit Node(NodeOptions options);
  // Finds the cluster's model and opens the partial copy (model_from_peers).
  absl::StatusOr<BootstrappedModel> Bootstrap(const std::string& state_dir);
  void OnPartition(std::shared_ptr<const ClusterSnapshot> snapshot);
  // Takes this node's layers of `snapshot` (all tensors present), unless a
  // newer partition came meanwhile.
  void TakeRange(const std::shared_ptr<const ClusterSnapshot>& snapshot);
  // Indices into the model's tensor table of the tensors `weights` reads.
  std::vector<size_t> TensorIndices(const StageWeights& weights) const;
  // Tensors of `range` the partial copy does not hold yet.
  std::vector<size_t> MissingTensors(LayerRange range) const;
  absl::Status RegisterGauges();
  // For recovering requests: the next plan every node agrees on that names
  // none of `avoid` (OriginClusterHooks::await_plan).
  absl::StatusOr<v1::Plan> AwaitPlan(const std::vector<std::string>& avoid,
                                     std::chrono::steady_clock::time_point deadline) const;

  NodeOptions options_;
  std::string node_id_;
  uint64_t instance_id_ = 0;
  DeviceCapabilities caps_;
  std::unique_ptr<NodeMetrics> metrics_;
  std::shared_ptr<ModelCache> model_cache_;  // with model_from_peers only
  std::unique_ptr<Model> model_;
  std::unique_ptr<ModelShare> share_;
  std::unique_ptr<LayerFetcher> fetcher_;  // with model_from_peers only
  // Serialises taking a layer range (cluster thread, fetcher thread).
  absl::Mutex range_mu_;
  uint64_t latest_epoch_ ABSL_GUARDED_BY(range_mu_) = 0;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<ComputeLock> compute_lock_;  // null: no turns
  std::unique_ptr<PeerClient> client_;
  std::unique_ptr<DiscoveryService> discovery_;
  std::unique_ptr<MemberTransport> transport_;
  std::unique_ptr<StageRuntime> stage_;
  std::unique_ptr<OriginRegistry> origin_;
  std::unique_ptr<ClusterView> cluster_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_server_;
  std::optional<TlsIdentity> identity_;  // nullopt = insecure
  std::string cluster_id_;
  std::string announce_mac_key_;
  std::atomic<int> generate_calls_{0};
  uint16_t grpc_port_ = 0;
  std::string advertise_host_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<v1::NodeState> state_{v1::NODE_STATE_STARTING};
};

// The gRPC service of a node (node_service.cc).
std::unique_ptr<grpc::Service> MakeNodeService(Node& node);

}  // namespace ringlm

#endif  // RINGLM_DAEMON_NODE_H_
