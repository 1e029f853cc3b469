#include "daemon/node.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/cluster_readiness.h"
#include "daemon/model_fetch/model_bootstrap.h"
#include "daemon/node_gauges.h"
#include "daemon/outsider_gate.h"
#include "daemon/stage/step_validator.h"
#include "discovery/node_identity.h"
#include "inference/ops/cpu_target.h"
#include "partition/device_probe.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

// Whether binding `host` listens on every interface (or the default one).
bool IsAnyAddress(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

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

}  // namespace

Node::Node(NodeOptions options) : options_(std::move(options)) {}

Node::~Node() { Stop(); }

absl::StatusOr<std::unique_ptr<Node>> Node::Create(NodeOptions options) {
  std::unique_ptr<Node> node(new Node(std::move(options)));
  const NodeOptions& o = node->options_;
  const std::string state_dir = o.state_dir.empty() ? DefaultStateDir() : o.state_dir;
  // Who this node is, and whether it holds the cluster key.
  RINGLM_ASSIGN_OR_RETURN(node->node_id_, LoadOrCreateNodeId(state_dir));
  node->instance_id_ = RandomU64();
  if (o.insecure) {
    node->announce_mac_key_ = ClusterKey::InsecureAnnounceMacKey();
  } else {
    if (o.cluster_key_file.empty()) {
      return absl::FailedPreconditionError(
          "no cluster key: pass --cluster-key FILE (make one with `ringlm keygen --out FILE`), "
          "or --insecure to run an open cluster");
    }
    RINGLM_ASSIGN_OR_RETURN(ClusterKey key, ClusterKey::LoadFile(o.cluster_key_file));
    RINGLM_ASSIGN_OR_RETURN(node->identity_, MakeNodeIdentity(key, state_dir, node->node_id_));
    node->cluster_id_ = key.ClusterId();
    node->announce_mac_key_ = key.AnnounceMacKey();
  }
  RINGLM_ASSIGN_OR_RETURN(node->metrics_, NodeMetrics::Create());
  RINGLM_RETURN_IF_ERROR(node->OpenModel(state_dir));
  if (node->options_.names.empty()) {
    node->options_.names.push_back(std::filesystem::path(node->model_->path()).stem().string());
  }
  // Peers' daemons hand this ring's calls to their ring of the same model.
  node->options_.rpc.model_key = node->model_->fingerprint();
  // The machine: memory and compute, the pool, and the turns at the cores.
  const int threads = o.threads > 0 ? o.threads : DefaultThreadCount();
  ProbeOptions probe;
  probe.memory_override_bytes = o.memory_bytes;
  probe.threads = static_cast<uint32_t>(threads);
  probe.measure_speed = o.measure_speed;
  probe.speed_cache_path = state_dir + "/speed";
  SpeedSource speed_source = SpeedSource::kNotMeasured;
  RINGLM_ASSIGN_OR_RETURN(node->caps_, ProbeDevice(probe, &speed_source));
  node->caps_.placement = o.placement;
  node->machine_memory_bytes_ = node->caps_.usable_memory_bytes;
  RINGLM_ASSIGN_OR_RETURN(node->caps_.usable_memory_bytes,
                          o.memory_part.Of(node->machine_memory_bytes_));
  spdlog::info("measured: {:.1f} GFLOPS, {:.1f} GB/s read{}; placement by {}",
               node->caps_.matmul_gflops, node->caps_.read_gbps,
               speed_source == SpeedSource::kCached
                   ? absl::StrCat(" (kept in ", probe.speed_cache_path,
                                  " since an earlier start; delete it to measure again)")
                   : "",
               o.placement == Placement::kSpeed ? "speed" : "memory");
  node->pool_ = std::make_unique<ThreadPool>(threads);
  spdlog::info("compute: {} threads, {} kernels", threads, ActiveCpuTargetName());
  if (!o.draft_model_path.empty()) {
    RINGLM_ASSIGN_OR_RETURN(node->draft_model_,
                            DraftModel::Load(o.draft_model_path, node->model_->tokenizer(),
                                             node->model_->context_size(), node->pool_.get()));
    spdlog::info("draft model {}: {} layers, the model's vocabulary", o.draft_model_path,
                 node->draft_model_->model().config().n_layer);
  }
  if (o.compute_turns == NodeOptions::ComputeTurns::kOn ||
      (o.compute_turns == NodeOptions::ComputeTurns::kAuto && threads >= DefaultThreadCount())) {
    std::string path = o.compute_lock_file;
    if (path.empty()) {
      RINGLM_ASSIGN_OR_RETURN(path, ComputeLock::DefaultPath());
    }
    RINGLM_ASSIGN_OR_RETURN(node->compute_lock_, ComputeLock::Open(path));
  }
  // The network: other nodes' services, and the peer table.
  // The largest message a well-formed step can be, and no larger. gRPC 1.51
  // checks it once a message is whole, so a peer without a certificate is
  // refused at its headers instead (OutsiderGate).
  StepLimits step_limits;
  step_limits.n_embd = node->model_->config().n_embd;
  step_limits.max_step_tokens = o.origin.max_chunk_tokens;
  node->options_.rpc.max_message_bytes =
      static_cast<int>(std::min<uint64_t>(o.rpc.max_message_bytes, MaxStepBytes(step_limits)));
  node->client_ = std::make_unique<PeerClient>(o.rpc, node->identity_, node->node_id_);
  DiscoveryOptions discovery = o.discovery;
  discovery.mac_key = node->announce_mac_key_;
  node->discovery_ = std::make_unique<DiscoveryService>(discovery);
  node->pinned_members_ = std::make_unique<PinnedMembers>(
      node->node_id_, node->identity_ ? node->identity_->spki_fingerprint : "",
      &node->discovery_->peers());
  node->generate_slots_ = std::make_unique<CallSlots>(o.max_generate_calls);
  return node;
}

