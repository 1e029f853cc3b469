#include "daemon/origin/origin.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/rpc/proto_convert.h"
#include "inference/context_limit.h"
#include "inference/token_digest.h"
#include "security/crypto.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {
constexpr auto kWatchdogTick = std::chrono::milliseconds(200);

// False for what says the request itself is bad: replaying it on another
// plan would fail the same way.
bool IsRecoverable(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      return false;
    default:
      return true;
  }
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

OriginRegistry::OriginRegistry(OriginOptions options, Transport* transport, std::string self_id,
                               OriginModel model, OriginClusterHooks cluster,
                               const OriginMetrics* metrics)
    : options_(options),
      transport_(transport),
      self_id_(std::move(self_id)),
      model_(model),
      cluster_(std::move(cluster)),
      metrics_(metrics),
      sender_("origin-sender"),
      recovery_("origin-recovery"),
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
  recovery_.Stop();
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

absl::StatusOr<OriginRequest> OriginRegistry::Prepare(GenerationRequest request) const {
  RINGLM_RETURN_IF_ERROR(CheckPromptFits(request.prompt.size(), model_.context_size));
  for (int32_t id : request.prompt) {
    if (id < 0 || static_cast<uint32_t>(id) >= model_.n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt token id ", id, " is outside the vocabulary [0, ", model_.n_vocab, ")"));
    }
  }
  if (request.max_tokens < 0) return absl::InvalidArgumentError("max_tokens must be >= 0");
  RINGLM_RETURN_IF_ERROR(request.sampling.Validate());
  OriginRequest r;
  RINGLM_ASSIGN_OR_RETURN(r.plan, cluster_.serving_plan());
  // 128 random bits from the CSPRNG: ids are capabilities, never guessable.
  r.request_id = RandomId("req-");
  r.session_id =
      request.reuse.session_id.empty() ? RandomId("tmp-") : std::move(request.reuse.session_id);
  r.prompt = std::move(request.prompt);
  r.sampling = SamplingToProto(request.sampling);
  r.limits.set_max_tokens(request.max_tokens);
  r.limits.set_ignore_eos(request.ignore_eos);
  r.logprobs.set_enabled(request.logprobs);
  r.logprobs.set_top(static_cast<uint32_t>(std::clamp(request.top_logprobs, 0, kMaxTopLogprobs)));
  r.constraint = std::move(request.constraint);
  r.wire_dtype = request.f16_hidden ? v1::DTYPE_F16 : v1::DTYPE_F32;
  r.reuse_len = request.reuse.reuse_len;
  r.fork_from = std::move(request.reuse.fork_from);
  r.keep_session = request.keep_session;
  return r;
}

absl::StatusOr<OriginRequest> OriginRegistry::Prepare(NewRequest n) const {
  GenerationRequest request;
  request.prompt = std::move(n.prompt);
  request.sampling = n.sampling;
  request.max_tokens = n.max_tokens;
  request.ignore_eos = n.ignore_eos;
  request.logprobs = n.logprobs;
  request.top_logprobs = n.top_logprobs;
  request.constraint = std::move(n.constraint);
  request.f16_hidden = n.f16_hidden;
  request.reuse = {std::move(n.session_id), std::move(n.fork_from), n.reuse_len};
  request.keep_session = n.keep_session;
  return Prepare(std::move(request));
}

absl::Status OriginRegistry::Start(OriginRequest request, OriginSink sink) {
  if (request.prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  const std::string id = request.request_id;
  const bool nothing_to_generate = request.limits.max_tokens() == 0;
  bool unscheduled = false;
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
    a.order = next_order_++;
    if (!nothing_to_generate) BeginPromptLocked(a);
    unscheduled = !nothing_to_generate && !pump_posted_;  // the sender's queue is full
  }
  if (unscheduled) {
    Fail(id, absl::ResourceExhaustedError("too many requests are starting"));
  } else if (nothing_to_generate) {
    OriginEvent done;
    done.finish = v1::FINISH_REASON_LENGTH;
    if (!sender_.Post([this, id, done] { Finish(id, done); })) {
      Fail(id, absl::UnavailableError("the node is shutting down"));
    }
  }
  return absl::OkStatus();
}

