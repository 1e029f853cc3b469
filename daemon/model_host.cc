#include "daemon/model_host.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "daemon/stage/step_validator.h"
#include "spdlog/spdlog.h"

namespace ringlm {

absl::StatusOr<std::unique_ptr<ModelHost>> ModelHost::Create(NodeOptions base,
                                                             std::vector<NodeOptions> models) {
  if (models.empty()) return absl::InvalidArgumentError("no model to serve");
  std::unique_ptr<ModelHost> host(new ModelHost(std::move(base)));
  absl::MutexLock lock(&host->mu_);
  for (NodeOptions& o : models) {
    RINGLM_ASSIGN_OR_RETURN(std::unique_ptr<Node> node, Node::Create(std::move(o)));
    host->models_.push_back({std::move(node), nullptr});
  }
  return host;
}

ModelHost::~ModelHost() { Stop(); }

absl::Status ModelHost::Start(RingServerOptions options, bool loads_at_run_time) {
  absl::MutexLock lock(&mu_);
  const Node& first = *models_.front().node;
  options.identity = first.identity();
  options.api_key = base_.api_key;
  options.max_message_bytes = 0;
  for (const Served& served : models_) {
    options.max_message_bytes =
        std::max(options.max_message_bytes, served.node->max_message_bytes());
  }
  if (loads_at_run_time) {
    StepLimits widest;
    widest.n_embd = kMaxLoadableEmbd;
    widest.max_step_tokens = base_.origin.max_chunk_tokens;
    options.max_message_bytes = std::max(
        options.max_message_bytes,
        static_cast<int>(std::min<uint64_t>(base_.rpc.max_message_bytes, MaxStepBytes(widest))));
  }
  RINGLM_ASSIGN_OR_RETURN(server_, RingServer::Start(options));
  for (Served& served : models_) RINGLM_RETURN_IF_ERROR(StartModel(served));
  return absl::OkStatus();
}

absl::Status ModelHost::StartModel(Served& served) {
  RINGLM_RETURN_IF_ERROR(served.node->Start(server_.get()));
  served.backend = std::make_unique<ClusterBackend>(served.node->BackendParts());
  if (api_port_ != 0) served.node->SetApiAddress(api_host_, api_port_);
  return absl::OkStatus();
}

void ModelHost::Stop() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  stopped_ = true;
  for (Served& served : models_) served.node->Stop();
  if (server_) server_->Shutdown();
  // The servers' calls are over: what they used may go.
  unloaded_.clear();
}

std::vector<ApiModel> ModelHost::ApiModels() const {
  absl::MutexLock lock(&mu_);
  std::vector<ApiModel> out;
  for (const Served& served : models_) {
    out.push_back({.backend = served.backend.get(), .names = served.node->names()});
  }
  return out;
}

std::vector<ModelHost::Served>::iterator ModelHost::FindServed(const std::string& name) {
  return std::find_if(models_.begin(), models_.end(), [&name](const Served& served) {
    const std::vector<std::string>& names = served.node->names();
    return std::find(names.begin(), names.end(), name) != names.end();
  });
}

uint64_t ModelHost::HeldBytes() const {
  uint64_t held = draining_bytes_;
  for (const Served& served : models_) held += served.node->memory_bytes();
  return held;
}