absl::Status Node::OpenModel(const std::string& state_dir) {
  const NodeOptions& o = options_;
  std::string model_path = o.model_path;
  std::string expected_fingerprint;
  if (o.model_from_peers) {
    if (!model_path.empty()) {
      return absl::InvalidArgumentError("--model and --model-from-peers exclude each other");
    }
    // Finds the cluster's model and opens the partial copy.
    ModelBootstrapOptions b;
    b.state_dir = state_dir;
    b.node_id = node_id_;
    b.discovery_enabled = o.discovery_enabled;
    b.discovery = o.discovery;
    b.discovery.mac_key = announce_mac_key_;
    b.static_peers = o.cluster.static_peers;
    b.fingerprint = o.model_fingerprint;
    b.patience = o.model_wait;
    // Members serving several models answer for the one named (ring_server.h).
    RpcOptions rpc = o.rpc;
    rpc.model_key = o.model_fingerprint;
    PeerClient client(rpc, identity_, node_id_);
    RINGLM_ASSIGN_OR_RETURN(BootstrappedModel bootstrapped, BootstrapModel(b, client));
    model_cache_ = std::move(bootstrapped.cache);
    model_path = model_cache_->gguf_path();
    expected_fingerprint = bootstrapped.fingerprint;
  }
  ModelOptions model_options;
  model_options.layers = LayerRange{0, 0};  // ranges come from the partition
  model_options.context_size = o.context_size;
  RINGLM_ASSIGN_OR_RETURN(model_, Model::Load(model_path, model_options));
  if (model_cache_ == nullptr) {
    RINGLM_ASSIGN_OR_RETURN(share_,
                            ModelShare::ForFile(model_path, model_->file(), model_->fingerprint(),
                                                state_dir + "/manifests"));
    return absl::OkStatus();
  }
  if (model_->fingerprint() != expected_fingerprint) {
    // A member sent a header that is not the model it announced.
    const std::string dir = model_cache_->dir();
    model_.reset();
    model_cache_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    return absl::DataLossError(
        "the model header fetched from a member does not match the fingerprint the members "
        "announce; it was discarded (start again to fetch it anew)");
  }
  share_ = ModelShare::ForCache(model_cache_, model_->fingerprint());
  return absl::OkStatus();
}

