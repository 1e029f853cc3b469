// The RingNode gRPC service: thin handlers that check the request, hand it
// to the part that serves it, and map absl::Status onto gRPC once (ToGrpc).
#include "daemon/node_service.h"

#include <deque>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log_rate_limiter.h"
#include "base/status_macros.h"
#include "daemon/rpc/peer_client.h"
#include "daemon/rpc/proto_convert.h"
#include "inference/kv_cache.h"
#include "inference/sampling/speculation.h"
#include "inference/stage_weights.h"
#include "security/bearer_token.h"
#include "security/crypto.h"
#include "security/tls_credentials.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

constexpr uint32_t kVersion = v1::PROTOCOL_VERSION_CURRENT;

absl::Status CheckVersion(uint32_t version) {
  if (version == kVersion) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("protocol version ", version, ", this node speaks ", kVersion));
}

// "Bearer KEY" (the scheme in any case) -> KEY; empty when absent.
// The value of the call's "authorization" header; empty when it has none.
std::string_view Authorization(const grpc::ServerContextBase& ctx) {
  auto it = ctx.client_metadata().find("authorization");
  if (it == ctx.client_metadata().end()) return "";
  return std::string_view(it->second.data(), it->second.size());
}

// Streams one Generate call: origin events become GenerateEvents, written
// one at a time. The origin's sink holds a shared Stream, so an event that
// races with the end of the call finds `reactor` null and is dropped.
class GenerateReactor : public grpc::ServerWriteReactor<v1::GenerateEvent> {
 public:
  // `admitted` is false when the call was refused before it began (not
  // authorized, or too many calls): then `refusal` is its answer.
  // `parts` must outlive the reactor (the service's do).
  GenerateReactor(const NodeServiceParts& parts, const v1::GenerateRequest& request,
                  absl::Status refusal)
      : parts_(parts), stream_(std::make_shared<Stream>()), decoder_(parts.model->tokenizer()) {
    stream_->reactor = this;
    counted_ = refusal.ok();
    absl::Status s = refusal.ok() ? Begin(request) : refusal;
    if (!s.ok()) {
      absl::MutexLock lock(&stream_->mu);
      final_queued_ = true;
      final_status_ = ToGrpc(s);
      MaybeWriteLocked();
    }
  }

  void OnWriteDone(bool ok) override {
    bool cancel = false;
    {
      absl::MutexLock lock(&stream_->mu);
      writing_ = false;
      if (!pending_.empty()) pending_.pop_front();
      if (!ok && !final_queued_) {
        pending_.clear();
        final_queued_ = true;
        final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
        cancel = true;
      }
      MaybeWriteLocked();
    }
    if (cancel) parts_.origin->Cancel(request_id_);
  }

