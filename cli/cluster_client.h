// The CLI's calls to a running ringlmd node.
#ifndef RINGLM_CLI_CLUSTER_CLIENT_H_
#define RINGLM_CLI_CLUSTER_CLIENT_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/arg_parser.h"
#include "proto/ringlm.grpc.pb.h"
#include "security/tls_credentials.h"

namespace ringlm {

// How the CLI proves itself to a cluster: a client certificate issued from
// the cluster key, or nothing (--insecure).
struct ClientSecurity {
  std::optional<TlsIdentity> identity;  // nullopt = plaintext
};

// Adds --cluster-key FILE and --insecure to a command that talks to nodes.
void AddClientSecurityFlags(ArgParser& parser);
// The key from --cluster-key or $RINGLM_CLUSTER_KEY_FILE, made into a client
// identity; plaintext with --insecure; FailedPrecondition with neither.
absl::StatusOr<ClientSecurity> ReadClientSecurity(const ArgParser& parser);

// A connection to one node, about one of the models it serves: `model` is
// a name the node serves it under or its fingerprint; empty = the node's
// first model. Every call has a deadline. Not thread-safe.
class ClusterClient {
 public:
  ClusterClient(const std::string& address, const ClientSecurity& security, std::string model = "");

  absl::StatusOr<v1::TopologyReply> Topology(std::chrono::milliseconds timeout);

  // Streams a Generate call; `on_event` sees every event in order. Returns
  // the error the call or the cluster reported.
  absl::Status Generate(const v1::GenerateRequest& request, std::chrono::milliseconds timeout,
                        const std::function<void(const v1::GenerateEvent&)>& on_event);

  const std::string& address() const { return address_; }

 private:
  // A context with the deadline and the model's metadata.
  std::unique_ptr<grpc::ClientContext> Context(std::chrono::milliseconds timeout) const;

  std::string address_;
  std::string model_;
  std::unique_ptr<v1::RingNode::Stub> stub_;
};

}  // namespace ringlm

#endif  // RINGLM_CLI_CLUSTER_CLIENT_H_