absl::StatusOr<ApiModel> ModelHost::Load(const ModelLoadRequest& request) {
  absl::MutexLock lock(&mu_);
  if (stopped_ || server_ == nullptr) return absl::UnavailableError("the daemon is stopping");
  if (models_.size() >= kMaxModels) {
    return absl::FailedPreconditionError(
        absl::StrCat("this daemon serves ", models_.size(), " models, the most it may"));
  }
  if (FindServed(request.name) != models_.end()) {
    return absl::AlreadyExistsError(
        absl::StrCat("a model is already served as '", request.name, "'"));
  }
  // The memory the other models leave on this node.
  const uint64_t machine = models_.front().node->machine_memory_bytes();
  const uint64_t held = HeldBytes();
  const uint64_t free = machine > held ? machine - held : 0;
  const uint64_t want = request.memory_bytes > 0 ? request.memory_bytes : free;
  if (want == 0 || want > free) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this node has ", free >> 20, " MiB left of its ", machine >> 20, " MiB (the ",
        models_.size(), " model(s) it serves hold the rest)",
        request.memory_bytes > 0 ? absl::StrCat("; ", request.memory_bytes >> 20, " MiB asked")
                                 : "",
        ". Start the daemon with --model-memory for its models to keep memory free for loading "
        "more"));
  }
  NodeOptions o = base_;
  o.model_path = request.path;
  o.names = {request.name};
  o.memory_part = MemoryPart{.fixed_bytes = want, .reserved_bytes = want};
  o.memory_bytes = machine;  // measured once, at start
  spdlog::info("loading model {} from {} with {} MiB of this node's memory", request.name,
               request.path, want >> 20);
  absl::StatusOr<std::unique_ptr<Node>> created = Node::Create(std::move(o));
  if (!created.ok()) {
    // A file that is not a model this daemon can load is the caller's error.
    const absl::StatusCode code = created.status().code();
    if (code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kUnimplemented ||
        code == absl::StatusCode::kOutOfRange) {
      return absl::InvalidArgumentError(created.status().message());
    }
    return created.status();
  }
  std::unique_ptr<Node> node = *std::move(created);
  if (node->max_message_bytes() > server_->max_message_bytes()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "model '%s' sends steps of up to %.1f MiB, more than this daemon's gRPC server accepts "
        "(%.1f MiB, fixed at start by its models): restart the daemon with it among --model, or "
        "with a models file",
        request.name, node->max_message_bytes() / 1048576.0,
        server_->max_message_bytes() / 1048576.0));
  }
  models_.push_back({std::move(node), nullptr});
  if (absl::Status s = StartModel(models_.back()); !s.ok()) {
    models_.back().node->Stop();  // takes its service off the server too
    models_.pop_back();
    return s;
  }
  const Served& served = models_.back();
  return ApiModel{.backend = served.backend.get(), .names = served.node->names()};
}

absl::StatusOr<size_t> ModelHost::Unload(const std::string& name, std::chrono::milliseconds drain) {
  Served served;
  {
    absl::MutexLock lock(&mu_);
    auto it = FindServed(name);
    if (it == models_.end()) {
      return absl::NotFoundError(absl::StrCat("this node serves no model '", name, "'"));
    }
    if (models_.size() == 1) {
      return absl::FailedPreconditionError("the last model of a daemon cannot be removed");
    }
    if (unloaded_.size() >= kMaxUnloaded) {
      return absl::FailedPreconditionError(absl::StrCat(
          kMaxUnloaded,
          " models were removed since this daemon started: restart it to remove more"));
    }
    served = std::move(*it);
    models_.erase(it);
    draining_bytes_ += served.node->memory_bytes();  // held until it stops
  }
  // Without the lock: /metrics and loads go on while it drains.
  spdlog::info("removing model {}: draining its requests for up to {} ms", name, drain.count());
  const size_t ended = served.node->Drain(drain);
  served.node->Stop();
  served.node->ReleaseMemory();
  spdlog::info("removed model {} ({} request(s) ended unfinished)", name, ended);
  absl::MutexLock lock(&mu_);
  draining_bytes_ -= served.node->memory_bytes();
  unloaded_.push_back(std::move(served));
  return ended;
}

std::string ModelHost::RenderMetrics() const {
  absl::MutexLock lock(&mu_);
  std::vector<MetricsRegistry::Labelled> registries = {{&daemon_metrics_, {}}};
  for (const Served& served : models_) {
    MetricLabels labels;
    if (models_.size() > 1) labels.push_back({"model", served.node->names().front()});
    registries.push_back({&served.node->metrics_registry(), labels});
  }
  return MetricsRegistry::RenderPrometheusText(registries);
}

std::string ModelHost::advertise_host() const {
  absl::MutexLock lock(&mu_);
  return models_.front().node->advertise_host();
}

void ModelHost::SetApiAddress(const std::string& host, uint16_t port) {
  absl::MutexLock lock(&mu_);
  api_host_ = host;
  api_port_ = port;
  for (Served& served : models_) served.node->SetApiAddress(host, port);
}

}  // namespace ringlm