std::string Node::address() const { return absl::StrCat(advertise_host_, ":", grpc_port_.load()); }

void Node::MakeRing() {
  const NodeOptions& o = options_;
  const ModelConfig& config = model_->config();
  // This node's stage and origin reach other nodes (and each other) through
  // the transport. The cluster view they consult comes once the server is
  // bound; nothing calls them before the node is ready.
  transport_ = std::make_unique<MemberTransport>(
      node_id_, client_.get(), [this](const std::string& id) { return cluster_->AddressOf(id); });
  StageOptions stage_options;
  stage_options.sessions = o.sessions;
  stage_options.forward_seconds = metrics_->forward_seconds;
  stage_options.steps_ahead = metrics_->steps_ahead;
  stage_options.steps_voided = metrics_->steps_voided;
  stage_options.batch_steps = metrics_->batch_steps;
  stage_options.batch_tokens = metrics_->batch_tokens;
  stage_options.queue_wait_seconds = metrics_->queue_wait_seconds;
  stage_options.turn_wait_seconds = metrics_->turn_wait_seconds;
  stage_options.compute_lock = compute_lock_.get();
  stage_options.draft_model = draft_model_.get();
  stage_options.max_step_tokens = o.origin.max_chunk_tokens;
  stage_ = std::make_unique<StageRuntime>(
      *model_, pool_.get(), transport_.get(), node_id_,
      [this](const std::string& id) { return cluster_->IsMember(id); }, stage_options);
  OriginClusterHooks hooks;
  hooks.health = [this](const v1::PlanStage& stage) {
    RINGLM_ASSIGN_OR_RETURN(std::string address, transport_->Resolve(stage.node_id()));
    v1::HealthReply reply;
    std::string spki;
    RINGLM_RETURN_IF_ERROR(client_->Health(address, &reply, &spki));
    if (reply.node_id() != stage.node_id() ||
        !pinned_members_->IsPinnedMember(stage.node_id(), spki)) {
      return absl::UnavailableError(absl::StrCat("answered as another node"));
    }
    // Restarted since the plan was made: the request's KV there is gone.
    if (stage.instance_id() != 0 && reply.instance_id() != stage.instance_id()) {
      return RestartedSincePlan();
    }
    return absl::OkStatus();
  };
  hooks.on_unreachable = [this](const std::string& node_id) {
    cluster_->ReportUnreachable(node_id);
  };
  hooks.await_plan = [this](const std::vector<std::string>& avoid,
                            std::chrono::steady_clock::time_point deadline) {
    return AwaitPlanWithout(*cluster_, avoid, deadline, stopped_);
  };
  hooks.serving_plan = [this]() -> absl::StatusOr<v1::Plan> {
    RINGLM_RETURN_IF_ERROR(WaitUntilServing());
    return cluster_->current()->plan;
  };
  const OriginModel origin_model{.n_embd = config.n_embd,
                                 .context_size = model_->context_size(),
                                 .n_vocab = static_cast<uint32_t>(model_->tokenizer().n_vocab())};
  origin_ = std::make_unique<OriginRegistry>(o.origin, transport_.get(), node_id_, origin_model,
                                             std::move(hooks), &metrics_->origin);
  transport_->Attach(stage_.get(), origin_.get());
  // The layers: each partition's range, fetched first without the full file.
  LayerRangeKeeperParts range;
  range.node_id = node_id_;
  range.model = model_.get();
  range.stage = stage_.get();
  range.cache = model_cache_.get();
  range.fetch.fingerprint = model_->fingerprint();
  range.fetch.cache_budget_bytes = o.model_cache_bytes;
  range.client = client_.get();
  range.fetch_metrics = metrics_->fetch;
  range.mark_applied = [this](const std::string& key) { cluster_->MarkApplied(key); };
  range_keeper_ = std::make_unique<LayerRangeKeeper>(std::move(range));
}

