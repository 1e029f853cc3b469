#include "daemon/node.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/model_fetch/model_bootstrap.h"
#include "daemon/stage/step_validator.h"
#include "discovery/node_identity.h"
#include "inference/ops/cpu_target.h"
#include "partition/device_probe.h"
#include "security/crypto.h"
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
  std::string model_path = o.model_path;
  std::string expected_fingerprint;
  if (o.model_from_peers) {
    if (!model_path.empty()) {
      return absl::InvalidArgumentError("--model and --model-from-peers exclude each other");
    }
    RINGLM_ASSIGN_OR_RETURN(BootstrappedModel b, node->Bootstrap(state_dir));
    node->model_cache_ = std::move(b.cache);
    model_path = node->model_cache_->gguf_path();
    expected_fingerprint = b.fingerprint;
  }
  ModelOptions model_options;
  model_options.layers = LayerRange{0, 0};  // ranges come from the partition
  model_options.context_size = o.context_size;
  RINGLM_ASSIGN_OR_RETURN(node->model_, Model::Load(model_path, model_options));
  if (node->model_cache_ != nullptr) {
    if (node->model_->fingerprint() != expected_fingerprint) {
      // A member sent a header that is not the model it announced.
      const std::string dir = node->model_cache_->dir();
      node->model_.reset();
      node->model_cache_.reset();
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
      return absl::DataLossError(
          "the model header fetched from a member does not match the fingerprint the members "
          "announce; it was discarded (start again to fetch it anew)");
    }
    node->share_ = ModelShare::ForCache(node->model_cache_, node->model_->fingerprint());
  } else {
    RINGLM_ASSIGN_OR_RETURN(
        node->share_, ModelShare::ForFile(model_path, node->model_->file(),
                                          node->model_->fingerprint(), state_dir + "/manifests"));
  }
  const int threads = o.threads > 0 ? o.threads : DefaultThreadCount();
  ProbeOptions probe;
  probe.memory_override_bytes = o.memory_bytes;
  probe.threads = static_cast<uint32_t>(threads);
  probe.measure_gflops = o.measure_gflops;
  RINGLM_ASSIGN_OR_RETURN(node->caps_, ProbeDevice(probe));
  node->pool_ = std::make_unique<ThreadPool>(threads);
  spdlog::info("compute: {} threads, {} kernels", threads, ActiveCpuTargetName());
  if (o.compute_turns == NodeOptions::ComputeTurns::kOn ||
      (o.compute_turns == NodeOptions::ComputeTurns::kAuto && threads >= DefaultThreadCount())) {
    std::string path = o.compute_lock_file;
    if (path.empty()) {
      RINGLM_ASSIGN_OR_RETURN(path, ComputeLock::DefaultPath());
    }
    RINGLM_ASSIGN_OR_RETURN(node->compute_lock_, ComputeLock::Open(path));
  }
  // The largest message a well-formed step can be, and no larger: a flood
  // of huge messages is refused by gRPC before it is buffered.
  StepLimits step_limits;
  step_limits.n_embd = node->model_->config().n_embd;
  step_limits.max_step_tokens = o.origin.max_chunk_tokens;
  node->options_.rpc.max_message_bytes =
      static_cast<int>(std::min<uint64_t>(o.rpc.max_message_bytes, MaxStepBytes(step_limits)));
  node->client_ = std::make_unique<PeerClient>(o.rpc, node->identity_, node->node_id_);
  DiscoveryOptions discovery = o.discovery;
  discovery.mac_key = node->announce_mac_key_;
  node->discovery_ = std::make_unique<DiscoveryService>(discovery);
  return node;
}

absl::StatusOr<BootstrappedModel> Node::Bootstrap(const std::string& state_dir) {
  const NodeOptions& o = options_;
  ModelBootstrapOptions b;
  b.state_dir = state_dir;
  b.node_id = node_id_;
  b.discovery_enabled = o.discovery_enabled;
  b.discovery = o.discovery;
  b.discovery.mac_key = announce_mac_key_;
  b.static_peers = o.cluster.static_peers;
  b.fingerprint = o.model_fingerprint;
  b.patience = o.model_wait;
  PeerClient client(o.rpc, identity_, node_id_);
  return BootstrapModel(b, client);
}

std::string Node::address() const { return absl::StrCat(advertise_host_, ":", grpc_port_); }

