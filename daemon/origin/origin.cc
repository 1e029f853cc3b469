#include "daemon/origin/origin.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/origin/prefix_adoption.h"
#include "daemon/rpc/proto_convert.h"
#include "inference/context_limit.h"
#include "inference/sampling/speculation.h"
#include "security/crypto.h"
#include "spdlog/spdlog.h"

namespace ringlm {

OriginRegistry::OriginRegistry(OriginOptions options, Transport* transport, std::string self_id,
                               OriginModel model, OriginClusterHooks cluster,
                               const OriginMetrics* metrics)
    : context_{.options = options,
               .transport = transport,
               .self_id = std::move(self_id),
               .model = model,
               .cluster = std::move(cluster),
               .metrics = metrics},
      cleanup_("origin-cleanup"),
      pump_(&context_, &table_,
            [this](const std::string& id, uint32_t attempt, const absl::Status& status) {
              recovery_.Recover(id, attempt, status);
            }),
      recovery_(&context_, &table_, &pump_, &cleanup_,
                [this](const std::string& id, const absl::Status& status) { Fail(id, status); }) {}

OriginRegistry::~OriginRegistry() { Stop(); }

void OriginRegistry::Stop() {
  {
    absl::MutexLock lock(&table_.mu);
    if (table_.stopping) return;
    table_.stopping = true;
  }
  recovery_.StopWatchdog();
  pump_.Stop();
  recovery_.Stop();
  std::vector<std::string> ids;
  std::string reason = "the node is shutting down";
  {
    absl::MutexLock lock(&table_.mu);
    for (const auto& [id, a] : table_.requests) ids.push_back(id);
    if (!table_.refusing.empty()) reason = table_.refusing;
  }
  for (const std::string& id : ids) Fail(id, absl::UnavailableError(reason));
  cleanup_.Stop();
}

void OriginRegistry::StopAccepting(const std::string& reason) {
  absl::MutexLock lock(&table_.mu);
  table_.refusing = reason;
}

size_t OriginRegistry::active() const {
  absl::MutexLock lock(&table_.mu);
  return table_.requests.size();
}

absl::StatusOr<OriginRequest> OriginRegistry::Prepare(GenerationRequest request) const {
  const OriginModel& model = context_.model;
  RINGLM_RETURN_IF_ERROR(CheckPromptFits(request.prompt.size(), model.context_size));
  for (int32_t id : request.prompt) {
    if (id < 0 || static_cast<uint32_t>(id) >= model.n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt token id ", id, " is outside the vocabulary [0, ", model.n_vocab, ")"));
    }
  }
  if (request.max_tokens < 0) return absl::InvalidArgumentError("max_tokens must be >= 0");
  RINGLM_RETURN_IF_ERROR(request.sampling.Validate());
  OriginRequest r;
  RINGLM_ASSIGN_OR_RETURN(r.plan, context_.cluster.serving_plan());
  // 128 random bits from the CSPRNG: ids are capabilities, never guessable.
  r.request_id = RandomId("req-");
  if (request.reuse.session_id.empty()) request.reuse.session_id = RandomId("tmp-");
  if (request.keep_session && request.reuse.reuse_len == 0) {
    // Nothing of it cached here: the conversation may have begun on another
    // head, and the stages may still hold it.
    request.reuse.reuse_len =
        AdoptPrefix(*context_.transport, r.plan, request.reuse.session_id, request.prompt);
    if (request.reuse.reuse_len > 0) {
      spdlog::info("request {}: adopted {} prompt positions that the stages hold", r.request_id,
                   request.reuse.reuse_len);
    }
  }
  request.top_logprobs = std::clamp(request.top_logprobs, 0, kMaxTopLogprobs);
  r.max_drafts = request.speculate ? context_.options.max_drafts : 0;
  r.steps_in_flight = request.steps_in_flight > 0
                          ? std::min(request.steps_in_flight, kMaxStepsInFlight)
                          : context_.options.steps_in_flight;
  r.generation = std::move(request);
  return r;
}

absl::Status OriginRegistry::Start(OriginRequest request, OriginSink sink) {
  if (request.generation.prompt.empty()) {
    return absl::InvalidArgumentError("the prompt has no tokens");
  }
  const std::string id = request.request_id;
  const bool nothing_to_generate = request.generation.max_tokens == 0;
  bool unscheduled = false;
  {
    absl::MutexLock lock(&table_.mu);
    if (table_.stopping) return absl::UnavailableError("the node is shutting down");
    if (!table_.refusing.empty()) return absl::UnavailableError(table_.refusing);
    if (table_.requests.count(id) > 0) {
      return absl::InvalidArgumentError(absl::StrCat("request id '", id, "' is in use"));
    }
    ActiveRequest& a = table_.requests[id];
    a.request = std::move(request);
    a.sink = std::move(sink);
    a.start = a.last_progress = std::chrono::steady_clock::now();
    a.order = next_order_++;
    if (!nothing_to_generate) {  // else it stays kQueued, with no prompt, until its end
      a.BeginAttempt();
      pump_.ScheduleLocked();
    }
    unscheduled = !nothing_to_generate && !pump_.ScheduledLocked();  // the sender's queue is full
  }
  if (unscheduled) {
    Fail(id, absl::ResourceExhaustedError("too many requests are starting"));
  } else if (nothing_to_generate) {
    OriginEvent done;
    done.finish = v1::FINISH_REASON_LENGTH;
    if (!pump_.Post([this, id, done] { Finish(id, done); })) {
      Fail(id, absl::UnavailableError("the node is shutting down"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> OriginRegistry::Deliver(const v1::DeliverTokenRequest& d,
                                             const std::string& caller) {
  if (d.then_size() == 0) return DeliverOne(d, caller);
  // A verified step's tokens, in one call: each in turn, as if sent alone.
  if (d.then_size() > static_cast<int>(kMaxDrafts)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a delivery carries at most ", kMaxDrafts, " more tokens"));
  }
  for (const v1::DeliverTokenRequest& next : d.then()) {
    if (next.request_id() != d.request_id() || next.then_size() > 0) {
      return absl::InvalidArgumentError(
          "the tokens a delivery carries must be its request's, with none of their own");
    }
  }
  v1::DeliverTokenRequest first = d;
  first.clear_then();
  RINGLM_ASSIGN_OR_RETURN(bool stop, DeliverOne(first, caller));
  for (const v1::DeliverTokenRequest& next : d.then()) {
    if (stop) break;
    RINGLM_ASSIGN_OR_RETURN(stop, DeliverOne(next, caller));
  }
  return stop;
}

absl::StatusOr<bool> OriginRegistry::DeliverOne(const v1::DeliverTokenRequest& d,
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
    absl::MutexLock lock(&table_.mu);
    ActiveRequest* found = table_.FindLocked(id, attempt);
    if (found == nullptr || found->Recovering()) return true;
    ActiveRequest& a = *found;
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
      pump_.ScheduleLocked();
      return false;
    }
    if (d.finish_reason() == v1::FINISH_REASON_ERROR) {
      if (d.cache_miss() && a.request.generation.reuse.reuse_len > 0 && a.AwaitsFirstToken()) {
        spdlog::info("request {}: {}; recomputing from position 0", id, d.error());
        if (context_.metrics != nullptr) context_.metrics->cache_misses->Increment();
        if (recovery_.RetryWithoutReuseLater(id, attempt)) return true;
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
      if (a.AwaitsFirstToken()) pump_.ScheduleLocked();  // its prompt is in
      if (a.reply.empty()) {
        a.first_token = a.last_progress;
        a.cached_tokens = a.request.generation.reuse.reuse_len;
        event.cached_tokens = a.cached_tokens;
      }
      if (a.recoveries > 0 && a.AwaitsFirstToken()) recovery_.ResumedLocked(a);
      a.TakeToken(d.token());
      if (d.drafted() > 0) {
        a.drafted += d.drafted();
        a.accepted += std::min(d.accepted(), d.drafted());
        if (context_.metrics != nullptr) {
          context_.metrics->drafted_tokens->Increment(d.drafted());
          context_.metrics->accepted_tokens->Increment(std::min(d.accepted(), d.drafted()));
        }
      }
      sink = a.sink;
    }
  }
  if (d.finish_reason() == v1::FINISH_REASON_ERROR) {
    const auto code = static_cast<absl::StatusCode>(d.error_code());
    recovery_.Recover(
        id, attempt,
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

bool OriginRegistry::Finish(const std::string& request_id, const OriginEvent& last) {
  ActiveRequest a;
  {
    absl::MutexLock lock(&table_.mu);
    auto it = table_.requests.find(request_id);
    if (it == table_.requests.end()) return true;
    a = std::move(it->second);
    table_.requests.erase(it);
    pump_.ScheduleLocked();
  }
  a.state = EndState(last.finish);
  LogRequest(a, last);  // first, so metrics already count it when the client hears the end
  {
    absl::MutexLock lock(&sink_mu_);
    a.sink(last);
  }
  CleanUpStages(a.request, a.attempt, last.finish);
  return true;
}

void OriginRegistry::LogRequest(const ActiveRequest& a, const OriginEvent& last) {
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
  if (context_.metrics != nullptr) {
    const OriginMetrics& m = *context_.metrics;
    (last.finish == v1::FINISH_REASON_STOP     ? m.requests_stop
     : last.finish == v1::FINISH_REASON_LENGTH ? m.requests_length
     : last.finish == v1::FINISH_REASON_ERROR  ? m.requests_error
                                               : m.requests_cancelled)
        ->Increment();
    m.prompt_tokens->Increment(static_cast<double>(a.request.generation.prompt.size()));
    m.generated_tokens->Increment(n_out);
    if (a.cached_tokens > 0) {
      m.cache_hits->Increment();
      m.cached_tokens->Increment(a.cached_tokens);
    }
    if (a.drafted > 0) m.request_acceptance->Observe(static_cast<double>(a.accepted) / a.drafted);
    if (has_first) m.ttft_seconds->Observe(ttft / 1000.0);
    if (n_out > 1) m.time_per_token_seconds->Observe(decode_ms / 1000.0 / (n_out - 1));
  }
  const std::string recovered =
      a.recoveries == 0
          ? ""
          : absl::StrCat(", recovered ", a.recoveries, " time(s) (replays took ", a.replay_reused,
                         " of ", a.replay_positions, " positions from KV)");
  // Tokens that came with an accepted draft took no trip of their own.
  const std::string speculated =
      a.drafted == 0 ? ""
                     : absl::StrCat(", drafts ", a.accepted, "/", a.drafted, " accepted (",
                                    absl::SixDigits(static_cast<double>(n_out) /
                                                    std::max<uint32_t>(1, n_out - a.accepted)),
                                    " tokens a trip)");
  spdlog::info(
      "request {} {}: {} tokens in ({} cached), {} out, ttft {:.1f} ms, {:.1f} tokens/s, plan "
      "{}{}{}",
      a.request.request_id, how, a.request.generation.prompt.size(), a.cached_tokens, n_out, ttft,
      tps, DescribePlan(a.request.plan), speculated, recovered);
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
      (void)context_.transport->DropSession(stage.node_id(), session_id);
  });
}

void OriginRegistry::CleanUpStages(const OriginRequest& request, uint32_t attempt,
                                   v1::FinishReason finish) {
  // Stages still working on a cancelled or failed request must stop. Their
  // sessions stay consistent either way (a step commits whole or not at
  // all, and every reuse is checked by digest), but a failed request's
  // session is not worth keeping.
  const bool cancel = finish != v1::FINISH_REASON_STOP && finish != v1::FINISH_REASON_LENGTH;
  const bool drop = !request.generation.keep_session || finish == v1::FINISH_REASON_ERROR;
  if (!cancel && !drop) return;
  // Best effort, off the caller's thread: a dead stage must not stall it.
  cleanup_.Post([this, plan = request.plan, id = StageRequestId(request.request_id, attempt),
                 session_id = request.session_id(), cancel, drop] {
    for (const v1::PlanStage& stage : plan.stages()) {
      if (cancel) (void)context_.transport->Cancel(stage.node_id(), id);
      if (drop) (void)context_.transport->DropSession(stage.node_id(), session_id);
    }
  });
}

}  // namespace ringlm
