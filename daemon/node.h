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
#include "daemon/cluster_view.h"
#include "daemon/metrics_server.h"
#include "daemon/node_metrics.h"
#include "daemon/origin.h"
#include "daemon/peer_client.h"
#include "daemon/stage_runtime.h"
#include "daemon/transport.h"
#include "discovery/discovery_service.h"
#include "inference/model.h"
#include "inference/ops/thread_pool.h"
#include "partition/capabilities.h"

namespace ringlm {

struct NodeOptions {
  std::string model_path;
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
  uint32_t context_size = 0;             // 0 = the model's
  SessionStoreOptions sessions;
  std::string state_dir;  // holds node_id; empty = the XDG default
  RpcOptions rpc;
  OriginOptions origin;
  bool measure_gflops = true;
  // GET /metrics; port 0 = any free port, nullopt = off.
  std::optional<uint16_t> metrics_port;
  std::string metrics_host = "0.0.0.0";
};

// Owns the model mapping, thread pool, discovery, cluster view, stage
// runtime, origin registry and gRPC server. Start once, Stop once (also run
// by the destructor). Thread-safe accessors.
class Node : public Transport {
 public:
  static absl::StatusOr<std::unique_ptr<Node>> Create(NodeOptions options);
  ~Node() override;

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
  v1::NodeState state() const;
  // OK when the cluster has a plan every stage agrees on; waits up to
  // `patience` for that (nodes settle within a health interval or two),
  // then Unavailable with the reason.
  absl::Status WaitUntilServing(std::chrono::milliseconds patience = std::chrono::seconds(5));
  NodeMetrics& metrics() { return *metrics_; }
  uint16_t metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }

  // Transport: calls to this node itself skip the network.
  absl::Status StageStep(const v1::PlanStage& to, const v1::StageStepRequest& request) override;
  absl::Status DeliverToken(const v1::PlanStage& origin, const v1::DeliverTokenRequest& request,
                            v1::DeliverTokenReply* reply) override;
  absl::Status Cancel(const v1::PlanStage& to, const std::string& request_id) override;
  absl::Status DropSession(const v1::PlanStage& to, const std::string& session_id) override;

 private:
  explicit Node(NodeOptions options);
  void OnPartition(std::shared_ptr<const ClusterSnapshot> snapshot);
  absl::Status RegisterGauges();
  // Where to call `stage`: this node's peer table first, then the plan.
  std::string Resolve(const v1::PlanStage& stage) const;

  NodeOptions options_;
  std::string node_id_;
  uint64_t instance_id_ = 0;
  DeviceCapabilities caps_;
  std::unique_ptr<NodeMetrics> metrics_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<PeerClient> client_;
  std::unique_ptr<DiscoveryService> discovery_;
  std::unique_ptr<StageRuntime> stage_;
  std::unique_ptr<OriginRegistry> origin_;
  std::unique_ptr<ClusterView> cluster_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_server_;
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