absl::Status Node::Start() {
  const NodeOptions& o = options_;
  service_ = MakeNodeService(*this);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  const std::string listen = absl::StrCat(o.grpc_host, ":", o.grpc_port);
  builder.AddListeningPort(
      listen, identity_ ? ServerCredentials(*identity_) : grpc::InsecureServerCredentials(),
      &bound_port);
  builder.SetMaxReceiveMessageSize(o.rpc.max_message_bytes);
  // Replies may be larger: model chunks and manifests (kMaxModelMessageBytes).
  builder.SetMaxSendMessageSize(std::max(o.rpc.max_message_bytes, kMaxModelMessageBytes));
  // What one connection may make this node hold: a bounded number of calls,
  // and a flow-control window that does not grow towards a peer that sends
  // messages it will refuse (BDP probing would let it grow to many MiB).
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 64);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // gRPC binds with SO_REUSEPORT by default: a second daemon on this port
  // would bind too and take half the calls. A taken port is an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
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
  stage_options.batch_steps = metrics_->batch_steps;
  stage_options.batch_tokens = metrics_->batch_tokens;
  stage_options.queue_wait_seconds = metrics_->queue_wait_seconds;
  stage_options.turn_wait_seconds = metrics_->turn_wait_seconds;
  stage_options.compute_lock = compute_lock_.get();
  stage_options.max_step_tokens = o.origin.max_chunk_tokens;
  transport_ = std::make_unique<MemberTransport>(
      node_id_, client_.get(), [this](const std::string& id) { return cluster_->AddressOf(id); });
  stage_ = std::make_unique<StageRuntime>(
      *model_, pool_.get(), transport_.get(), node_id_,
      [this](const std::string& id) { return cluster_->IsMember(id); }, stage_options);
  OriginClusterHooks hooks;
  hooks.health = [this](const v1::PlanStage& stage) {
    RINGLM_ASSIGN_OR_RETURN(std::string address, transport_->Resolve(stage.node_id()));
    v1::HealthReply reply;
    std::string spki;
    RINGLM_RETURN_IF_ERROR(client_->Health(address, &reply, &spki));
    if (reply.node_id() != stage.node_id() || !IsPinnedMember(stage.node_id(), spki)) {
      return absl::UnavailableError(absl::StrCat("answered as another node"));
    }
    return absl::OkStatus();
  };
  hooks.on_unreachable = [this](const std::string& node_id) {
    cluster_->ReportUnreachable(node_id);
  };
  hooks.await_plan = [this](const std::vector<std::string>& avoid,
                            std::chrono::steady_clock::time_point deadline) {
    return AwaitPlan(avoid, deadline);
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
  if (model_cache_ != nullptr) {
    LayerFetcherOptions f;
    f.fingerprint = model_->fingerprint();
    f.cache_budget_bytes = o.model_cache_bytes;
    fetcher_ = std::make_unique<LayerFetcher>(
        f, model_cache_.get(), client_.get(), metrics_->fetch,
        [this](std::shared_ptr<const ClusterSnapshot> s) { TakeRange(s); });
  }
  RINGLM_ASSIGN_OR_RETURN(WeightFootprint fp, ComputeFootprint(model_->file(), config));
  ModelFootprint footprint{config.n_layer, fp.max_layer_bytes, fp.embedding_bytes, fp.head_bytes};
  cluster_ = std::make_unique<ClusterView>(
      o.cluster, NodeDescriptor{node_id_, address(), caps_}, footprint, model_->fingerprint(),
      discovery_.get(), client_.get(),
      [this](std::shared_ptr<const ClusterSnapshot> s) { OnPartition(std::move(s)); });
  RINGLM_RETURN_IF_ERROR(RegisterGauges());
  if (o.metrics_port.has_value()) {
    metrics_server_ = std::make_unique<MetricsServer>(metrics_->registry);
    absl::Status s = metrics_server_->Start(o.metrics_host, *o.metrics_port);
    if (!s.ok() && o.metrics_port_is_default) {
      spdlog::warn("{}; serving /metrics on a free port instead", std::string(s.message()));
      s = metrics_server_->Start(o.metrics_host, 0);
    }
    RINGLM_RETURN_IF_ERROR(s);
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
    if (identity_) self.spki_fingerprint = identity_->spki_fingerprint;
    RINGLM_RETURN_IF_ERROR(discovery_->Start(self));
  }
  cluster_->Start();
  spdlog::info(
      "node {} serving gRPC ({}) on {} (advertised {}), model {} ({} layers), {:.0f} MiB usable",
      node_id_, secure() ? "mutual TLS, cluster " + cluster_id_ : "INSECURE",
      listen.substr(0, listen.rfind(':') + 1) + std::to_string(grpc_port_), address(),
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
      "ringlm_kv_cache_bytes", "KV cache bytes held, each shared block once.", {},
      [this] { return static_cast<double>(stage_->sessions().Stats().used_bytes); }));
  RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
      "ringlm_kv_cache_logical_bytes", "KV cache bytes the sessions would hold without sharing.",
      {}, [this] { return static_cast<double>(stage_->sessions().Stats().logical_bytes); }));
  for (const auto& blocks : {std::pair{"used", &SessionStoreStats::blocks},
                             {"shared", &SessionStoreStats::shared_blocks}}) {
    RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
        "ringlm_kv_blocks", "KV blocks alive, and of them those more than one session holds.",
        {{"state", blocks.first}}, [this, field = blocks.second] {
          return static_cast<double>(stage_->sessions().Stats().*field);
        }));
  }
  RINGLM_RETURN_IF_ERROR(r.AddCallbackCounter(
      "ringlm_kv_blocks_evicted_total", "KV blocks freed by evicting idle sessions.", {},
      [this] { return static_cast<double>(stage_->sessions().Stats().evicted_blocks); }));
  RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
      "ringlm_kv_sessions", "KV cache sessions held.", {},
      [this] { return static_cast<double>(stage_->sessions().Stats().sessions.size()); }));
  RINGLM_RETURN_IF_ERROR(
      r.AddCallbackGauge("ringlm_stage_queue", "Steps waiting for this node's stage.", {},
                         [this] { return static_cast<double>(stage_->queued()); }));
  RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
      "ringlm_stage_queue_bytes", "Bytes of the steps waiting for this node's stage.", {},
      [this] { return static_cast<double>(stage_->queued_bytes()); }));
  RINGLM_RETURN_IF_ERROR(
      r.AddCallbackGauge("ringlm_grpc_channels", "Open channels to other nodes.", {},
                         [this] { return static_cast<double>(client_->channels()); }));
  RINGLM_RETURN_IF_ERROR(
      r.AddCallbackGauge("ringlm_generate_calls", "Generate calls running on this node.", {},
                         [this] { return static_cast<double>(generate_calls_.load()); }));
  // Why announcements were dropped (monotonic counts since start).
  using C = DiscoveryCounters;
  const std::pair<const char*, uint64_t C::*> reasons[] = {
      {"malformed", &C::ignored_malformed},
      {"oversized", &C::ignored_oversized},
      {"bad_mac", &C::ignored_bad_mac},
      {"other_version", &C::ignored_other_version},
      {"stale", &C::ignored_stale},
      {"replayed", &C::ignored_replayed},
      {"reordered", &C::ignored_reordered},
      {"other_model", &C::ignored_other_model},
      {"duplicate_id", &C::ignored_duplicate_id},
      {"id_conflict", &C::ignored_id_conflict},
      {"table_full", &C::ignored_table_full}};
  for (const auto& [reason, field] : reasons) {
    RINGLM_RETURN_IF_ERROR(r.AddCallbackGauge(
        "ringlm_discovery_ignored", "Announcements dropped since start, by reason.",
        {{"reason", reason}},
        [this, field = field] { return static_cast<double>(discovery_->counters().*field); }));
  }
  return r.AddCallbackGauge("ringlm_requests_active", "Requests this node started and runs.", {},
                            [this] { return static_cast<double>(origin_->active()); });
}