  void OnCancel() override {
    if (!request_id_.empty()) parts_.origin->Cancel(request_id_);
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&stream_->mu);
      stream_->reactor = nullptr;
    }
    if (counted_) parts_.generate_slots->Release();
    delete this;
  }

 private:
  struct Stream {
    absl::Mutex mu;
    GenerateReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
  };

  absl::Status Begin(const v1::GenerateRequest& request) {
    if (!parts_.ready()) return absl::UnavailableError("the node is starting");
    if (absl::Status s = CheckVersion(request.protocol_version()); !s.ok()) return s;
    const Model& model = *parts_.model;
    std::vector<int32_t> prompt(request.prompt_ids().begin(), request.prompt_ids().end());
    if (prompt.empty()) {
      prompt = model.tokenizer().Encode(request.prompt(), /*add_special=*/true,
                                        /*parse_special=*/false);
    }
    GenerationRequest generation;
    generation.prompt = std::move(prompt);
    generation.sampling = SamplingFromProto(request.sampling());
    generation.max_tokens = request.limits().max_tokens();
    generation.ignore_eos = request.limits().ignore_eos();
    generation.f16_hidden = request.hidden_dtype() == v1::DTYPE_F16;
    generation.speculate = !request.no_speculation();
    if (request.steps_in_flight() > kMaxStepsInFlight) {
      return absl::InvalidArgumentError(
          absl::StrCat("steps_in_flight must be at most ", kMaxStepsInFlight));
    }
    generation.steps_in_flight = request.steps_in_flight();
    RINGLM_ASSIGN_OR_RETURN(OriginRequest r, parts_.origin->Prepare(std::move(generation)));
    request_id_ = r.request_id;

    v1::GenerateEvent first;
    first.mutable_prompt_ids()->Add(r.generation.prompt.begin(), r.generation.prompt.end());
    first.set_request_id(r.request_id);
    *first.mutable_plan() = r.plan;
    {
      absl::MutexLock lock(&stream_->mu);
      pending_.push_back(std::move(first));
      MaybeWriteLocked();
    }
    std::shared_ptr<Stream> stream = stream_;
    // `stream->mu` is the reactor's `stream_->mu` (the same Stream), which
    // the analysis cannot see through the pointer.
    return parts_.origin->Start(std::move(r),
                                [stream](const OriginEvent& e) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                  absl::MutexLock lock(&stream->mu);
                                  if (stream->reactor != nullptr) {
                                    stream->reactor->OnOriginEventLocked(e);
                                  }
                                });
  }

  void OnOriginEventLocked(const OriginEvent& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(stream_->mu) {
    if (final_queued_) return;
    v1::GenerateEvent event;
    if (e.has_token) {
      event.set_has_token(true);
      event.set_token(e.token);
      event.set_text(decoder_.Push(e.token));
    }
    if (e.finish != v1::FINISH_REASON_UNSPECIFIED) {
      event.set_text(event.text() + decoder_.Flush());
      event.set_finish_reason(e.finish);
      final_queued_ = true;
      if (e.finish == v1::FINISH_REASON_ERROR) {
        event.set_error(std::string(e.error.message()));
        event.set_error_code(static_cast<int32_t>(e.error.code()));
      }
      final_status_ = e.finish == v1::FINISH_REASON_CANCELLED
                          ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")
                          : grpc::Status::OK;
    }
    pending_.push_back(std::move(event));
    MaybeWriteLocked();
  }

  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(stream_->mu) {
    if (writing_ || finished_) return;
    if (!pending_.empty()) {
      writing_ = true;
      StartWrite(&pending_.front());
    } else if (final_queued_) {
      finished_ = true;
      Finish(final_status_);
    }
  }

  const NodeServiceParts& parts_;
  std::shared_ptr<Stream> stream_;
  bool counted_ = false;  // holds one of the node's Generate slots
  std::string request_id_;
  StreamingDecoder decoder_ ABSL_GUARDED_BY(stream_->mu);
  std::deque<v1::GenerateEvent> pending_ ABSL_GUARDED_BY(stream_->mu);
  bool writing_ ABSL_GUARDED_BY(stream_->mu) = false;
  bool final_queued_ ABSL_GUARDED_BY(stream_->mu) = false;
  bool finished_ ABSL_GUARDED_BY(stream_->mu) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(stream_->mu);
};

