// Calls to other nodes' RingNode services, each with a deadline.
#ifndef RINGLM_DAEMON_RPC_PEER_CLIENT_H_
#define RINGLM_DAEMON_RPC_PEER_CLIENT_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/call_metadata.h"
#include "proto/ringlm.grpc.pb.h"
#include "security/tls_credentials.h"

namespace ringlm {

// Deadlines of node-to-node calls, and the message size both ends accept.
struct RpcOptions {
  std::chrono::milliseconds health_timeout{1000};
  // StageStep: queueing only, but bodies of up to 8 MiB. A stage that hangs
  // holds up the sender this long (then the request recovers).
  std::chrono::milliseconds step_timeout{4000};
  std::chrono::milliseconds control_timeout{3000};  // DeliverToken, Cancel, stats, topology
  int max_message_bytes = 64 << 20;
  // FetchTensor: a call may take this long plus one second per
  // fetch_min_bytes_per_second of the bytes it asks for.
  std::chrono::milliseconds fetch_timeout{15000};
  uint64_t fetch_min_bytes_per_second = 4 << 20;
  // Sent with every call as kModelMetadata: a daemon that hosts several
  // models hands the call to this model's ring (RingServer). Empty = the
  // peer's first model.
  std::string model_key;
};

// The largest model-distribution message (a chunk, or a manifest) either end
// accepts; step messages keep their own, smaller bound.
inline constexpr int kMaxModelMessageBytes = 16 << 20;

// Maps a gRPC status onto absl's codes, keeping the message and naming the
// peer, so callers deal in absl::Status only.
absl::Status FromGrpc(const grpc::Status& status, const std::string& address);

// The metadata key that names the calling node in --insecure mode, where no
// certificate does (and the claim proves nothing).
inline constexpr char kClaimedNodeMetadata[] = "ringlm-node";

// Caches one channel per peer address, over mutual TLS with `identity` (or
// plaintext when it is nullopt: --insecure). Every call sets a deadline from
// RpcOptions. Channels to addresses no longer wanted are closed by Retain.
// Thread-safe.
class PeerClient {
 public:
  PeerClient(RpcOptions options, std::optional<TlsIdentity> identity, std::string self_id);

  // With `server_spki` set, it receives the SPKI fingerprint of the
  // certificate the server proved it holds (empty in insecure mode).
  absl::Status Health(const std::string& address, v1::HealthReply* reply,
                      std::string* server_spki = nullptr);
  absl::Status Topology(const std::string& address, v1::TopologyReply* reply);
  absl::Status StageStep(const std::string& address, const v1::StageStepRequest& request);
  absl::Status DeliverToken(const std::string& address, const v1::DeliverTokenRequest& request,
                            v1::DeliverTokenReply* reply);
  absl::Status Cancel(const std::string& address, const std::string& request_id);
  absl::Status Rollback(const std::string& address, const v1::RollbackRequest& request);
  absl::Status DropSession(const std::string& address, const std::string& session_id);
  // AdoptPrefixReply.adopted.
  absl::StatusOr<uint32_t> AdoptPrefix(const std::string& address,
                                       const v1::AdoptPrefixRequest& request);
  absl::Status GetModel(const std::string& address, const v1::GetModelRequest& request,
                        v1::GetModelReply* reply);
  // Streams the chunks of one FetchTensor call to `on_chunk`, which returns
  // false to stop early (then OK). The deadline allows for `expected_bytes`.
  absl::Status FetchTensor(const std::string& address, const v1::FetchTensorRequest& request,
                           uint64_t expected_bytes,
                           const std::function<bool(const v1::TensorChunk&)>& on_chunk);

  // Closes the channels to every address not in `keep`.
  void Retain(const std::set<std::string>& keep);
  // Ends the ring calls (StageStep, DeliverToken, Cancel, DropSession,
  // AdoptPrefix) now in flight to `address` with CANCELLED: the node left
  // the cluster, and a hung one must not hold its callers until their
  // deadlines.
  void CancelCallsTo(const std::string& address);
  size_t channels() const;

  const RpcOptions& options() const { return options_; }
  static constexpr size_t kMaxChannels = 1024;

 private:
  // Registers a ring call for CancelCallsTo while it runs.
  class InFlight;
  std::shared_ptr<v1::RingNode::Stub> Stub(const std::string& address);
  void Prepare(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) const;

  const RpcOptions options_;
  const std::optional<TlsIdentity> identity_;
  const std::string self_id_;
  mutable absl::Mutex mu_;
  // Shared, so a channel closed by Retain lives on until its last call ends.
  std::map<std::string, std::shared_ptr<v1::RingNode::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
  std::multimap<std::string, grpc::ClientContext*> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_RPC_PEER_CLIENT_H_
