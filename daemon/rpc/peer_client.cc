#include "daemon/rpc/peer_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace ringlm {
namespace {

constexpr uint32_t kVersion = v1::PROTOCOL_VERSION_CURRENT;

}  // namespace

absl::Status FromGrpc(const grpc::Status& status, const std::string& address) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat("node ", address, ": ", status.error_message()));
}

class PeerClient::InFlight {
 public:
  InFlight(PeerClient* client, const std::string& address, grpc::ClientContext* ctx)
      : client_(client) {
    absl::MutexLock lock(&client_->mu_);
    it_ = client_->in_flight_.emplace(address, ctx);
  }
  ~InFlight() {
    absl::MutexLock lock(&client_->mu_);
    client_->in_flight_.erase(it_);
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  PeerClient* const client_;
  std::multimap<std::string, grpc::ClientContext*>::iterator it_;
};

void PeerClient::CancelCallsTo(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto [begin, end] = in_flight_.equal_range(address);
  for (auto it = begin; it != end; ++it) it->second->TryCancel();
}

PeerClient::PeerClient(RpcOptions options, std::optional<TlsIdentity> identity, std::string self_id)
    : options_(options), identity_(std::move(identity)), self_id_(std::move(self_id)) {}

std::shared_ptr<v1::RingNode::Stub> PeerClient::Stub(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto it = stubs_.find(address);
  if (it != stubs_.end()) return it->second;
  // A bound, in case Retain is late: drop every cached channel (calls in
  // flight keep theirs) rather than grow without limit.
  if (stubs_.size() >= kMaxChannels) stubs_.clear();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(std::max(options_.max_message_bytes, kMaxModelMessageBytes));
  args.SetMaxSendMessageSize(options_.max_message_bytes);
  // Fail fast on a dead peer instead of backing off for a long time.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (identity_.has_value()) {
    credentials = ChannelCredentials(*identity_);
    AddChannelArgs(&args);
  }
  std::shared_ptr<v1::RingNode::Stub> stub =
      v1::RingNode::NewStub(grpc::CreateCustomChannel(address, credentials, args));
  stubs_.emplace(address, stub);
  return stub;
}

void PeerClient::Retain(const std::set<std::string>& keep) {
  absl::MutexLock lock(&mu_);
  for (auto it = stubs_.begin(); it != stubs_.end();) {
    it = keep.count(it->first) > 0 ? std::next(it) : stubs_.erase(it);
  }
}

size_t PeerClient::channels() const {
  absl::MutexLock lock(&mu_);
  return stubs_.size();
}

void PeerClient::Prepare(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) const {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  if (!identity_.has_value()) ctx.AddMetadata(kClaimedNodeMetadata, self_id_);
  if (!options_.model_key.empty()) ctx.AddMetadata(kModelMetadata, options_.model_key);
}

absl::Status PeerClient::Health(const std::string& address, v1::HealthReply* reply,
                                std::string* server_spki) {
  grpc::ClientContext ctx;
  Prepare(ctx, options_.health_timeout);
  v1::HealthRequest req;
  req.set_protocol_version(kVersion);
  absl::Status s = FromGrpc(Stub(address)->Health(&ctx, req, reply), address);
  if (s.ok() && server_spki != nullptr) {
    *server_spki = identity_.has_value() ? IdentityOf(ctx).spki_fingerprint : "";
  }
  return s;
}

absl::Status PeerClient::Topology(const std::string& address, v1::TopologyReply* reply) {
  grpc::ClientContext ctx;
  Prepare(ctx, options_.control_timeout);
  v1::TopologyRequest req;
  req.set_protocol_version(kVersion);
  return FromGrpc(Stub(address)->Topology(&ctx, req, reply), address);
}

absl::Status PeerClient::StageStep(const std::string& address,
                                   const v1::StageStepRequest& request) {
  grpc::ClientContext ctx;
  Prepare(ctx, options_.step_timeout);
  InFlight in_flight(this, address, &ctx);
  v1::StageStepReply reply;
  return FromGrpc(Stub(address)->StageStep(&ctx, request, &reply), address);
}

absl::Status PeerClient::DeliverToken(const std::string& address,
                                      const v1::DeliverTokenRequest& request,
                                      v1::DeliverTokenReply* reply) {
  grpc::ClientContext ctx;
  Prepare(ctx, options_.control_timeout);
  InFlight in_flight(this, address, &ctx);
  return FromGrpc(Stub(address)->DeliverToken(&ctx, request, reply), address);
}

absl::Status PeerClient::Cancel(const std::string& address, const std::string& request_id) {
  grpc::ClientContext ctx;
  Prepare(ctx, options_.control_timeout);
  InFlight in_flight(this, address, &ctx);
  v1::CancelRequest req;
  req.set_protocol_version(kVersion);
  req.set_request_id(request_id);
  v1::CancelReply reply;
  return FromGrpc(Stub(address)->Cancel(&ctx, req, &reply), address);
}

absl::Status PeerClient::Rollback(const std::string& address, const v1::RollbackRequest& request) {
  grpc::ClientContext ctx;
  Prepare(ctx, options_.control_timeout);
  InFlight in_flight(this, address, &ctx);
  v1::RollbackRequest req = request;
  req.set_protocol_version(kVersion);
  v1::RollbackReply reply;
  return FromGrpc(Stub(address)->Rollback(&ctx, req, &reply), address);
}

absl::Status PeerClient::DropSession(const std::string& address, const std::string& session_id) {
  grpc::ClientContext ctx;
  Prepare(ctx, options_.control_timeout);
  InFlight in_flight(this, address, &ctx);
  v1::DropSessionRequest req;
  req.set_protocol_version(kVersion);
  req.set_session_id(session_id);
  v1::DropSessionReply reply;
  return FromGrpc(Stub(address)->DropSession(&ctx, req, &reply), address);
}

absl::StatusOr<uint32_t> PeerClient::AdoptPrefix(const std::string& address,
                                                 const v1::AdoptPrefixRequest& request) {
  grpc::ClientContext ctx;
  Prepare(ctx, options_.control_timeout);
  InFlight in_flight(this, address, &ctx);
  v1::AdoptPrefixReply reply;
  RINGLM_RETURN_IF_ERROR(FromGrpc(Stub(address)->AdoptPrefix(&ctx, request, &reply), address));
  return reply.adopted();
}

absl::Status PeerClient::GetModel(const std::string& address, const v1::GetModelRequest& request,
                                  v1::GetModelReply* reply) {
  grpc::ClientContext ctx;
  Prepare(ctx, options_.control_timeout);
  return FromGrpc(Stub(address)->GetModel(&ctx, request, reply), address);
}

absl::Status PeerClient::FetchTensor(const std::string& address,
                                     const v1::FetchTensorRequest& request, uint64_t expected_bytes,
                                     const std::function<bool(const v1::TensorChunk&)>& on_chunk) {
  grpc::ClientContext ctx;
  const uint64_t rate = std::max<uint64_t>(options_.fetch_min_bytes_per_second, 1);
  Prepare(ctx, options_.fetch_timeout + std::chrono::milliseconds(expected_bytes * 1000 / rate));
  std::unique_ptr<grpc::ClientReader<v1::TensorChunk>> reader =
      Stub(address)->FetchTensor(&ctx, request);
  v1::TensorChunk chunk;
  while (reader->Read(&chunk)) {
    if (!on_chunk(chunk)) {
      ctx.TryCancel();
      (void)reader->Finish();
      return absl::OkStatus();
    }
  }
  return FromGrpc(reader->Finish(), address);
}

}  // namespace ringlm