absl::Status Node::Start(RingServer* server) {
  const NodeOptions& o = options_;
  const ModelConfig& config = model_->config();
  MakeRing();
  RINGLM_RETURN_IF_ERROR(Register(server));

  // The cluster: who is a member, and the partition of the layers.
  RINGLM_ASSIGN_OR_RETURN(WeightFootprint fp, ComputeFootprint(model_->file(), config));
  // Each layer's own tensors (a dense leading layer weighs less than a MoE
  // one). From the model file, the same on every node, so every node plans
  // alike. KV is not charged per layer: a stage's KV is its --kv-cache-mb
  // budget whatever its layers, and --ctx is neither announced nor the same
  // on every node.
  ModelFootprint footprint{config.n_layer, fp.max_layer_bytes, fp.embedding_bytes, fp.head_bytes,
                           fp.layer_bytes};
  layer_bytes_ = fp.layer_bytes;
  cluster_ = std::make_unique<ClusterView>(
      o.cluster, NodeDescriptor{node_id_, address(), caps_}, footprint, model_->fingerprint(),
      discovery_.get(), client_.get(),
      [keeper = range_keeper_.get()](std::shared_ptr<const ClusterSnapshot> s) {
        keeper->OnPartition(std::move(s));
      });
  RINGLM_RETURN_IF_ERROR(
      RegisterNodeGauges(metrics_->registry, {.discovery = discovery_.get(),
                                              .stage = stage_.get(),
                                              .client = client_.get(),
                                              .generate_slots = generate_slots_.get(),
                                              .origin = origin_.get()}));
  ready_ = true;

  if (o.discovery_enabled) {
    Announcement self;
    self.node_id = node_id_;
    self.instance_id = instance_id_;
    self.grpc_port = grpc_port_;
    self.model_fingerprint = model_->fingerprint();
    self.caps = caps_;
    self.grpc_host = o.advertise_host;
    if (identity_) self.spki_fingerprint = identity_->spki_fingerprint;
    RINGLM_RETURN_IF_ERROR(discovery_->Start(self));
  }
  cluster_->Start();
  spdlog::info(
      "node {} serving gRPC ({}) on {}:{} (advertised {}), model {} ({} layers), {:.0f} MiB "
      "usable",
      node_id_, identity_ ? "mutual TLS, cluster " + cluster_id_ : "INSECURE", o.grpc_host,
      grpc_port_.load(), address(), model_->path(), config.n_layer,
      caps_.usable_memory_bytes / 1048576.0);
  return absl::OkStatus();
}

absl::Status Node::Register(RingServer* server) {
  service_ = MakeNodeService(ServiceParts());
  // The fingerprint is how peers name the model (RpcOptions.model_key); the
  // names are how clients do.
  RINGLM_RETURN_IF_ERROR(server->Add(model_->fingerprint(), options_.names, service_.get()));
  server_ = server;
  grpc_port_ = server->port();
  const NodeOptions& o = options_;
  if (!o.advertise_host.empty()) {
    advertise_host_ = o.advertise_host;
  } else if (IsAnyAddress(o.grpc_host)) {
    advertise_host_ = FirstLanAddress();
  } else {
    advertise_host_ = o.grpc_host;
  }
  return absl::OkStatus();
}

