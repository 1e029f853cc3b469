// The RingNode gRPC service of a node: thin handlers that establish who
// calls and what that caller may do (docs/security.md), hand the call to
// the part that serves it, and map absl::Status onto gRPC once (ToGrpc).
#ifndef RINGLM_DAEMON_NODE_SERVICE_H_
#define RINGLM_DAEMON_NODE_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/metrics.h"
#include "daemon/call_slots.h"
#include "daemon/membership/cluster_view.h"
#include "daemon/model_fetch/model_share.h"
#include "daemon/origin/origin.h"
#include "daemon/stage/stage_runtime.h"
#include "discovery/peer_table.h"
#include "inference/model.h"
#include "partition/capabilities.h"
#include "proto/ringlm.grpc.pb.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// What the RingNode service uses, and nothing more.
//
// Pointers are borrowed: each must be set and outlive the service and the
// gRPC server that runs it. Hooks must be set and thread-safe; they run on
// gRPC's threads from the moment the server starts.
//
// Until `ready()` is true, the service calls neither the stage, the origin
// nor the cluster hooks: Health answers without the partition, GetModel and
// FetchTensor serve the share, and every other method answers UNAVAILABLE
// to a caller it admits. A node binds its server before its cluster view
// exists (the view needs the bound port), hence hooks for the cluster.
struct NodeServiceParts {
  // This node, fixed from its creation.
  std::string node_id;
  uint64_t instance_id = 0;  // random per process start (HealthReply)
  DeviceCapabilities capabilities;
  // With a cluster key (secure), a caller is whoever its verified cluster
  // certificate names, and a caller without one is UNAUTHENTICATED; without
  // (insecure), a caller is whatever it claims (kClaimedNodeMetadata).
  bool secure = false;
  std::string security_mode;  // as Health reports it: "mutual-tls" or "insecure"
  std::string cluster_id;     // the cluster key's public label; empty when insecure
  // A Generate caller without a cluster certificate is admitted when it
  // sends "authorization: Bearer <api_key>"; empty = key holders only.
  std::string api_key;

  // The parts calls are handed to.
  const Model* model = nullptr;              // the model every node serves
  StageRuntime* stage = nullptr;             // StageStep, Cancel, DropSession, CacheStats
  OriginRegistry* origin = nullptr;          // Generate, DeliverToken
  ModelShare* share = nullptr;               // GetModel, FetchTensor
  ModelShareMetrics share_metrics;           // what FetchTensor counts
  const PeerTable* peers = nullptr;          // Topology lists its verified peers
  const MetricsRegistry* metrics = nullptr;  // rendered into Topology
  CallSlots* generate_slots = nullptr;       // a Generate call holds one throughout

  // The node's live state.
  std::function<bool()> ready;           // false while the node is starting
  std::function<v1::NodeState()> state;  // Health, Topology
  std::function<uint16_t()> grpc_port;   // the bound port (Health)
  std::function<std::string()> address;  // "host:port" others dial (Topology)
  // "host:port" of the HTTP API this node serves (Health, Topology); empty
  // when it serves none. A hook: the API starts after the service.
  std::function<std::string()> api_address;
  // Secure mode: true when `node_id` is this node with its own key, or a
  // proven peer whose pinned certificate key has this SPKI fingerprint
  // (PinnedMembers). The ring's methods admit such callers only.
  std::function<bool(const std::string& node_id, const std::string& spki)> is_pinned_member;

  // The cluster as this node's view has it (ClusterView); called only while
  // ready() is true.
  // Insecure mode: whether `node_id` is this node or a verified peer. The
  // ring's methods admit such callers only.
  std::function<bool(const std::string& node_id)> is_member;
  std::function<std::shared_ptr<const ClusterSnapshot>()> cluster;  // Topology
  std::function<std::string()> applied_partition;                   // Health
  // Every model this node's daemon serves, by first name (Topology); may be
  // unset (none listed).
  std::function<std::vector<std::string>()> served_models;
};

// The service over `parts` (see NodeServiceParts for what must hold). Every
// method first authenticates its caller and checks the protocol version;
// the rules per method are in node_service.cc. Thread-safe.
std::unique_ptr<v1::RingNode::CallbackService> MakeNodeService(NodeServiceParts parts);

}  // namespace ringlm

#endif  // RINGLM_DAEMON_NODE_SERVICE_H_
