// Calls to other nodes' RingNode services, each with a deadline.
#ifndef RINGLM_DAEMON_PEER_CLIENT_H_
#define RINGLM_DAEMON_PEER_CLIENT_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/ringlm.grpc.pb.h"

namespace ringlm {

// Deadlines of node-to-node calls, and the message size both ends accept.
struct RpcOptions {
  std::chrono::milliseconds health_timeout{1000};
  std::chrono::milliseconds step_timeout{10000};    // StageStep: queueing only, but large bodies
  std::chrono::milliseconds control_timeout{3000};  // DeliverToken, Cancel, stats, topology
  int max_message_bytes = 64 << 20;
};

// Maps a gRPC status onto absl's codes, keeping the message and naming the
// peer, so callers deal in absl::Status only.
absl::Status FromGrpc(const grpc::Status& status, const std::string& address);

// Caches one channel per peer address. Every call sets a deadline from
// RpcOptions. Thread-safe.
class PeerClient {
 public:
  explicit PeerClient(RpcOptions options);

  absl::Status Health(const std::string& address, v1::HealthReply* reply);
  absl::Status Topology(const std::string& address, v1::TopologyReply* reply);
  absl::Status StageStep(const std::string& address, const v1::StageStepRequest& request);
  absl::Status DeliverToken(const std::string& address, const v1::DeliverTokenRequest& request,
                            v1::DeliverTokenReply* reply);
  absl::Status Cancel(const std::string& address, const std::string& request_id);
  absl::Status DropSession(const std::string& address, const std::string& session_id);

  const RpcOptions& options() const { return options_; }

 private:
  v1::RingNode::Stub* Stub(const std::string& address);

  const RpcOptions options_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<v1::RingNode::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_PEER_CLIENT_H_