std::string OriginRegistry::StageRequestId(const std::string& request_id, uint32_t attempt) {
  return absl::StrCat(request_id, "#", attempt);
}

void OriginRegistry::BeginPromptLocked(Active& a) {
  a.prompt_end = static_cast<uint32_t>(a.request.prompt.size() + a.reply.size());
  a.sent = a.request.reuse_len;
  a.noted_positions = 0;
  SchedulePumpLocked();
}

uint32_t OriginRegistry::InFlight(const Active& a) {
  if (a.recovering || a.reply.size() > a.attempt_start) return 0;
  return a.sent - std::max(a.noted_positions, a.request.reuse_len);
}

bool OriginRegistry::SendsPrompt(const Active& a) {
  return !a.recovering && a.reply.size() == a.attempt_start && a.sent < a.prompt_end;
}

bool OriginRegistry::Streams(const Active& a) {
  return !a.recovering && a.prompt_end > 0 && a.sent >= a.prompt_end;
}

uint32_t OriginRegistry::ChunkTokens(uint32_t streams, uint32_t position) const {
  const uint64_t by_bytes = options_.max_chunk_bytes / (uint64_t{model_.n_embd} * 4);
  uint64_t tokens = options_.max_chunk_tokens;
  if (streams > 0) {
    tokens = std::min<uint64_t>(
        {tokens, options_.busy_chunk_tokens,
         uint64_t{options_.busy_chunk_tokens_per_stream} * (uint64_t{streams} + 1)});
    const double depth = options_.busy_chunk_depth_per_embd * model_.n_embd;
    if (depth > 0) {
      tokens = static_cast<uint64_t>(std::lround(static_cast<double>(tokens) * depth /
                                                 (depth + static_cast<double>(position))));
    }
  }
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min(by_bytes, tokens)));
}

void OriginRegistry::SchedulePumpLocked() {
  if (pump_posted_ || stopping_) return;
  pump_posted_ = sender_.Post([this] { PumpPrompts(); });
}

void OriginRegistry::PumpPrompts() {
  struct Outgoing {
    std::string id;
    uint32_t attempt;
    std::string to;
    v1::StageStepRequest step;
  };
  std::vector<Outgoing> out;
  {
    absl::MutexLock lock(&mu_);
    pump_posted_ = false;
    uint64_t in_flight = 0;
    uint32_t streams = 0;
    std::vector<std::pair<uint64_t, Active*>> waiting;  // order, request
    for (auto& [id, a] : active_) {
      in_flight += InFlight(a);
      if (Streams(a)) ++streams;
      if (SendsPrompt(a)) waiting.emplace_back(a.order, &a);
    }
    std::sort(waiting.begin(), waiting.end());
    // One chunk per request and round, oldest first, so that every stage
    // finds many sessions' chunks to batch. A request with nothing in
    // flight may always send one.
    for (bool sent_any = true; sent_any;) {
      sent_any = false;
      for (const auto& [order, a] : waiting) {
        if (a->sent >= a->prompt_end) continue;
        const uint32_t chunk = ChunkTokens(streams, a->sent);
        const uint32_t end = std::min(a->prompt_end, a->sent + chunk);
        const uint64_t budget =
            std::max<uint64_t>(options_.max_prompt_positions_in_flight,
                               uint64_t{chunk} * (a->request.plan.stages_size() + 1));
        if (InFlight(*a) > 0 && in_flight + (end - a->sent) > budget) continue;
        out.push_back({a->request.request_id, a->attempt, a->request.plan.stages(0).node_id(),
                       PromptStepLocked(*a, a->sent, end)});
        in_flight += end - a->sent;
        a->sent = end;
        sent_any = true;
      }
    }
  }
  std::set<std::string> failed;
  for (const Outgoing& o : out) {
    if (failed.count(o.id) > 0) continue;
    if (absl::Status s = transport_->StageStep(o.to, o.step); !s.ok()) {
      failed.insert(o.id);
      Recover(o.id, o.attempt,
              absl::Status(s.code(), absl::StrCat("sending the prompt to stage 0 (node ", o.to,
                                                  "): ", s.message())));
    }
  }
}

