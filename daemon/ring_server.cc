#include "daemon/ring_server.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/outsider_gate.h"
#include "daemon/rpc/peer_client.h"
#include "daemon/rpc/proto_convert.h"

namespace ringlm {
namespace {

// A streaming call refused before it started.
template <typename T>
class RefusedStream : public grpc::ServerWriteReactor<T> {
 public:
  explicit RefusedStream(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

// Hands each call to the service its kModelMetadata names (see RingServer).
class ModelRouter final : public v1::RingNode::CallbackService {
 public:
  absl::Status Add(const std::string& fingerprint, const std::vector<std::string>& names,
                   v1::RingNode::CallbackService* service) {
    std::vector<std::string> keys = {fingerprint};
    for (const std::string& name : names) {
      if (name != fingerprint) keys.push_back(name);
    }
    absl::MutexLock lock(&mu_);
    for (const std::string& key : keys) {
      if (by_key_.contains(key)) {
        return absl::AlreadyExistsError(absl::StrCat("a model is already served as '", key, "'"));
      }
    }
    for (const std::string& key : keys) by_key_[key] = service;
    if (first_ == nullptr) first_ = service;
    models_.push_back({service, names.empty() ? fingerprint : names.front()});
    return absl::OkStatus();
  }

  std::vector<std::string> ModelNames() const {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out;
    for (const Hosted& m : models_) out.push_back(m.name);
    return out;
  }

  void Remove(const v1::RingNode::CallbackService* service) {
    absl::MutexLock lock(&mu_);
    std::erase_if(by_key_, [service](const auto& entry) { return entry.second == service; });
    std::erase_if(models_, [service](const Hosted& m) { return m.service == service; });
    if (first_ == service) first_ = models_.empty() ? nullptr : models_.front().service;
  }

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx, const v1::HealthRequest* req,
                                   v1::HealthReply* reply) override {
    return Unary(ctx, &v1::RingNode::CallbackService::Health, req, reply);
  }
  grpc::ServerUnaryReactor* Topology(grpc::CallbackServerContext* ctx,
                                     const v1::TopologyRequest* req,
                                     v1::TopologyReply* reply) override {
    return Unary(ctx, &v1::RingNode::CallbackService::Topology, req, reply);
  }
  grpc::ServerUnaryReactor* StageStep(grpc::CallbackServerContext* ctx,
                                      const v1::StageStepRequest* req,
                                      v1::StageStepReply* reply) override {
    return Unary(ctx, &v1::RingNode::CallbackService::StageStep, req, reply);
  }
  grpc::ServerUnaryReactor* DeliverToken(grpc::CallbackServerContext* ctx,
                                         const v1::DeliverTokenRequest* req,
                                         v1::DeliverTokenReply* reply) override {
    return Unary(ctx, &v1::RingNode::CallbackService::DeliverToken, req, reply);
  }
  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* ctx, const v1::CancelRequest* req,
                                   v1::CancelReply* reply) override {
    return Unary(ctx, &v1::RingNode::CallbackService::Cancel, req, reply);
  }
  grpc::ServerUnaryReactor* Rollback(grpc::CallbackServerContext* ctx,
                                     const v1::RollbackRequest* req,
                                     v1::RollbackReply* reply) override {
    return Unary(ctx, &v1::RingNode::CallbackService::Rollback, req, reply);
  }
  grpc::ServerUnaryReactor* CacheStats(grpc::CallbackServerContext* ctx,
                                       const v1::CacheStatsRequest* req,
                                       v1::CacheStatsReply* reply) override {
    return Unary(ctx, &v1::RingNode::CallbackService::CacheStats, req, reply);
  }
  grpc::ServerUnaryReactor* DropSession(grpc::CallbackServerContext* ctx,
                                        const v1::DropSessionRequest* req,
                                        v1::DropSessionReply* reply) override {
    return Unary(ctx, &v1::RingNode::CallbackService::DropSession, req, reply);
  }
  grpc::ServerUnaryReactor* AdoptPrefix(grpc::CallbackServerContext* ctx,
                                        const v1::AdoptPrefixRequest* req,
                                        v1::AdoptPrefixReply* reply) override {
    return Unary(ctx, &v1::RingNode::CallbackService::AdoptPrefix, req, reply);
  }
  // Model distribution names its model in the request too: a node still
  // learning the model (--model-from-peers) knows it only from there.
  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* ctx,
                                     const v1::GetModelRequest* req,
                                     v1::GetModelReply* reply) override {
    return Unary(ctx, &v1::RingNode::CallbackService::GetModel, req, reply,
                 req->model_fingerprint());
  }
  grpc::ServerWriteReactor<v1::TensorChunk>* FetchTensor(
      grpc::CallbackServerContext* ctx, const v1::FetchTensorRequest* req) override {
    absl::StatusOr<v1::RingNode::CallbackService*> service = Route(*ctx, req->model_fingerprint());
    if (!service.ok()) return new RefusedStream<v1::TensorChunk>(ToGrpc(service.status()));
    return (*service)->FetchTensor(ctx, req);
  }
  grpc::ServerWriteReactor<v1::GenerateEvent>* Generate(grpc::CallbackServerContext* ctx,
                                                        const v1::GenerateRequest* req) override {
    absl::StatusOr<v1::RingNode::CallbackService*> service = Route(*ctx);
    if (!service.ok()) return new RefusedStream<v1::GenerateEvent>(ToGrpc(service.status()));
    return (*service)->Generate(ctx, req);
  }