void Node::Stop() {
  if (stopped_.exchange(true)) return;
  if (metrics_server_) metrics_server_->Stop();
  if (discovery_) discovery_->Stop();
  if (fetcher_) fetcher_->Stop();
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

absl::StatusOr<v1::Plan> Node::AwaitPlan(const std::vector<std::string>& avoid,
                                         std::chrono::steady_clock::time_point deadline) const {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    if (stopped_) return absl::UnavailableError("the node is shutting down");
    std::shared_ptr<const ClusterSnapshot> snap = cluster_->current();
    const bool clear = std::none_of(
        snap->partition.stages.begin(), snap->partition.stages.end(), [&](const Stage& s) {
          return std::find(avoid.begin(), avoid.end(), s.node_id) != avoid.end();
        });
    // Without the failed nodes, the rest cannot hold the model: no wait
    // helps (until a node joins), and the message gives the shortfall.
    if (clear && snap->status.code() == absl::StatusCode::kResourceExhausted) return snap->status;
    if (clear && cluster_->Converged() && cluster_->current() == snap) return snap->plan;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "the nodes did not agree on a new partition within ",
          std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count(), " ms",
          snap->status.ok() ? "" : absl::StrCat(" (", snap->status.message(), ")")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

namespace {

// This node's layers in `snapshot`, if any.
std::optional<LayerRange> RangeOf(const ClusterSnapshot& snapshot, const std::string& node_id) {
  for (const Stage& s : snapshot.partition.stages) {
    if (s.node_id == node_id) return LayerRange{s.first_layer, s.last_layer};
  }
  return std::nullopt;
}

}  // namespace

std::vector<size_t> Node::TensorIndices(const StageWeights& weights) const {
  std::vector<size_t> indices;
  const GgufTensorInfo* first = model_->file().tensors().data();
  for (const GgufTensorInfo* t : weights.tensors())
    indices.push_back(static_cast<size_t>(t - first));
  return indices;
}

std::vector<size_t> Node::MissingTensors(LayerRange range) const {
  std::vector<size_t> missing;
  absl::StatusOr<StageWeights> weights = model_->LoadStage(range);
  if (!weights.ok()) return missing;  // TakeRange reports it
  for (size_t index : TensorIndices(*weights)) {
    if (!model_cache_->Holds(index)) missing.push_back(index);
  }
  return missing;
}

void Node::OnPartition(std::shared_ptr<const ClusterSnapshot> snapshot) {
  {
    absl::MutexLock lock(&range_mu_);
    latest_epoch_ = snapshot->epoch;
  }
  const std::optional<LayerRange> mine = RangeOf(*snapshot, node_id_);
  if (fetcher_ != nullptr) {
    std::vector<size_t> missing = mine ? MissingTensors(*mine) : std::vector<size_t>{};
    if (!missing.empty()) {
      // The plan waits: health replies keep naming the old partition until
      // the tensors are in and TakeRange applies this one.
      state_ = v1::NODE_STATE_FETCHING;
      fetcher_->Request(snapshot, *mine, std::move(missing));
      return;
    }
    fetcher_->Cancel();
  }
  TakeRange(snapshot);
}

void Node::TakeRange(const std::shared_ptr<const ClusterSnapshot>& snapshot) {
  absl::MutexLock lock(&range_mu_);
  if (snapshot->epoch != latest_epoch_) return;  // a newer partition came meanwhile
  const std::optional<LayerRange> mine = RangeOf(*snapshot, node_id_);
  const std::optional<LayerRange> held = stage_->range();
  const bool changed = held.has_value() != mine.has_value() ||
                       (held && (held->first != mine->first || held->last != mine->last));
  if (changed) {
    spdlog::info("layers: {} -> {}", FormatRange(held), FormatRange(mine));
    auto handover = [&](const StageWeights* taken, const StageWeights* left) {
      // Hand back the pages of layers this node no longer runs.
      if (left != nullptr) model_->Release(*left, taken);
      if (taken == nullptr) return;
      if (model_cache_ != nullptr) model_cache_->Touch(TensorIndices(*taken));
      int last_decile = -1;
      model_->PageIn(*taken, [&](uint64_t done, uint64_t total) {
        const int decile = total == 0 ? 10 : static_cast<int>(done * 10 / total);
        if (decile != last_decile && (decile % 5 == 0)) {
          spdlog::info("paging in layers {}: {}% of {:.1f} MiB", FormatRange(mine), decile * 10,
                       total / 1048576.0);
        }
        last_decile = decile;
      });
    };
    if (absl::Status s = stage_->SetRange(mine, handover); !s.ok()) {
      spdlog::error("cannot take layers {}: {}", FormatRange(mine), s.ToString());
      state_ = v1::NODE_STATE_STARTING;
      return;
    }
  }
  cluster_->MarkApplied(snapshot->partition_key);
  if (!snapshot->status.ok()) {
    state_ = snapshot->status.code() == absl::StatusCode::kResourceExhausted
                 ? v1::NODE_STATE_NO_FIT
                 : v1::NODE_STATE_STARTING;
  } else {
    state_ = mine ? v1::NODE_STATE_READY : v1::NODE_STATE_IDLE;
  }
}

bool Node::IsPinnedMember(const std::string& node_id, const std::string& spki) const {
  const std::string own = identity_ ? identity_->spki_fingerprint : "";
  if (node_id == node_id_) return ConstantTimeEquals(spki, own);
  std::optional<PeerInfo> peer = discovery_->peers().Find(node_id);
  return peer.has_value() && peer->verified && ConstantTimeEquals(spki, peer->spki_fingerprint);
}

bool Node::BeginGenerateCall() {
  if (generate_calls_.fetch_add(1) < options_.max_generate_calls) return true;
  generate_calls_.fetch_sub(1);
  return false;
}

void Node::EndGenerateCall() { generate_calls_.fetch_sub(1); }

}  // namespace ringlm