v1::StageStepRequest OriginRegistry::PromptStepLocked(const Active& a, uint32_t start,
                                                      uint32_t end) const {
  const OriginRequest& r = a.request;
  auto token = [&](uint32_t i) {
    return i < r.prompt.size() ? r.prompt[i] : a.reply[i - r.prompt.size()];
  };
  v1::StageStepRequest step;
  step.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  step.set_request_id(StageRequestId(r.request_id, a.attempt));
  if (start == r.reuse_len && r.reuse_len > 0) {
    std::vector<int32_t> reused(r.reuse_len);
    for (uint32_t i = 0; i < r.reuse_len; ++i) reused[i] = token(i);
    step.set_reuse_len(r.reuse_len);
    step.set_reuse_digest(TokenDigest(reused));
    step.set_fork_from(r.fork_from);
  }
  step.set_session_id(r.session_id);
  *step.mutable_plan() = r.plan;
  step.set_stage_index(0);
  step.set_origin(self_id_);
  step.set_position(start);
  for (uint32_t i = start; i < end; ++i) step.add_tokens(token(i));
  *step.mutable_sampling() = r.sampling;
  *step.mutable_limits() = r.limits;
  *step.mutable_logprobs() = r.logprobs;
  step.set_constraint(r.constraint);
  step.set_sample(end == a.prompt_end);
  step.set_generated(static_cast<uint32_t>(a.reply.size()));
  step.set_wire_dtype(r.wire_dtype);
  return step;
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
    if (it == active_.end() || it->second.attempt != attempt || it->second.recovering) {
      return true;
    }
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
    if (d.prompt_positions() > 0 && d.finish_reason() == v1::FINISH_REASON_UNSPECIFIED) {
      // A long prompt, going in: progress while each note goes further,
      // within what this attempt has sent; it frees room for more chunks.
      if (d.prompt_positions() <= a.noted_positions || d.prompt_positions() > a.sent) {
        return absl::InvalidArgumentError(absl::StrCat("request ", id, ": a progress note of ",
                                                       d.prompt_positions(),
                                                       " positions is out of order or range"));
      }
      a.noted_positions = d.prompt_positions();
      a.last_progress = std::chrono::steady_clock::now();
      SchedulePumpLocked();
      return false;
    }
    if (d.finish_reason() == v1::FINISH_REASON_ERROR) {
      if (d.cache_miss() && a.request.reuse_len > 0 && a.reply.size() == a.attempt_start) {
        spdlog::info("request {}: {}; recomputing from position 0", id, d.error());
        if (metrics_ != nullptr) metrics_->cache_misses->Increment();
        if (sender_.Post([this, id, attempt] { RetryWithoutReuse(id, attempt); })) return true;
        // The node is stopping: no retry, the request fails as reported.
      }
    } else if (d.index() != a.reply.size()) {
      if (warnings_.Allow("order")) {
        spdlog::warn("request {}: token index {} out of order (expected {})", id, d.index(),
                     a.reply.size());
      }
      return false;
    } else {
      a.last_progress = std::chrono::steady_clock::now();
      if (a.reply.size() == a.attempt_start) SchedulePumpLocked();  // its prompt is in
      if (a.reply.empty()) {
        a.first_token = a.last_progress;
        a.cached_tokens = a.request.reuse_len;
        event.cached_tokens = a.cached_tokens;
      }
      if (a.recoveries > 0 && a.reply.size() == a.attempt_start) ResumedLocked(a);
      a.reply.push_back(d.token());
      sink = a.sink;
    }
  }
  if (d.finish_reason() == v1::FINISH_REASON_ERROR) {
    const auto code = static_cast<absl::StatusCode>(d.error_code());
    Recover(id, attempt,
            absl::Status(code == absl::StatusCode::kOk ? absl::StatusCode::kInternal : code,
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
      Recover(request_id, failed_attempt,
              absl::Status(s.code(), absl::StrCat("cancelling after a cache miss (node ",
                                                  stage.node_id(), "): ", s.message())));
      return;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(request_id);
    if (it == active_.end() || it->second.attempt != failed_attempt) return;
    Active& a = it->second;
    a.attempt = failed_attempt + 1;
    a.request.reuse_len = 0;
    a.request.fork_from.clear();
    a.last_progress = std::chrono::steady_clock::now();
    BeginPromptLocked(a);
  }
}

void OriginRegistry::Recover(const std::string& request_id, uint32_t attempt,
                             const absl::Status& status) {
  if (!IsRecoverable(status)) {
    Fail(request_id, status);
    return;
  }
  v1::Plan plan;
  uint32_t recoveries = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(request_id);
    if (it == active_.end() || it->second.attempt != attempt || it->second.recovering) return;
    Active& a = it->second;
    recoveries = a.recoveries;
    if (recoveries < options_.max_recoveries) {
      a.recovering = true;
      ++a.recoveries;
      ++a.attempt;  // what the failed attempt still sends is ignored
      a.failed_at = std::chrono::steady_clock::now();
      plan = a.request.plan;
      SchedulePumpLocked();  // what it had in flight no longer counts
    }
  }
  if (recoveries >= options_.max_recoveries) {
    Fail(request_id, absl::Status(status.code(), absl::StrCat(status.message(), " (after ",
                                                              recoveries, " recoveries)")));
    return;
  }
  spdlog::warn("request {}: {}; recovering ({} of {})", request_id, status.ToString(),
               recoveries + 1, options_.max_recoveries);
  if (metrics_ != nullptr) metrics_->recoveries->Increment();
  // The failed attempt stops wherever it still runs (best effort: a dead or
  // hung stage cannot answer, and the cleanup thread must not hold up the
  // recovery). Its late steps cannot harm the session: every attempt
  // computes the same tokens at the same positions, and every claim is
  // checked by digest.
  cleanup_.Post([this, plan, id = StageRequestId(request_id, attempt)] {
    for (const v1::PlanStage& stage : plan.stages()) (void)transport_->Cancel(stage.node_id(), id);
  });
  if (!recovery_.Post([this, request_id, attempt, plan, status] {
        Replan(request_id, attempt + 1, plan, status);
      })) {
    Fail(request_id, absl::UnavailableError("the node is shutting down"));
  }
}

