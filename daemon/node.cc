#include "daemon/node.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "discovery/node_identity.h"
#include "partition/device_probe.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

// The first up, non-loopback IPv4 address, or 127.0.0.1.
std::string FirstLanAddress() {
  std::string found = "127.0.0.1";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char buf[INET_ADDRSTRLEN];
    const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) != nullptr) {
      found = buf;
      break;
    }
  }
  freeifaddrs(list);
  return found;
}

std::string FormatRange(std::optional<LayerRange> r) {
  return r ? absl::StrCat("[", r->first, ", ", r->last, ")") : "none";
}

}  // namespace

Node::Node(NodeOptions options) : options_(std::move(options)) {}

Node::~Node() { Stop(); }

absl::StatusOr<std::unique_ptr<Node>> Node::Create(NodeOptions options) {
  std::unique_ptr<Node> node(new Node(std::move(options)));
  const NodeOptions& o = node->options_;
  const std::string state_dir = o.state_dir.empty() ? DefaultStateDir() : o.state_dir;
  RINGLM_ASSIGN_OR_RETURN(node->node_id_, LoadOrCreateNodeId(state_dir));
  node->instance_id_ = RandomU64();
  RINGLM_ASSIGN_OR_RETURN(node->metrics_, NodeMetrics::Create());
  ModelOptions model_options;
  model_options.layers = LayerRange{0, 0};  // ranges come from the partition
  model_options.context_size = o.context_size;
  RINGLM_ASSIGN_OR_RETURN(node->model_, Model::Load(o.model_path, model_options));
  const int threads = o.threads > 0 ? o.threads : DefaultThreadCount();
  ProbeOptions probe;
  probe.memory_override_bytes = o.memory_bytes;
  probe.threads = static_cast<uint32_t>(threads);
  probe.measure_gflops = o.measure_gflops;
  RINGLM_ASSIGN_OR_RETURN(node->caps_, ProbeDevice(probe));
  node->pool_ = std::make_unique<ThreadPool>(threads);
  node->client_ = std::make_unique<PeerClient>(o.rpc);
  DiscoveryOptions discovery = o.discovery;
  node->discovery_ = std::make_unique<DiscoveryService>(discovery);
  return node;
}

std::string Node::address() const { return absl::StrCat(advertise_host_, ":", grpc_port_); }

absl::Status Node::Start() {
  const NodeOptions& o = options_;
  service_ = MakeNodeService(*this);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  const std::string listen = absl::StrCat(o.grpc_host, ":", o.grpc_port);
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &bound_port);
  builder.SetMaxReceiveMessageSize(o.rpc.max_message_bytes);
  builder.SetMaxSendMessageSize(o.rpc.max_message_bytes);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for gRPC on ", listen, " (is the port in use?)"));
  }
  grpc_port_ = static_cast<uint16_t>(bound_port);
  if (!o.advertise_host.empty()) {
    advertise_host_ = o.advertise_host;
  } else if (o.grpc_host == "0.0.0.0" || o.grpc_host == "::" || o.grpc_host == "[::]") {
    advertise_host_ = FirstLanAddress();
  } else {
    advertise_host_ = o.grpc_host;
  }

  const ModelConfig& config = model_->config();
  StageOptions stage_options;
  stage_options.sessions = o.sessions;
  stage_options.forward_seconds = metrics_->forward_seconds;
  stage_ = std::make_unique<StageRuntime>(*model_, pool_.get(), this, node_id_, stage_options);
  origin_ = std::make_unique<OriginRegistry>(
      o.origin, this, node_id_, address(), config.n_embd,
      [this](const v1::PlanStage& stage) {
        v1::HealthReply reply;
        RINGLM_RETURN_IF_ERROR(client_->Health(Resolve(stage), &reply));
        if (reply.node_id() != stage.node_id()) {
          return absl::UnavailableError(absl::StrCat("answered as ", reply.node_id()));
        }
        return absl::OkStatus();
      },
      [this](const std::string& node_id) { cluster_->ReportUnreachable(node_id); }, metrics_.get());
  RINGLM_ASSIGN_OR_RETURN(WeightFootprint fp, ComputeFootprint(model_->file(), config));
  ModelFootprint footprint{config.n_layer, fp.max_layer_bytes, fp.embedding_bytes, fp.head_bytes};
  cluster_ = std::make_unique<ClusterView>(
      o.cluster, NodeDescriptor{node_id_, address(), caps_}, footprint, model_->fingerprint(),
      discovery_.get(), client_.get(),
      [this](std::shared_ptr<const ClusterSnapshot> s) { OnPartition(std::move(s)); });
  RINGLM_RETURN_IF_ERROR(RegisterGauges());
  if (o.metrics_port.has_value()) {
    metrics_server_ = std::make_unique<MetricsServer>(metrics_->registry);
    RINGLM_RETURN_IF_ERROR(metrics_server_->Start(o.metrics_host, *o.metrics_port));
    spdlog::info("metrics at http://{}:{}/metrics", advertise_host_, metrics_server_->port());
  }
  ready_ = true;

  if (o.discovery_enabled) {
    Announcement self;
    self.node_id = node_id_;
    self.instance_id = instance_id_;
    self.grpc_port = grpc_port_;
    self.model_fingerprint = model_->fingerprint();
    self.caps = caps_;
    self.grpc_host = o.advertise_host;
    RINGLM_RETURN_IF_ERROR(discovery_->Start(self));
  }
  cluster_->Start();
  spdlog::info(
      "node {} serving gRPC on {} (advertised {}), model {} ({} layers), {:.0f} MiB usable",
      node_id_, listen.substr(0, listen.rfind(':') + 1) + std::to_string(grpc_port_), address(),
      model_->path(), config.n_layer, caps_.usable_memory_bytes / 1048576.0);
  return absl::OkStatus();
}

