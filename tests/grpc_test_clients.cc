#include "tests/grpc_test_clients.h"

#include <grpcpp/grpcpp.h>

#include "discovery/node_identity.h"
#include "security/cluster_key.h"

namespace ringlm::testing {
namespace {

std::unique_ptr<v1::RingNode::Stub> TlsStub(const std::string& address,
                                            std::shared_ptr<grpc::ChannelCredentials> creds) {
  grpc::ChannelArguments args;
  AddChannelArgs(&args);
  args.SetMaxSendMessageSize(64 << 20);
  return v1::RingNode::NewStub(grpc::CreateCustomChannel(address, creds, args));
}

ClusterKey KeyOf(const LoopbackCluster& cluster) {
  absl::StatusOr<ClusterKey> key = ClusterKey::LoadFile(cluster.key_file());
  if (!key.ok()) std::abort();  // the cluster wrote it; a test bug otherwise
  return *std::move(key);
}

}  // namespace

std::string NodeIdOf(const LoopbackCluster& cluster, size_t i) {
  absl::StatusOr<std::string> id = LoadOrCreateNodeId(cluster.StateDir(i));
  return id.ok() ? *id : "";
}

std::unique_ptr<v1::RingNode::Stub> MemberStub(const LoopbackCluster& cluster, size_t as_node,
                                               const std::string& address) {
  absl::StatusOr<TlsIdentity> identity =
      MakeNodeIdentity(KeyOf(cluster), cluster.StateDir(as_node), NodeIdOf(cluster, as_node));
  if (!identity.ok()) std::abort();
  return TlsStub(address, ChannelCredentials(*identity));
}

ClientSecurity ClientSecurityFor(const LoopbackCluster& cluster) {
  ClientSecurity security;
  if (cluster.key_file().empty()) return security;
  absl::StatusOr<TlsIdentity> identity = MakeClientIdentity(KeyOf(cluster));
  if (!identity.ok()) std::abort();
  security.identity = *std::move(identity);
  return security;
}

std::unique_ptr<v1::RingNode::Stub> OutsiderStub(const LoopbackCluster& cluster, Outsider kind,
                                                 const std::string& address) {
  switch (kind) {
    case Outsider::kPlaintext: {
      grpc::ChannelArguments args;
      args.SetMaxSendMessageSize(64 << 20);
      return v1::RingNode::NewStub(
          grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
    }
    case Outsider::kNoCertificate: {
      // Knows the CA certificate (it is not secret) but holds no leaf.
      absl::StatusOr<TlsIdentity> member = MakeClientIdentity(KeyOf(cluster));
      if (!member.ok()) std::abort();
      grpc::SslCredentialsOptions options;
      options.pem_root_certs = member->ca_pem;
      return TlsStub(address, grpc::SslCredentials(options));
    }
    case Outsider::kWrongKey: {
      absl::StatusOr<ClusterKey> other = ClusterKey::Generate();
      if (!other.ok()) std::abort();
      absl::StatusOr<TlsIdentity> identity = MakeClientIdentity(*other);
      if (!identity.ok()) std::abort();
      return TlsStub(address, ChannelCredentials(*identity));
    }
  }
  return nullptr;
}

}  // namespace ringlm::testing