void OriginRegistry::Replan(const std::string& request_id, uint32_t attempt, v1::Plan failed_plan,
                            absl::Status why) {
  // Which stages failed: they must not be in the next plan. A stage that
  // answers may have failed only this request (its queue was full, say).
  std::vector<std::string> avoid;
  for (const v1::PlanStage& stage : failed_plan.stages()) {
    if (stage.node_id() == self_id_) continue;
    if (!cluster_.health(stage).ok()) {
      avoid.push_back(stage.node_id());
      cluster_.on_unreachable(stage.node_id());
    }
  }
  absl::StatusOr<v1::Plan> plan =
      cluster_.await_plan(avoid, std::chrono::steady_clock::now() + options_.recovery_timeout);
  if (!plan.ok()) {
    Fail(request_id,
         absl::Status(plan.status().code(),
                      absl::StrCat(why.message(), "; no new plan: ", plan.status().message())));
    return;
  }
  size_t positions = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(request_id);
    if (it == active_.end() || it->second.attempt != attempt) return;
    Active& a = it->second;
    a.request.plan = *plan;
    if (!a.reply.empty()) {
      // Every stage took all but the last token delivered (the one in
      // flight when the attempt failed): claim that much.
      a.request.reuse_len = static_cast<uint32_t>(a.request.prompt.size() + a.reply.size() - 1);
      a.request.fork_from.clear();
    }  // else the original claim stands: the prompt never got through
    a.attempt_start = static_cast<uint32_t>(a.reply.size());
    a.recovering = false;
    a.last_progress = std::chrono::steady_clock::now();
    positions = a.request.prompt.size() + a.reply.size();
    BeginPromptLocked(a);
  }
  spdlog::info("request {}: replaying {} positions on plan {}", request_id, positions,
               DescribePlan(*plan));
}

void OriginRegistry::ResumedLocked(Active& a) {
  // A replay's claim that got this far held on every stage (a miss restarts
  // the attempt from position 0).
  const uint32_t positions = static_cast<uint32_t>(a.request.prompt.size() + a.reply.size());
  a.replay_reused += a.request.reuse_len;
  a.replay_positions += positions;
  const double pause = SecondsSince(a.failed_at);
  spdlog::info("request {} resumed {:.0f} ms after the failure: {} of {} positions from KV",
               a.request.request_id, pause * 1000, a.request.reuse_len, positions);
  if (metrics_ != nullptr) {
    metrics_->recovery_seconds->Observe(pause);
    metrics_->replay_reused_tokens->Increment(a.request.reuse_len);
    metrics_->replay_recomputed_tokens->Increment(positions - a.request.reuse_len);
  }
}

