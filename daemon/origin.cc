#include "daemon/origin.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/proto_convert.h"
#include "inference/token_digest.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {
constexpr auto kWatchdogTick = std::chrono::milliseconds(200);
}  // namespace

OriginRegistry::OriginRegistry(OriginOptions options, Transport* transport, std::string self_id,
                               uint32_t n_embd,
                               std::function<absl::Status(const v1::PlanStage&)> health,
                               std::function<void(const std::string&)> on_unreachable,
                               NodeMetrics* metrics)
    : options_(options),
      transport_(transport),
      self_id_(std::move(self_id)),
      n_embd_(n_embd),
      health_(std::move(health)),
      on_unreachable_(std::move(on_unreachable)),
      metrics_(metrics),
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
    a.start = a.last_progress = std::chrono::steady_clock::now();
  }
  if (!sender_.Post([this, id] { SendPrompt(id); })) {
    Fail(id, absl::ResourceExhaustedError("too many requests are starting"));
  }
  return absl::OkStatus();
}

std::string OriginRegistry::StageRequestId(const std::string& request_id, uint32_t attempt) {
  return absl::StrCat(request_id, "#", attempt);
}

void OriginRegistry::SendPrompt(const std::string& request_id) {
  OriginRequest r;
  uint32_t attempt = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(request_id);
    if (it == active_.end()) return;
    r = it->second.request;
    attempt = it->second.attempt;
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
  for (size_t start = r.reuse_len; start < r.prompt.size(); start += chunk) {
    const size_t end = std::min(r.prompt.size(), start + chunk);
    v1::StageStepRequest step;
    step.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    step.set_request_id(StageRequestId(r.request_id, attempt));
    if (start == r.reuse_len && r.reuse_len > 0) {
      step.set_reuse_len(r.reuse_len);
      step.set_reuse_digest(TokenDigest(std::span<const int32_t>(r.prompt.data(), r.reuse_len)));
      step.set_fork_from(r.fork_from);
    }
    step.set_session_id(r.session_id);
    *step.mutable_plan() = r.plan;
    step.set_stage_index(0);
    step.set_origin(self_id_);
    step.set_position(static_cast<uint32_t>(start));
    step.mutable_tokens()->Add(r.prompt.begin() + start, r.prompt.begin() + end);
    *step.mutable_sampling() = r.sampling;
    *step.mutable_limits() = r.limits;
    *step.mutable_logprobs() = r.logprobs;
    step.set_constraint(r.constraint);
    step.set_sample(end == r.prompt.size());
    step.set_wire_dtype(r.wire_dtype);
    if (absl::Status s = transport_->StageStep(r.plan.stages(0).node_id(), step); !s.ok()) {
      Fail(request_id,
           absl::Status(s.code(), absl::StrCat("sending the prompt to stage 0: ", s.message())));
      return;
    }
  }
}

absl::StatusOr<bool> OriginRegistry::Deliver(const v1::DeliverTokenRequest& d,
                                             const std::string& caller) {
  const size_t hash = d.request_id().rfind('#');
  const std::string id = d.request_id().substr(0, hash);
  uint32_t attempt = 0;
  if (hash == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(d.request_id()).substr(hash + 1), &attempt)) {
    return true;  // not a request this origin started
  }
  OriginSink sink;
  OriginEvent event;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(id);
    if (it == active_.end() || it->second.attempt != attempt) return true;
    Active& a = it->second;
    const auto& stages = a.request.plan.stages();
    const bool is_error = d.finish_reason() == v1::FINISH_REASON_ERROR;
    const bool from_last = stages.empty() ? false : stages.rbegin()->node_id() == caller;
    const bool from_stage = std::any_of(stages.begin(), stages.end(), [&](const v1::PlanStage& s) {
      return s.node_id() == caller;
    });
    if (is_error ? !from_stage : !from_last) {
      return absl::PermissionDeniedError(absl::StrCat(
          "node ", caller, " may not deliver ", is_error ? "errors" : "tokens", " for request ", id,
          ": only ", is_error ? "its stages" : "its last stage", " may"));
    }
    if (d.finish_reason() == v1::FINISH_REASON_ERROR) {
      if (d.cache_miss() && a.request.reuse_len > 0 && a.next_index == 0) {
        spdlog::info("request {}: {}; recomputing the whole prompt", id, d.error());
        if (metrics_ != nullptr) metrics_->cache_misses->Increment();
        if (sender_.Post([this, id, attempt] { RetryWithoutReuse(id, attempt); })) return true;
        // The node is stopping: no retry, the request fails as reported.
      }
    } else if (d.index() != a.next_index) {
      if (warnings_.Allow("order")) {
        spdlog::warn("request {}: token index {} out of order (expected {})", id, d.index(),
                     a.next_index);
      }
      return false;
    } else {
      a.last_progress = std::chrono::steady_clock::now();
      if (a.next_index == 0) {
        a.first_token = a.last_progress;
        a.cached_tokens = a.request.reuse_len;
        event.cached_tokens = a.cached_tokens;
      }
      ++a.next_index;
      sink = a.sink;
    }
  }
  if (d.finish_reason() == v1::FINISH_REASON_ERROR) {
    const auto code = static_cast<absl::StatusCode>(d.error_code());
    Fail(id, absl::Status(code == absl::StatusCode::kOk ? absl::StatusCode::kInternal : code,
                          d.error()));
    return true;
  }
  event.has_token = true;
  event.token = d.token();
  event.finish = d.finish_reason();
  if (d.has_logprobs()) event.logprobs = LogprobsFromProto(d.logprobs());
  if (d.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) return Finish(id, event);
  absl::MutexLock lock(&sink_mu_);
  sink(event);
  return false;
}

