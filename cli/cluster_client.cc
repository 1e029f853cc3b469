#include "cli/cluster_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

namespace ringlm {
namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& address) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("node ", address, ": ", s.error_message()));
}

}  // namespace

ClusterClient::ClusterClient(const std::string& address) : address_(address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  stub_ = v1::RingNode::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

absl::StatusOr<v1::TopologyReply> ClusterClient::Topology(std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::TopologyRequest req;
  req.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  v1::TopologyReply reply;
  grpc::Status s = stub_->Topology(&ctx, req, &reply);
  if (!s.ok()) return FromGrpc(s, address_);
  return reply;
}

absl::Status ClusterClient::Generate(
    const v1::GenerateRequest& request, std::chrono::milliseconds timeout,
    const std::function<void(const v1::GenerateEvent&)>& on_event) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  std::unique_ptr<grpc::ClientReader<v1::GenerateEvent>> reader = stub_->Generate(&ctx, request);
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