NodeServiceParts Node::ServiceParts() {
  NodeServiceParts p;
  p.node_id = node_id_;
  p.instance_id = instance_id_;
  p.capabilities = caps_;
  p.secure = identity_.has_value();
  p.security_mode = security_mode();
  p.cluster_id = cluster_id_;
  p.api_key = options_.api_key;
  p.model = model_.get();
  p.stage = stage_.get();
  p.origin = origin_.get();
  p.share = share_.get();
  p.share_metrics = metrics_->share;
  p.peers = &discovery_->peers();
  p.metrics = &metrics_->registry;
  p.generate_slots = generate_slots_.get();
  p.ready = [this] { return ready_.load(); };
  p.state = [keeper = range_keeper_.get()] { return keeper->state(); };
  p.grpc_port = [this] { return grpc_port_.load(); };
  p.address = [this] { return address(); };
  p.api_address = [this] {
    absl::MutexLock lock(&api_mu_);
    return api_address_;
  };
  p.is_pinned_member = [members = pinned_members_.get()](const std::string& id,
                                                         const std::string& spki) {
    return members->IsPinnedMember(id, spki);
  };
  // The cluster view exists by the time the node is ready, which the
  // service checks before these.
  p.is_member = [this](const std::string& id) { return cluster_->IsMember(id); };
  p.cluster = [this] { return cluster_->current(); };
  p.applied_partition = [this] { return cluster_->applied_partition(); };
  p.served_models = [this] { return server_->ModelNames(); };
  return p;
}

void Node::Stop() {
  if (stopped_.exchange(true)) return;
  if (discovery_) discovery_->Stop();
  if (range_keeper_) range_keeper_->Stop();
  if (cluster_) cluster_->Stop();
  if (origin_) origin_->Stop();
  // Calls for this model get NOT_FOUND from now on; the ones running find
  // the stage stopped.
  if (server_) server_->Remove(service_.get());
  if (stage_) stage_->Stop();
}

size_t Node::Drain(std::chrono::milliseconds patience) {
  origin_->StopAccepting(
      absl::StrCat("the model '", options_.names.front(), "' is being removed from this node"));
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (origin_->active() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return origin_->active();
}

void Node::ReleaseMemory() {
  // Twice: the range before the last change is kept for requests on it.
  for (int i = 0; i < 2; ++i) (void)stage_->SetRange(std::nullopt);
  for (const GgufTensorInfo& t : model_->file().tensors()) model_->file().Release(t);
}

ClusterBackendParts Node::BackendParts() {
  ClusterBackendParts p;
  p.origin = origin_.get();
  p.model = model_.get();
  p.cluster = [this] { return cluster_->current(); };
  p.serving = [this] { return WaitUntilServing(std::chrono::milliseconds(0)); };
  p.node_id = node_id_;
  p.address = [this] { return address(); };
  p.usable_memory_bytes = caps_.usable_memory_bytes;
  p.security_mode = security_mode();
  p.layer_bytes = layer_bytes_;  // as the partition charges them (Start)
  p.own_metrics = [this] { return metrics_->registry.RenderPrometheusText(); };
  p.own_state = [this] { return range_keeper_->state(); };
  // Its own client: the page polls peers for their figures with a short
  // deadline (at most a second), not the control calls' longer one.
  RpcOptions rpc = options_.rpc;
  rpc.control_timeout = std::min(rpc.control_timeout, std::chrono::milliseconds(1000));
  auto client = std::make_shared<PeerClient>(rpc, identity_, node_id_);
  p.peer_topology = [client](const std::string& address) -> absl::StatusOr<v1::TopologyReply> {
    v1::TopologyReply reply;
    RINGLM_RETURN_IF_ERROR(client->Topology(address, &reply));
    return reply;
  };
  return p;
}

void Node::SetApiAddress(const std::string& host, uint16_t port) {
  std::string reachable = host;
  if (IsAnyAddress(host)) reachable = advertise_host_;
  if (reachable.find(':') != std::string::npos) reachable = absl::StrCat("[", reachable, "]");
  absl::MutexLock lock(&api_mu_);
  api_address_ = absl::StrCat(reachable, ":", port);
}

absl::Status Node::WaitUntilServing(std::chrono::milliseconds patience) {
  if (!ready_) return absl::UnavailableError("the node is starting");
  return WaitUntilConverged(*cluster_, patience);
}

}  // namespace ringlm
