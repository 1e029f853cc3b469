// The RingNode gRPC service: thin handlers that check the request, hand it
// to the node's parts, and map absl::Status onto gRPC once (ToGrpc).
#include <deque>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "daemon/node.h"
#include "daemon/proto_convert.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

constexpr uint32_t kVersion = v1::PROTOCOL_VERSION_CURRENT;

absl::Status CheckVersion(uint32_t version) {
  if (version == kVersion) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("protocol version ", version, ", this node speaks ", kVersion));
}

std::string NewRequestId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("req-%016x", rng());
}

// Streams one Generate call: origin events become GenerateEvents, written
// one at a time. The origin's sink holds a shared Stream, so an event that
// races with the end of the call finds `reactor` null and is dropped.
class GenerateReactor : public grpc::ServerWriteReactor<v1::GenerateEvent> {
 public:
  GenerateReactor(Node& node, const v1::GenerateRequest& request)
      : node_(node), stream_(std::make_shared<Stream>()), decoder_(node.model().tokenizer()) {
    stream_->reactor = this;
    absl::Status s = Begin(request);
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
    if (cancel) node_.origin().Cancel(request_id_);
  }

  void OnCancel() override {
    if (!request_id_.empty()) node_.origin().Cancel(request_id_);
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&stream_->mu);
      stream_->reactor = nullptr;
    }
    delete this;
  }

 private:
  struct Stream {
    absl::Mutex mu;
    GenerateReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
  };

  absl::Status Begin(const v1::GenerateRequest& request) {
    if (!node_.ready()) return absl::UnavailableError("the node is starting");
    if (absl::Status s = CheckVersion(request.protocol_version()); !s.ok()) return s;
    const Model& model = node_.model();
    std::vector<int32_t> prompt(request.prompt_ids().begin(), request.prompt_ids().end());
    if (prompt.empty()) {
      prompt = model.tokenizer().Encode(request.prompt(), /*add_special=*/true,
                                        /*parse_special=*/false);
    }
    for (int32_t id : prompt) {
      if (!model.tokenizer().IsValid(id)) {
        return absl::InvalidArgumentError(
            absl::StrCat("prompt token id ", id, " is outside the vocabulary"));
      }
    }
    if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
    if (prompt.size() > model.context_size()) {
      return absl::InvalidArgumentError(absl::StrCat("context_length_exceeded: the prompt has ",
                                                     prompt.size(), " tokens, the context holds ",
                                                     model.context_size()));
    }
    if (request.limits().max_tokens() < 0) {
      return absl::InvalidArgumentError("max_tokens must be >= 0");
    }
    if (absl::Status s = SamplingFromProto(request.sampling()).Validate(); !s.ok()) return s;
    RINGLM_RETURN_IF_ERROR(node_.WaitUntilServing());
    std::shared_ptr<const ClusterSnapshot> snapshot = node_.cluster().current();
    OriginRequest r;
    r.request_id = NewRequestId();
    r.session_id = r.request_id;
    r.plan = snapshot->plan;
    r.prompt = prompt;
    r.sampling = request.sampling();
    r.limits = request.limits();
    r.wire_dtype = request.hidden_dtype() == v1::DTYPE_F16 ? v1::DTYPE_F16 : v1::DTYPE_F32;
    request_id_ = r.request_id;

    v1::GenerateEvent first;
    first.mutable_prompt_ids()->Add(prompt.begin(), prompt.end());
    *first.mutable_plan() = snapshot->plan;
    {
      absl::MutexLock lock(&stream_->mu);
      pending_.push_back(std::move(first));
      MaybeWriteLocked();
    }
    std::shared_ptr<Stream> stream = stream_;
    return node_.origin().Start(std::move(r), [stream](const OriginEvent& e) {
      absl::MutexLock lock(&stream->mu);
      if (stream->reactor != nullptr) stream->reactor->OnOriginEventLocked(e);
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

  Node& node_;
  std::shared_ptr<Stream> stream_;
  std::string request_id_;
  StreamingDecoder decoder_ ABSL_GUARDED_BY(stream_->mu);
  std::deque<v1::GenerateEvent> pending_ ABSL_GUARDED_BY(stream_->mu);
  bool writing_ ABSL_GUARDED_BY(stream_->mu) = false;
  bool final_queued_ ABSL_GUARDED_BY(stream_->mu) = false;
  bool finished_ ABSL_GUARDED_BY(stream_->mu) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(stream_->mu);
};

class NodeService final : public v1::RingNode::CallbackService {
 public:
  explicit NodeService(Node& node) : node_(node) {}

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx,
                                   const v1::HealthRequest* request,
                                   v1::HealthReply* reply) override {
    absl::Status s = CheckVersion(request->protocol_version());
    if (s.ok()) {
      reply->set_protocol_version(kVersion);
      reply->set_node_id(node_.node_id());
      reply->set_model_fingerprint(node_.model().fingerprint());
      *reply->mutable_capabilities() = CapabilitiesToProto(node_.capabilities());
      reply->set_state(node_.state());
      reply->set_grpc_port(node_.grpc_port());
      reply->set_instance_id(node_.instance_id());
      if (node_.ready()) reply->set_partition(node_.cluster().current()->partition_key);
    }
    return Done(ctx, s);
  }

  grpc::ServerUnaryReactor* Topology(grpc::CallbackServerContext* ctx,
                                     const v1::TopologyRequest* request,
                                     v1::TopologyReply* reply) override {
    absl::Status s = CheckVersion(request->protocol_version());
    if (s.ok()) s = Ready();
    if (s.ok()) FillTopology(reply);
    return Done(ctx, s);
  }

  grpc::ServerUnaryReactor* StageStep(grpc::CallbackServerContext* ctx,
                                      const v1::StageStepRequest* request,
                                      v1::StageStepReply* reply) override {
    absl::Status s = Ready();
    if (s.ok()) s = node_.stage().Enqueue(*request);
    if (!s.ok()) {
      spdlog::warn("rejected a step of request {} from {}: {}", request->request_id().substr(0, 64),
                   ctx->peer(), s.ToString());
    }
    reply->set_protocol_version(kVersion);
    return Done(ctx, s);
  }

  grpc::ServerUnaryReactor* DeliverToken(grpc::CallbackServerContext* ctx,
                                         const v1::DeliverTokenRequest* request,
                                         v1::DeliverTokenReply* reply) override {
    absl::Status s = CheckVersion(request->protocol_version());
    if (s.ok()) s = Ready();
    if (s.ok()) reply->set_cancel(node_.origin().Deliver(*request));
    reply->set_protocol_version(kVersion);
    return Done(ctx, s);
  }

  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* ctx,
                                   const v1::CancelRequest* request,
                                   v1::CancelReply* reply) override {
    absl::Status s = CheckVersion(request->protocol_version());
    if (s.ok()) s = Ready();
    if (s.ok()) node_.stage().Cancel(request->request_id());
    reply->set_protocol_version(kVersion);
    return Done(ctx, s);
  }

  grpc::ServerUnaryReactor* CacheStats(grpc::CallbackServerContext* ctx,
                                       const v1::CacheStatsRequest* request,
                                       v1::CacheStatsReply* reply) override {
    absl::Status s = CheckVersion(request->protocol_version());
    if (s.ok()) s = Ready();
    if (s.ok()) FillCacheStats(reply);
    return Done(ctx, s);
  }

  grpc::ServerUnaryReactor* DropSession(grpc::CallbackServerContext* ctx,
                                        const v1::DropSessionRequest* request,
                                        v1::DropSessionReply* reply) override {
    absl::Status s = CheckVersion(request->protocol_version());
    if (s.ok()) s = Ready();
    if (s.ok()) {
      absl::StatusOr<bool> dropped = node_.stage().sessions().Drop(request->session_id());
      s = dropped.status();
      if (dropped.ok()) reply->set_dropped(*dropped);
    }
    reply->set_protocol_version(kVersion);
    return Done(ctx, s);
  }

  grpc::ServerWriteReactor<v1::GenerateEvent>* Generate(
      grpc::CallbackServerContext*, const v1::GenerateRequest* request) override {
    return new GenerateReactor(node_, *request);
  }

 private:
  absl::Status Ready() const {
    return node_.ready() ? absl::OkStatus() : absl::UnavailableError("the node is starting");
  }

  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const absl::Status& s) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpc(s));
    return reactor;
  }

  void FillCacheStats(v1::CacheStatsReply* reply) const {
    const SessionStoreStats stats = node_.stage().sessions().Stats();
    reply->set_protocol_version(kVersion);
    reply->set_budget_bytes(stats.budget_bytes);
    reply->set_used_bytes(stats.used_bytes);
    reply->set_evictions(stats.evictions);
    if (std::optional<LayerRange> r = node_.stage().range()) {
      reply->set_bytes_per_token(uint64_t{r->size()} * node_.model().config().n_embd_kv() * 4);
    }
    for (const SessionInfo& info : stats.sessions) {
      v1::SessionStats* s = reply->add_sessions();
      s->set_session_id(info.id);
      s->set_n_positions(info.n_positions);
      s->set_bytes(info.bytes);
      s->set_idle_ms(std::chrono::duration_cast<std::chrono::milliseconds>(info.idle).count());
      s->set_busy(info.busy);
    }
  }

  void FillTopology(v1::TopologyReply* reply) const {
    std::shared_ptr<const ClusterSnapshot> snap = node_.cluster().current();
    reply->set_protocol_version(kVersion);
    reply->set_node_id(node_.node_id());
    reply->set_state(node_.state());
    const auto now = std::chrono::steady_clock::now();
    v1::PeerView* self = reply->add_peers();
    self->set_node_id(node_.node_id());
    self->set_address(node_.address());
    *self->mutable_capabilities() = CapabilitiesToProto(node_.capabilities());
    self->set_is_self(true);
    self->set_state(node_.state());
    for (const PeerInfo& p : node_.discovery().peers().Snapshot()) {
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
    const Model& m = node_.model();
    v1::ModelInfo* info = reply->mutable_model();
    info->set_path(m.path());
    info->set_fingerprint(m.fingerprint());
    info->set_architecture(m.config().architecture);
    info->set_name(m.config().name);
    info->set_n_layers(m.config().n_layer);
    info->set_total_bytes(m.file().file_size());
    info->set_n_vocab(m.config().n_vocab);
    info->set_context_size(m.context_size());
    FillCacheStats(reply->mutable_cache());
    reply->set_metrics(node_.metrics().registry.RenderPrometheusText());
  }

  Node& node_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeNodeService(Node& node) {
  return std::make_unique<NodeService>(node);
}

}  // namespace ringlm