 private:
  // The service the call names (by its metadata, else by `fallback_key`
  // when the daemon serves a model under it, else the first), or NOT_FOUND.
  absl::StatusOr<v1::RingNode::CallbackService*> Route(const grpc::CallbackServerContext& ctx,
                                                       const std::string& fallback_key = "") {
    const auto& metadata = ctx.client_metadata();
    auto it = metadata.find(kModelMetadata);
    absl::MutexLock lock(&mu_);
    if (it == metadata.end()) {
      if (auto found = by_key_.find(fallback_key);
          !fallback_key.empty() && found != by_key_.end()) {
        return found->second;
      }
      if (first_ != nullptr) return first_;
      return absl::UnavailableError("this node serves no model yet");
    }
    const std::string key(it->second.data(), std::min<size_t>(it->second.size(), 256));
    auto found = by_key_.find(key);
    if (found == by_key_.end()) {
      return absl::NotFoundError(absl::StrCat("this node does not serve the model '", key, "'"));
    }
    return found->second;
  }

  template <typename Request, typename Reply>
  grpc::ServerUnaryReactor* Unary(
      grpc::CallbackServerContext* ctx,
      grpc::ServerUnaryReactor* (v1::RingNode::CallbackService::*method)(
          grpc::CallbackServerContext*, const Request*, Reply*),
      const Request* request, Reply* reply, const std::string& fallback_key = "") {
    absl::StatusOr<v1::RingNode::CallbackService*> service = Route(*ctx, fallback_key);
    if (!service.ok()) {
      grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
      reactor->Finish(ToGrpc(service.status()));
      return reactor;
    }
    return ((*service)->*method)(ctx, request, reply);
  }

  struct Hosted {
    v1::RingNode::CallbackService* service;
    std::string name;
  };

  mutable absl::Mutex mu_;
  std::map<std::string, v1::RingNode::CallbackService*> by_key_ ABSL_GUARDED_BY(mu_);
  std::vector<Hosted> models_ ABSL_GUARDED_BY(mu_);  // in the order added
  v1::RingNode::CallbackService* first_ ABSL_GUARDED_BY(mu_) = nullptr;
};

RingServer::RingServer() : router_(std::make_unique<ModelRouter>()) {}

RingServer::~RingServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<RingServer>> RingServer::Start(const RingServerOptions& o) {
  std::unique_ptr<RingServer> server(new RingServer());
  grpc::ServerBuilder builder;
  int bound_port = 0;
  const std::string listen = absl::StrCat(o.host, ":", o.port);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (o.identity) {
    credentials = ServerCredentials(*o.identity);
    credentials->SetAuthMetadataProcessor(std::make_shared<OutsiderGate>(o.api_key));
  }
  builder.AddListeningPort(listen, credentials, &bound_port);
  builder.SetMaxReceiveMessageSize(o.max_message_bytes);
  // Replies may be larger: model chunks and manifests (kMaxModelMessageBytes).
  builder.SetMaxSendMessageSize(std::max(o.max_message_bytes, kMaxModelMessageBytes));
  // What one connection may make this node hold: a bounded number of calls,
  // and a flow-control window that does not grow towards a peer that sends
  // messages it will refuse (BDP probing would let it grow to many MiB).
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 64);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // A connection has this long for its TLS handshake and then its HTTP/2
  // preface (gRPC closes one whose settings have not come by then); the
  // default is 2 minutes.
  builder.AddChannelArgument(
      GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
      static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(o.handshake_timeout).count()));
  // gRPC binds with SO_REUSEPORT by default: a second daemon on this port
  // would bind too and take half the calls. A taken port is an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(server->router_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || bound_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for gRPC on ", listen, " (is the port in use?)"));
  }
  server->port_ = static_cast<uint16_t>(bound_port);
  server->max_message_bytes_ = o.max_message_bytes;
  return server;
}

absl::Status RingServer::Add(const std::string& fingerprint, const std::vector<std::string>& names,
                             v1::RingNode::CallbackService* service) {
  return router_->Add(fingerprint, names, service);
}

std::vector<std::string> RingServer::ModelNames() const { return router_->ModelNames(); }

void RingServer::Remove(const v1::RingNode::CallbackService* service) { router_->Remove(service); }

void RingServer::Shutdown() {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

}  // namespace ringlm
