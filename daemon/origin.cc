#include "daemon/origin.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {
constexpr auto kWatchdogTick = std::chrono::milliseconds(200);
}  // namespace

OriginRegistry::OriginRegistry(OriginOptions options, Transport* transport, std::string self_id,
                               std::string self_address, uint32_t n_embd,
                               std::function<absl::Status(const v1::PlanStage&)> health,
                               std::function<void(const std::string&)> on_unreachable)
    : options_(options),
      transport_(transport),
      self_id_(std::move(self_id)),
      self_address_(std::move(self_address)),
      n_embd_(n_embd),
      health_(std::move(health)),
      on_unreachable_(std::move(on_unreachable)),
      sender_("origin-sender"),
      cleanup_("origin-cleanup"),
      watchdog_([this] { WatchdogLoop(); }) {}

OriginRegistry::~OriginRegistry() { Stop(); }

void OriginRegistry::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (watchdog_.joinable()) watchdog_.join();
  sender_.Stop();
  std::vector<std::string> ids;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, a] : active_) ids.push_back(id);
  }
  for (const std::string& id : ids) Fail(id, absl::UnavailableError("the node is shutting down"));
  cleanup_.Stop();
}

size_t OriginRegistry::active() const {
  absl::MutexLock lock(&mu_);
  return active_.size();
}

absl::Status OriginRegistry::Start(OriginRequest request, OriginSink sink) {
  if (request.prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  const std::string id = request.request_id;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the node is shutting down");
    if (active_.count(id) > 0) {
      return absl::InvalidArgumentError(absl::StrCat("request id '", id, "' is in use"));
    }
    Active& a = active_[id];
    a.request = std::move(request);
    a.sink = std::move(sink);
    a.last_progress = std::chrono::steady_clock::now();
  }
  if (!sender_.Post([this, id] { SendPrompt(id); })) {
    Fail(id, absl::ResourceExhaustedError("too many requests are starting"));
  }
  return absl::OkStatus();
}

void OriginRegistry::SendPrompt(const std::string& request_id) {
  OriginRequest r;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(request_id);
    if (it == active_.end()) return;
    r = it->second.request;
  }
  if (r.limits.max_tokens() == 0) {
    OriginEvent done;
    done.finish = v1::FINISH_REASON_LENGTH;
    Finish(request_id, done);
    return;
  }
  const uint64_t by_bytes = options_.max_chunk_bytes / (uint64_t{n_embd_} * 4);
  const size_t chunk =
      std::max<uint64_t>(1, std::min<uint64_t>(by_bytes, options_.max_chunk_tokens));
  for (size_t start = 0; start < r.prompt.size(); start += chunk) {
    const size_t end = std::min(r.prompt.size(), start + chunk);
    v1::StageStepRequest step;
    step.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    step.set_request_id(r.request_id);
    step.set_session_id(r.session_id);
    *step.mutable_plan() = r.plan;
    step.set_stage_index(0);
    step.set_origin(self_id_);
    step.set_origin_address(self_address_);
    step.set_position(static_cast<uint32_t>(start));
    step.mutable_tokens()->Add(r.prompt.begin() + start, r.prompt.begin() + end);
    *step.mutable_sampling() = r.sampling;
    *step.mutable_limits() = r.limits;
    step.set_sample(end == r.prompt.size());
    step.set_wire_dtype(r.wire_dtype);
    if (absl::Status s = transport_->StageStep(r.plan.stages(0), step); !s.ok()) {
      Fail(request_id,
           absl::Status(s.code(), absl::StrCat("sending the prompt to stage 0: ", s.message())));
      return;
    }
  }
}