absl::Status Node::RegisterGauges() {
  MetricsRegistry& r = metrics_->registry;
  RINGLM_RETURN_IF_ERROR(
      r.AddCallbackGauge("ringlm_peers", "Other nodes in the peer table.", {},
                         [this] { return static_cast<double>(discovery_->peers().size()); }));
  RINGLM_RETURN_IF_ERROR(
      r.AddCallbackGauge("ringlm_layers_held", "Layers this node runs.", {}, [this] {
        std::optional<LayerRange> range = stage_->range();
        return range ? range->size() : 0.0;
      }));
  RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
      "ringlm_kv_cache_bytes", "KV cache bytes held by idle sessions.", {},
      [this] { return static_cast<double>(stage_->sessions().Stats().used_bytes); }));
  RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
      "ringlm_kv_sessions", "KV cache sessions held.", {},
      [this] { return static_cast<double>(stage_->sessions().Stats().sessions.size()); }));
  RINGLM_RETURN_IF_ERROR(
      r.AddCallbackGauge("ringlm_stage_queue", "Steps waiting for this node's stage.", {},
                         [this] { return static_cast<double>(stage_->queued()); }));
  return r.AddCallbackGauge("ringlm_requests_active", "Requests this node started and runs.", {},
                            [this] { return static_cast<double>(origin_->active()); });
}

void Node::Stop() {
  if (stopped_.exchange(true)) return;
  if (metrics_server_) metrics_server_->Stop();
  if (discovery_) discovery_->Stop();
  if (cluster_) cluster_->Stop();
  if (origin_) origin_->Stop();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (stage_) stage_->Stop();
}

v1::NodeState Node::state() const { return state_.load(); }

absl::Status Node::WaitUntilServing(std::chrono::milliseconds patience) {
  if (!ready_) return absl::UnavailableError("the node is starting");
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (!cluster_->Converged()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::shared_ptr<const ClusterSnapshot> snap = cluster_->current();
      return absl::UnavailableError(
          snap->has_plan()
              ? "the nodes do not agree on a partition yet"
              : absl::StrCat("the cluster cannot serve the model yet: ", snap->status.message()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::OkStatus();
}

void Node::OnPartition(std::shared_ptr<const ClusterSnapshot> snapshot) {
  std::optional<LayerRange> mine;
  for (const Stage& s : snapshot->partition.stages) {
    if (s.node_id == node_id_) mine = LayerRange{s.first_layer, s.last_layer};
  }
  const std::optional<LayerRange> held = stage_->range();
  const bool changed = held.has_value() != mine.has_value() ||
                       (held && (held->first != mine->first || held->last != mine->last));
  if (changed) {
    spdlog::info("layers: {} -> {}", FormatRange(held), FormatRange(mine));
    if (absl::Status s = stage_->SetRange(mine); !s.ok()) {
      spdlog::error("cannot take layers {}: {}", FormatRange(mine), s.ToString());
      state_ = v1::NODE_STATE_STARTING;
      return;
    }
    absl::StatusOr<StageWeights> weights =
        mine ? model_->LoadStage(*mine) : absl::StatusOr<StageWeights>(absl::NotFoundError(""));
    if (held) {
      // Hand back the pages of layers this node no longer runs.
      if (absl::StatusOr<StageWeights> old = model_->LoadStage(*held); old.ok()) {
        model_->Release(*old, weights.ok() ? &*weights : nullptr);
      }
    }
    if (mine) {
      if (weights.ok()) {
        int last_decile = -1;
        model_->PageIn(*weights, [&](uint64_t done, uint64_t total) {
          const int decile = total == 0 ? 10 : static_cast<int>(done * 10 / total);
          if (decile != last_decile && (decile % 5 == 0)) {
            spdlog::info("paging in layers {}: {}% of {:.1f} MiB", FormatRange(mine), decile * 10,
                         total / 1048576.0);
          }
          last_decile = decile;
        });
      }
    }
  }
  if (!snapshot->status.ok()) {
    state_ = snapshot->status.code() == absl::StatusCode::kResourceExhausted
                 ? v1::NODE_STATE_NO_FIT
                 : v1::NODE_STATE_STARTING;
  } else {
    state_ = mine ? v1::NODE_STATE_READY : v1::NODE_STATE_IDLE;
  }
}

std::string Node::Resolve(const v1::PlanStage& stage) const {
  if (std::optional<std::string> a = cluster_->AddressOf(stage.node_id())) return *a;
  return stage.address();
}

absl::Status Node::StageStep(const v1::PlanStage& to, const v1::StageStepRequest& request) {
  if (to.node_id() == node_id_) return stage_->Enqueue(request);
  return client_->StageStep(Resolve(to), request);
}

absl::Status Node::DeliverToken(const v1::PlanStage& origin, const v1::DeliverTokenRequest& request,
                                v1::DeliverTokenReply* reply) {
  if (origin.node_id() == node_id_) {
    reply->set_cancel(origin_->Deliver(request));
    return absl::OkStatus();
  }
  return client_->DeliverToken(Resolve(origin), request, reply);
}

absl::Status Node::Cancel(const v1::PlanStage& to, const std::string& request_id) {
  if (to.node_id() == node_id_) {
    stage_->Cancel(request_id);
    return absl::OkStatus();
  }
  return client_->Cancel(Resolve(to), request_id);
}

absl::Status Node::DropSession(const v1::PlanStage& to, const std::string& session_id) {
  if (to.node_id() == node_id_) return stage_->sessions().Drop(session_id).status();
  return client_->DropSession(Resolve(to), session_id);
}

}  // namespace ringlm