// Every handler first establishes who calls (Authenticate: a verified
// cluster certificate, else UNAUTHENTICATED) and what that caller may do
// (docs/security.md), then hands the call to the part that serves it.
class NodeService final : public v1::RingNode::CallbackService {
 public:
  explicit NodeService(NodeServiceParts parts) : parts_(std::move(parts)) {}

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx,
                                   const v1::HealthRequest* request,
                                   v1::HealthReply* reply) override {
    absl::Status s = Authenticate(ctx).status();
    if (s.ok()) s = CheckVersion(request->protocol_version());
    if (s.ok()) {
      reply->set_protocol_version(kVersion);
      reply->set_node_id(parts_.node_id);
      reply->set_model_fingerprint(parts_.model->fingerprint());
      *reply->mutable_capabilities() = CapabilitiesToProto(parts_.capabilities);
      reply->set_state(parts_.state());
      reply->set_grpc_port(parts_.grpc_port());
      reply->set_instance_id(parts_.instance_id);
      reply->set_security(parts_.security_mode);
      reply->set_cluster_id(parts_.cluster_id);
      reply->set_api_address(parts_.api_address());
      if (parts_.ready()) reply->set_partition(parts_.applied_partition());
    }
    return Done(ctx, s);
  }

  grpc::ServerUnaryReactor* Topology(grpc::CallbackServerContext* ctx,
                                     const v1::TopologyRequest* request,
                                     v1::TopologyReply* reply) override {
    absl::Status s = Authenticate(ctx).status();
    if (s.ok()) s = CheckVersion(request->protocol_version());
    if (s.ok()) s = Ready();
    if (s.ok()) FillTopology(reply);
    return Done(ctx, s);
  }

  grpc::ServerUnaryReactor* StageStep(grpc::CallbackServerContext* ctx,
                                      const v1::StageStepRequest* request,
                                      v1::StageStepReply* reply) override {
    absl::StatusOr<Caller> caller = Member(ctx);
    absl::Status s = caller.status();
    if (s.ok()) s = Ready();
    if (s.ok()) s = parts_.stage->Enqueue(*request, *caller);
    if (!s.ok() && s.code() != absl::StatusCode::kUnauthenticated && warnings_.Allow("step")) {
      spdlog::warn("rejected a step of request {} from {}: {}", request->request_id().substr(0, 64),
                   ctx->peer(), s.ToString());
    }
    reply->set_protocol_version(kVersion);
    return Done(ctx, s);
  }

  grpc::ServerUnaryReactor* DeliverToken(grpc::CallbackServerContext* ctx,
                                         const v1::DeliverTokenRequest* request,
                                         v1::DeliverTokenReply* reply) override {
    absl::StatusOr<Caller> caller = Member(ctx);
    absl::Status s = caller.status();
    if (s.ok()) s = CheckVersion(request->protocol_version());
    if (s.ok()) s = Ready();
    if (s.ok()) {
      absl::StatusOr<bool> stop = parts_.origin->Deliver(*request, caller->node_id);
      s = stop.status();
      if (stop.ok()) reply->set_cancel(*stop);
    }
    if (s.code() == absl::StatusCode::kPermissionDenied && warnings_.Allow("deliver")) {
      spdlog::warn("refused a token delivery from {}: {}", ctx->peer(), s.ToString());
    }
    reply->set_protocol_version(kVersion);
    return Done(ctx, s);
  }

  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* ctx,
                                   const v1::CancelRequest* request,
                                   v1::CancelReply* reply) override {
    absl::StatusOr<Caller> caller = Member(ctx);
    absl::Status s = caller.status();
    if (s.ok()) s = CheckVersion(request->protocol_version());
    if (s.ok()) s = Ready();
    if (s.ok()) s = parts_.stage->Cancel(request->request_id(), *caller);
    reply->set_protocol_version(kVersion);
    return Done(ctx, s);
  }

  grpc::ServerUnaryReactor* Rollback(grpc::CallbackServerContext* ctx,
                                     const v1::RollbackRequest* request,
                                     v1::RollbackReply* reply) override {
    absl::StatusOr<Caller> caller = Member(ctx);
    absl::Status s = caller.status();
    if (s.ok()) s = CheckVersion(request->protocol_version());
    if (s.ok()) s = Ready();
    if (s.ok()) s = parts_.stage->Rollback(*request, *caller);
    reply->set_protocol_version(kVersion);
    return Done(ctx, s);
  }

  grpc::ServerUnaryReactor* CacheStats(grpc::CallbackServerContext* ctx,
                                       const v1::CacheStatsRequest* request,
                                       v1::CacheStatsReply* reply) override {
    absl::Status s = Authenticate(ctx).status();
    if (s.ok()) s = CheckVersion(request->protocol_version());
    if (s.ok()) s = Ready();
    if (s.ok()) FillCacheStats(reply);
    return Done(ctx, s);
  }

  grpc::ServerUnaryReactor* DropSession(grpc::CallbackServerContext* ctx,
                                        const v1::DropSessionRequest* request,
                                        v1::DropSessionReply* reply) override {
    absl::StatusOr<Caller> caller = Member(ctx);
    absl::Status s = caller.status();
    if (s.ok()) s = CheckVersion(request->protocol_version());
    if (s.ok()) s = Ready();
    if (s.ok() && request->all()) {
      absl::StatusOr<size_t> dropped = parts_.stage->DropAllSessions(*caller);
      s = dropped.status();
      if (dropped.ok()) reply->set_dropped(*dropped > 0);
    } else if (s.ok()) {
      absl::StatusOr<bool> dropped = parts_.stage->DropSession(request->session_id(), *caller);
      s = dropped.status();
      if (dropped.ok()) reply->set_dropped(*dropped);
    }
    reply->set_protocol_version(kVersion);
    return Done(ctx, s);
  }

  // Members only; the adopted prefix goes into the caller's own namespace.
  grpc::ServerUnaryReactor* AdoptPrefix(grpc::CallbackServerContext* ctx,
                                        const v1::AdoptPrefixRequest* request,
                                        v1::AdoptPrefixReply* reply) override {
    absl::StatusOr<Caller> caller = Member(ctx);
    absl::Status s = caller.status();
    if (s.ok()) s = Ready();
    if (s.ok()) {
      absl::StatusOr<uint32_t> adopted = parts_.stage->AdoptPrefix(*request, *caller);
      s = adopted.status();
      if (adopted.ok()) reply->set_adopted(*adopted);
    }
    reply->set_protocol_version(kVersion);
    return Done(ctx, s);
  }

  // Model distribution: any node of the cluster (one that is still learning
  // the model is not a member yet), never a client.
  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* ctx,
                                     const v1::GetModelRequest* request,
                                     v1::GetModelReply* reply) override {
    absl::Status s = ClusterNode(ctx);
    if (s.ok()) s = CheckVersion(request->protocol_version());
    if (s.ok()) ServeGetModel(parts_.share, *request, reply, &s);
    return Done(ctx, s);
  }

  grpc::ServerWriteReactor<v1::TensorChunk>* FetchTensor(
      grpc::CallbackServerContext* ctx, const v1::FetchTensorRequest* request) override {
    absl::Status s = ClusterNode(ctx);
    if (s.ok()) s = CheckVersion(request->protocol_version());
    return ServeFetchTensor(parts_.share, *request, s, parts_.share_metrics);
  }

  grpc::ServerWriteReactor<v1::GenerateEvent>* Generate(
      grpc::CallbackServerContext* ctx, const v1::GenerateRequest* request) override {
    absl::Status s = Authenticate(ctx).status();
    // Without a cluster certificate, the API key admits a client.
    if (!s.ok() && !parts_.api_key.empty() && BearerMatches(Authorization(*ctx), parts_.api_key)) {
      s = absl::OkStatus();
    }
    if (s.ok() && !parts_.generate_slots->TryAcquire()) {
      s = absl::ResourceExhaustedError("too many Generate calls are running on this node");
    }
    return new GenerateReactor(parts_, *request, s);
  }

 private:
  absl::Status Ready() const {
    return parts_.ready() ? absl::OkStatus() : absl::UnavailableError("the node is starting");
  }

  // Who calls. With a cluster key: the subject of a verified certificate of
  // this cluster, else UNAUTHENTICATED. Insecure: whatever the caller claims.
  absl::StatusOr<Caller> Authenticate(grpc::CallbackServerContext* ctx) const {
    if (!parts_.secure) {
      auto it = ctx->client_metadata().find(kClaimedNodeMetadata);
      if (it == ctx->client_metadata().end()) return Caller{Caller::Role::kClient, "", false, ""};
      return Caller{Caller::Role::kNode, std::string(it->second.data(), it->second.size()), false,
                    ""};
    }
    const PeerIdentity id = IdentityOf(*ctx);
    if (!id.authenticated) {
      return absl::UnauthenticatedError(
          "this node serves members of its cluster only: present a certificate issued from the "
          "cluster key");
    }
    return Caller{id.role == Role::kNode ? Caller::Role::kNode : Caller::Role::kClient,
                  id.common_name, true, id.spki_fingerprint};
  }

  // A caller with a node certificate of this cluster.
  absl::Status ClusterNode(grpc::CallbackServerContext* ctx) const {
    absl::StatusOr<Caller> caller = Authenticate(ctx);
    if (caller.ok() && !caller->is_node()) {
      return absl::PermissionDeniedError("clients may not fetch the model");
    }
    return caller.status();
  }

  // A node of the cluster whose certificate key is the one pinned for its
  // id (or this node itself): the only callers of the ring's methods.
  // Insecure, membership is the cluster view's, which a starting node does
  // not have yet: UNAVAILABLE until it is ready.
  absl::StatusOr<Caller> Member(grpc::CallbackServerContext* ctx) const {
    absl::StatusOr<Caller> caller = Authenticate(ctx);
    if (!caller.ok()) return caller;
    if (!caller->is_node()) {
      return absl::PermissionDeniedError("clients may not call the ring's methods");
    }
    if (parts_.secure) {
      if (!parts_.is_pinned_member(caller->node_id, caller->spki_fingerprint)) {
        return absl::PermissionDeniedError(absl::StrCat(
            "node ", caller->node_id, " is not a proven member of this node's cluster view"));
      }
    } else {
      RINGLM_RETURN_IF_ERROR(Ready());
      if (!parts_.is_member(caller->node_id)) {
        return absl::PermissionDeniedError(absl::StrCat("node ", caller->node_id, " is unknown"));
      }
    }
    return caller;
  }

  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const absl::Status& s) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpc(s));
    return reactor;
  }

  // Counts and sizes only: session ids are the capabilities of the heads
  // that made them, and are never listed.
  void FillCacheStats(v1::CacheStatsReply* reply) const {
    const SessionStoreStats stats = parts_.stage->sessions().Stats();
    reply->set_protocol_version(kVersion);
    reply->set_budget_bytes(stats.budget_bytes);
    reply->set_used_bytes(stats.used_bytes);
    reply->set_evictions(stats.evictions);
    reply->set_logical_bytes(stats.logical_bytes);
    reply->set_blocks(stats.blocks);
    reply->set_shared_blocks(stats.shared_blocks);
    reply->set_evicted_blocks(stats.evicted_blocks);
    reply->set_block_tokens(kKvBlockTokens);
    if (std::optional<LayerRange> r = parts_.stage->range()) {
      reply->set_bytes_per_token(r->size() * parts_.model->config().kv_bytes_per_position());
    }
    for (const SessionInfo& info : stats.sessions) {
      v1::SessionStats* s = reply->add_sessions();
      s->set_n_positions(info.n_positions);
      s->set_bytes(info.bytes);
      s->set_idle_ms(std::chrono::duration_cast<std::chrono::milliseconds>(info.idle).count());
      s->set_busy(info.busy);
    }
  }

  void FillTopology(v1::TopologyReply* reply) const {
    std::shared_ptr<const ClusterSnapshot> snap = parts_.cluster();
    const v1::NodeState state = parts_.state();
    reply->set_protocol_version(kVersion);
    reply->set_node_id(parts_.node_id);
    reply->set_state(state);
    reply->set_security(parts_.security_mode);
    reply->set_cluster_id(parts_.cluster_id);
    if (parts_.served_models) {
      for (std::string& name : parts_.served_models()) reply->add_served_models(std::move(name));
    }
    const auto now = std::chrono::steady_clock::now();
    v1::PeerView* self = reply->add_peers();
    self->set_node_id(parts_.node_id);
    self->set_address(parts_.address());
    self->set_api_address(parts_.api_address());
    *self->mutable_capabilities() = CapabilitiesToProto(parts_.capabilities);
    self->set_is_self(true);
    self->set_state(state);
    for (const PeerInfo& p : parts_.peers->VerifiedSnapshot()) {
      v1::PeerView* v = reply->add_peers();
      v->set_node_id(p.node_id);
      v->set_address(p.address);
      *v->mutable_capabilities() = CapabilitiesToProto(p.caps);
      v->set_last_seen_ms_ago(
          std::chrono::duration_cast<std::chrono::milliseconds>(now - p.last_seen).count());
    }
    if (snap->has_plan()) *reply->mutable_plan() = snap->plan;
    for (const std::string& id : snap->partition.idle_node_ids) reply->add_idle_node_ids(id);
    if (!snap->status.ok()) reply->set_partition_error(std::string(snap->status.message()));
    const Model& m = *parts_.model;
    v1::ModelInfo* info = reply->mutable_model();
    info->set_file_name(BaseName(m.path()));
    info->set_fingerprint(m.fingerprint());
    info->set_architecture(m.config().architecture);
    info->set_name(m.config().name);
    info->set_n_layers(m.config().n_layer);
    info->set_total_bytes(m.file().file_size());
    info->set_n_vocab(m.config().n_vocab);
    info->set_context_size(m.context_size());
    info->set_n_expert(m.config().n_expert);
    info->set_n_expert_used(m.config().n_expert_used);
    // A pass over the tensor table per layer: cheap beside a Topology call.
    if (absl::StatusOr<WeightFootprint> fp = ComputeFootprint(m.file(), m.config()); fp.ok()) {
      for (uint64_t bytes : fp->layer_bytes) info->add_layer_bytes(bytes);
    }
    FillCacheStats(reply->mutable_cache());
    reply->set_metrics(parts_.metrics->RenderPrometheusText());
  }

  static std::string BaseName(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
  }

  const NodeServiceParts parts_;
  mutable LogRateLimiter warnings_{std::chrono::seconds(10)};
};

}  // namespace

std::unique_ptr<v1::RingNode::CallbackService> MakeNodeService(NodeServiceParts parts) {
  return std::make_unique<NodeService>(std::move(parts));
}

}  // namespace ringlm