bool OriginRegistry::Finish(const std::string& request_id, const OriginEvent& last) {
  Active a;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(request_id);
    if (it == active_.end()) return true;
    a = std::move(it->second);
    active_.erase(it);
    SchedulePumpLocked();
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
  const uint32_t n_out = static_cast<uint32_t>(a.reply.size());
  const bool has_first = n_out > 0;
  const double ttft = has_first ? Ms(a.first_token - a.start).count() : 0;
  const double decode_ms = has_first ? Ms(end - a.first_token).count() : 0;
  const double tps = n_out > 1 && decode_ms > 0 ? (n_out - 1) * 1000.0 / decode_ms : 0;
  const char* how = last.finish == v1::FINISH_REASON_STOP     ? "stop"
                    : last.finish == v1::FINISH_REASON_LENGTH ? "length"
                    : last.finish == v1::FINISH_REASON_ERROR  ? "error"
                                                              : "cancelled";
  if (metrics_ != nullptr) {
    const OriginMetrics& m = *metrics_;
    (last.finish == v1::FINISH_REASON_STOP     ? m.requests_stop
     : last.finish == v1::FINISH_REASON_LENGTH ? m.requests_length
     : last.finish == v1::FINISH_REASON_ERROR  ? m.requests_error
                                               : m.requests_cancelled)
        ->Increment();
    m.prompt_tokens->Increment(static_cast<double>(a.request.prompt.size()));
    m.generated_tokens->Increment(n_out);
    if (a.cached_tokens > 0) {
      m.cache_hits->Increment();
      m.cached_tokens->Increment(a.cached_tokens);
    }
    if (has_first) m.ttft_seconds->Observe(ttft / 1000.0);
    if (n_out > 1) m.time_per_token_seconds->Observe(decode_ms / 1000.0 / (n_out - 1));
  }
  const std::string recovered =
      a.recoveries == 0
          ? ""
          : absl::StrCat(", recovered ", a.recoveries, " time(s) (replays took ", a.replay_reused,
                         " of ", a.replay_positions, " positions from KV)");
  spdlog::info(
      "request {} {}: {} tokens in ({} cached), {} out, ttft {:.1f} ms, {:.1f} tokens/s, plan "
      "{}{}",
      a.request.request_id, how, a.request.prompt.size(), a.cached_tokens, n_out, ttft, tps,
      DescribePlan(a.request.plan), recovered);
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
    std::vector<std::pair<std::string, uint32_t>> stalled;  // id, attempt
    std::map<std::string, v1::PlanStage> stages;  // node id -> stage, over running requests
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [id, a] : active_) {
        if (a.recovering) continue;
        if (now - a.last_progress > options_.no_progress_timeout) {
          stalled.emplace_back(id, a.attempt);
        }
        for (const v1::PlanStage& s : a.request.plan.stages()) stages[s.node_id()] = s;
      }
    }
    for (const auto& [id, attempt] : stalled) {
      Recover(id, attempt,
              absl::DeadlineExceededError(
                  absl::StrCat("no token for ", options_.no_progress_timeout.count(), " ms")));
    }
    if (now < next_health) continue;
    next_health = now + options_.health_interval;
    for (const auto& [node_id, stage] : stages) {
      if (node_id == self_id_) continue;
      absl::Status s = cluster_.health(stage);
      if (s.ok()) continue;
      cluster_.on_unreachable(node_id);
      std::vector<std::pair<std::string, uint32_t>> affected;
      {
        absl::MutexLock lock(&mu_);
        for (const auto& [id, a] : active_) {
          for (const v1::PlanStage& st : a.request.plan.stages()) {
            if (st.node_id() == node_id && !a.recovering) affected.emplace_back(id, a.attempt);
          }
        }
      }
      for (const auto& [id, attempt] : affected) {
        Recover(id, attempt,
                absl::UnavailableError(
                    absl::StrCat("node ", node_id, " stopped answering: ", s.message())));
      }
    }
  }
}

}  // namespace ringlm
