#include "daemon/peer_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

namespace ringlm {
namespace {

constexpr uint32_t kVersion = v1::PROTOCOL_VERSION_CURRENT;

void SetDeadline(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
}

}  // namespace

absl::Status FromGrpc(const grpc::Status& status, const std::string& address) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat("node ", address, ": ", status.error_message()));
}

PeerClient::PeerClient(RpcOptions options) : options_(options) {}

v1::RingNode::Stub* PeerClient::Stub(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& stub = stubs_[address];
  if (stub == nullptr) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(options_.max_message_bytes);
    args.SetMaxSendMessageSize(options_.max_message_bytes);
    // Fail fast on a dead peer instead of backing off for a long time.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    stub = v1::RingNode::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }
  return stub.get();
}

absl::Status PeerClient::Health(const std::string& address, v1::HealthReply* reply) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, options_.health_timeout);
  v1::HealthRequest req;
  req.set_protocol_version(kVersion);
  return FromGrpc(Stub(address)->Health(&ctx, req, reply), address);
}

absl::Status PeerClient::Topology(const std::string& address, v1::TopologyReply* reply) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, options_.control_timeout);
  v1::TopologyRequest req;
  req.set_protocol_version(kVersion);
  return FromGrpc(Stub(address)->Topology(&ctx, req, reply), address);
}

absl::Status PeerClient::StageStep(const std::string& address,
                                   const v1::StageStepRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, options_.step_timeout);
  v1::StageStepReply reply;
  return FromGrpc(Stub(address)->StageStep(&ctx, request, &reply), address);
}

absl::Status PeerClient::DeliverToken(const std::string& address,
                                      const v1::DeliverTokenRequest& request,
                                      v1::DeliverTokenReply* reply) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, options_.control_timeout);
  return FromGrpc(Stub(address)->DeliverToken(&ctx, request, reply), address);
}

absl::Status PeerClient::Cancel(const std::string& address, const std::string& request_id) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, options_.control_timeout);
  v1::CancelRequest req;
  req.set_protocol_version(kVersion);
  req.set_request_id(request_id);
  v1::CancelReply reply;
  return FromGrpc(Stub(address)->Cancel(&ctx, req, &reply), address);
}

absl::Status PeerClient::DropSession(const std::string& address, const std::string& session_id) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, options_.control_timeout);
  v1::DropSessionRequest req;
  req.set_protocol_version(kVersion);
  req.set_session_id(session_id);
  v1::DropSessionReply reply;
  return FromGrpc(Stub(address)->DropSession(&ctx, req, &reply), address);
}

}  // namespace ringlm
