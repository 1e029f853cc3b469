// The CLI's calls to a running ringlmd node.
#ifndef RINGLM_CLI_CLUSTER_CLIENT_H_
#define RINGLM_CLI_CLUSTER_CLIENT_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ringlm.grpc.pb.h"

namespace ringlm {

// A connection to one node. Every call has a deadline. Not thread-safe.
class ClusterClient {
 public:
  explicit ClusterClient(const std::string& address);

  absl::StatusOr<v1::TopologyReply> Topology(std::chrono::milliseconds timeout);

  // Streams a Generate call; `on_event` sees every event in order. Returns
  // the error the call or the cluster reported.
  absl::Status Generate(const v1::GenerateRequest& request, std::chrono::milliseconds timeout,
                        const std::function<void(const v1::GenerateEvent&)>& on_event);

  const std::string& address() const { return address_; }

 private:
  std::string address_;
  std::unique_ptr<v1::RingNode::Stub> stub_;
};

}  // namespace ringlm

#endif  // RINGLM_CLI_CLUSTER_CLIENT_H_