void OriginRegistry::RetryWithoutReuse(const std::string& request_id, uint32_t failed_attempt) {
  OriginRequest r;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(request_id);
    if (it == active_.end() || it->second.attempt != failed_attempt) return;
    r = it->second.request;
  }
  // Every stage forgets the failed attempt before the retry's first step, so
  // none of its late steps can touch the session again.
  const std::string old_id = StageRequestId(request_id, failed_attempt);
  for (const v1::PlanStage& stage : r.plan.stages()) {
    if (absl::Status s = transport_->Cancel(stage.node_id(), old_id); !s.ok()) {
      Fail(request_id,
           absl::Status(s.code(), absl::StrCat("cancelling after a cache miss: ", s.message())));
      return;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(request_id);
    if (it == active_.end()) return;
    Active& a = it->second;
    a.attempt = failed_attempt + 1;
    a.request.reuse_len = 0;
    a.request.fork_from.clear();
    a.last_progress = std::chrono::steady_clock::now();
  }
  SendPrompt(request_id);
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
  LogRequest(a, last);  // first, so metrics already count it when the client hears the end
  {
    absl::MutexLock lock(&sink_mu_);
    a.sink(last);
  }
  CleanUpStages(a.request, a.attempt, last.finish);
  return true;
}

void OriginRegistry::LogRequest(const Active& a, const OriginEvent& last) {
  using Ms = std::chrono::duration<double, std::milli>;
  const auto end = std::chrono::steady_clock::now();
  const bool has_first = a.next_index > 0;
  const double ttft = has_first ? Ms(a.first_token - a.start).count() : 0;
  const double decode_ms = has_first ? Ms(end - a.first_token).count() : 0;
  const double tps =
      a.next_index > 1 && decode_ms > 0 ? (a.next_index - 1) * 1000.0 / decode_ms : 0;
  std::string plan;
  for (const v1::PlanStage& s : a.request.plan.stages()) {
    absl::StrAppend(&plan, plan.empty() ? "" : " ", s.node_id(), "[", s.first_layer(), ",",
                    s.last_layer(), ")");
  }
  const char* how = last.finish == v1::FINISH_REASON_STOP     ? "stop"
                    : last.finish == v1::FINISH_REASON_LENGTH ? "length"
                    : last.finish == v1::FINISH_REASON_ERROR  ? "error"
                                                              : "cancelled";
  if (metrics_ != nullptr) {
    NodeMetrics& m = *metrics_;
    (last.finish == v1::FINISH_REASON_STOP     ? m.requests_stop
     : last.finish == v1::FINISH_REASON_LENGTH ? m.requests_length
     : last.finish == v1::FINISH_REASON_ERROR  ? m.requests_error
                                               : m.requests_cancelled)
        ->Increment();
    m.prompt_tokens->Increment(static_cast<double>(a.request.prompt.size()));
    m.generated_tokens->Increment(a.next_index);
    if (a.cached_tokens > 0) {
      m.cache_hits->Increment();
      m.cached_tokens->Increment(a.cached_tokens);
    }
    if (has_first) m.ttft_seconds->Observe(ttft / 1000.0);
    if (a.next_index > 1)
      m.time_per_token_seconds->Observe(decode_ms / 1000.0 / (a.next_index - 1));
  }
  spdlog::info(
      "request {} {}: {} tokens in ({} cached), {} out, ttft {:.1f} ms, {:.1f} tokens/s, plan {}",
      a.request.request_id, how, a.request.prompt.size(), a.cached_tokens, a.next_index, ttft, tps,
      plan);
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

void OriginRegistry::DropSessionEverywhere(const v1::Plan& plan, const std::string& session_id) {
  cleanup_.Post([this, plan, session_id] {
    for (const v1::PlanStage& stage : plan.stages())
      (void)transport_->DropSession(stage.node_id(), session_id);
  });
}

void OriginRegistry::CleanUpStages(const OriginRequest& request, uint32_t attempt,
                                   v1::FinishReason finish) {
  // Stages still working on a cancelled or failed request must stop. Their
  // sessions stay consistent either way (a step commits whole or not at
  // all, and every reuse is checked by digest), but a failed request's
  // session is not worth keeping.
  const bool cancel = finish != v1::FINISH_REASON_STOP && finish != v1::FINISH_REASON_LENGTH;
  const bool drop = !request.keep_session || finish == v1::FINISH_REASON_ERROR;
  if (!cancel && !drop) return;
  // Best effort, off the caller's thread: a dead stage must not stall it.
  cleanup_.Post([this, plan = request.plan, id = StageRequestId(request.request_id, attempt),
                 session_id = request.session_id, cancel, drop] {
    for (const v1::PlanStage& stage : plan.stages()) {
      if (cancel) (void)transport_->Cancel(stage.node_id(), id);
      if (drop) (void)transport_->DropSession(stage.node_id(), session_id);
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
        Fail(id, absl::UnavailableError(
                     absl::StrCat("node ", node_id, " stopped answering: ", s.message())));
      }
    }
  }
}

}  // namespace ringlm
