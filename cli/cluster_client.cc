#include "cli/cluster_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "proto/call_metadata.h"

namespace ringlm {
namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& address) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("node ", address, ": ", s.error_message()));
}

}  // namespace

void AddClientSecurityFlags(ArgParser& p) {
  p.AddOption("cluster-key", "FILE", "the cluster key file (default: $RINGLM_CLUSTER_KEY_FILE)");
  p.AddFlag("insecure", "talk to an --insecure cluster (plaintext, no certificate)");
}

absl::StatusOr<ClientSecurity> ReadClientSecurity(const ArgParser& p) {
  ClientSecurity security;
  const std::string file = ClusterKeyFile(p.GetString("cluster-key"));
  if (p.GetFlag("insecure")) {
    if (!file.empty()) {
      return absl::InvalidArgumentError("--insecure and a cluster key exclude each other");
    }
    return security;
  }
  if (file.empty()) {
    return absl::FailedPreconditionError(
        "no cluster key: pass --cluster-key FILE (or set RINGLM_CLUSTER_KEY_FILE), or "
        "--insecure for an insecure cluster");
  }
  absl::StatusOr<ClusterKey> key = ClusterKey::LoadFile(file);
  if (!key.ok()) return key.status();
  absl::StatusOr<TlsIdentity> identity = MakeClientIdentity(*key);
  if (!identity.ok()) return identity.status();
  security.identity = *std::move(identity);
  return security;
}

ClusterClient::ClusterClient(const std::string& address, const ClientSecurity& security,
                             std::string model)
    : address_(address), model_(std::move(model)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (security.identity.has_value()) {
    credentials = ChannelCredentials(*security.identity);
    AddChannelArgs(&args);
  }
  stub_ = v1::RingNode::NewStub(grpc::CreateCustomChannel(address, credentials, args));
}

std::unique_ptr<grpc::ClientContext> ClusterClient::Context(
    std::chrono::milliseconds timeout) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  if (!model_.empty()) ctx->AddMetadata(kModelMetadata, model_);
  return ctx;
}

absl::StatusOr<v1::TopologyReply> ClusterClient::Topology(std::chrono::milliseconds timeout) {
  std::unique_ptr<grpc::ClientContext> ctx = Context(timeout);
  v1::TopologyRequest req;
  req.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  v1::TopologyReply reply;
  grpc::Status s = stub_->Topology(ctx.get(), req, &reply);
  if (!s.ok()) return FromGrpc(s, address_);
  return reply;
}

absl::Status ClusterClient::Generate(
    const v1::GenerateRequest& request, std::chrono::milliseconds timeout,
    const std::function<void(const v1::GenerateEvent&)>& on_event) {
  std::unique_ptr<grpc::ClientContext> ctx = Context(timeout);
  std::unique_ptr<grpc::ClientReader<v1::GenerateEvent>> reader =
      stub_->Generate(ctx.get(), request);
  v1::GenerateEvent event;
  absl::Status reported;
  while (reader->Read(&event)) {
    on_event(event);
    if (event.finish_reason() == v1::FINISH_REASON_ERROR) {
      reported = absl::Status(static_cast<absl::StatusCode>(event.error_code()), event.error());
    }
  }
  absl::Status s = FromGrpc(reader->Finish(), address_);
  return reported.ok() ? s : reported;
}

}  // namespace ringlm