bool OriginRegistry::Deliver(const v1::DeliverTokenRequest& d) {
  if (d.finish_reason() == v1::FINISH_REASON_ERROR) {
    const auto code = static_cast<absl::StatusCode>(d.error_code());
    Fail(d.request_id(),
         absl::Status(code == absl::StatusCode::kOk ? absl::StatusCode::kInternal : code,
                      d.error()));
    return true;
  }
  OriginSink sink;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(d.request_id());
    if (it == active_.end()) return true;
    Active& a = it->second;
    if (d.index() != a.next_index) {
      spdlog::warn("request {}: token index {} out of order (expected {})", d.request_id(),
                   d.index(), a.next_index);
      return false;
    }
    ++a.next_index;
    a.last_progress = std::chrono::steady_clock::now();
    sink = a.sink;
  }
  OriginEvent event;
  event.has_token = true;
  event.token = d.token();
  event.finish = d.finish_reason();
  if (d.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) return Finish(d.request_id(), event);
  absl::MutexLock lock(&sink_mu_);
  sink(event);
  return false;
}

bool OriginRegistry::Finish(const std::string& request_id, const OriginEvent& last) {
  Active a;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(request_id);
    if (it == active_.end()) return true;
    a = std::move(it->second);
    active_.erase(it);
  }
  {
    absl::MutexLock lock(&sink_mu_);
    a.sink(last);
  }
  const bool cancel =
      last.finish != v1::FINISH_REASON_STOP && last.finish != v1::FINISH_REASON_LENGTH;
  CleanUpStages(a.request.plan, request_id, a.request.session_id, cancel);
  return true;
}

void OriginRegistry::Fail(const std::string& request_id, const absl::Status& status) {
  spdlog::warn("request {} failed: {}", request_id, status.ToString());
  OriginEvent event;
  event.finish = v1::FINISH_REASON_ERROR;
  event.error = status;
  Finish(request_id, event);
}

void OriginRegistry::Cancel(const std::string& request_id) {
  OriginEvent event;
  event.finish = v1::FINISH_REASON_CANCELLED;
  Finish(request_id, event);
}

void OriginRegistry::CleanUpStages(const v1::Plan& plan, const std::string& request_id,
                                   const std::string& session_id, bool cancel) {
  if (!cancel && options_.keep_sessions) return;
  // Best effort, off the caller's thread: a dead stage must not stall it.
  cleanup_.Post([this, plan, request_id, session_id, cancel] {
    for (const v1::PlanStage& stage : plan.stages()) {
      if (cancel) (void)transport_->Cancel(stage, request_id);
      if (!options_.keep_sessions) (void)transport_->DropSession(stage, session_id);
    }
  });
}

void OriginRegistry::WatchdogLoop() {
  auto next_health = std::chrono::steady_clock::now() + options_.health_interval;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(kWatchdogTick))) {
        return;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::string> stalled;
    std::map<std::string, v1::PlanStage> stages;  // node id -> stage, over running requests
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [id, a] : active_) {
        if (now - a.last_progress > options_.no_progress_timeout) stalled.push_back(id);
        for (const v1::PlanStage& s : a.request.plan.stages()) stages[s.node_id()] = s;
      }
    }
    for (const std::string& id : stalled) {
      Fail(id, absl::DeadlineExceededError(
                   absl::StrCat("no token for ", options_.no_progress_timeout.count(), " ms")));
    }
    if (now < next_health) continue;
    next_health = now + options_.health_interval;
    for (const auto& [node_id, stage] : stages) {
      if (node_id == self_id_) continue;
      absl::Status s = health_(stage);
      if (s.ok()) continue;
      on_unreachable_(node_id);
      std::vector<std::string> affected;
      {
        absl::MutexLock lock(&mu_);
        for (const auto& [id, a] : active_) {
          for (const v1::PlanStage& st : a.request.plan.stages()) {
            if (st.node_id() == node_id) affected.push_back(id);
          }
        }
      }
      for (const std::string& id : affected) {
        Fail(id, absl::UnavailableError(absl::StrCat("node ", node_id, " (", stage.address(),
                                                     ") stopped answering: ", s.message())));
      }
    }
  }
}

}  // namespace ringlm
