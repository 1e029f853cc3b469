#include "daemon/origin/recovery.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/rpc/proto_convert.h"
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

}  // namespace

OriginRecovery::OriginRecovery(const OriginContext* context, RequestTable* table, PromptPump* pump,
                               TaskQueue* cleanup, Fail fail)
    : context_(*context),
      table_(table),
      pump_(pump),
      cleanup_(cleanup),
      fail_(std::move(fail)),
      recovery_("origin-recovery"),
      watchdog_([this] { WatchdogLoop(); }) {}

OriginRecovery::~OriginRecovery() { Stop(); }

void OriginRecovery::StopWatchdog() {
  {
    absl::MutexLock lock(&table_->mu);
    watchdog_stopping_ = true;
  }
  if (watchdog_.joinable()) watchdog_.join();
}

void OriginRecovery::Stop() {
  StopWatchdog();
  recovery_.Stop();
}

void OriginRecovery::Recover(const std::string& request_id, uint32_t attempt,
                             const absl::Status& status) {
  if (!IsRecoverable(status)) {
    fail_(request_id, status);
    return;
  }
  const OriginOptions& options = context_.options;
  v1::Plan plan;
  uint32_t recoveries = 0;
  {
    absl::MutexLock lock(&table_->mu);
    ActiveRequest* a = table_->FindLocked(request_id, attempt);
    if (a == nullptr || a->Recovering()) return;
    recoveries = a->recoveries;
    if (recoveries < options.max_recoveries) {
      a->StartRecovery(std::chrono::steady_clock::now());
      plan = a->request.plan;
      pump_->ScheduleLocked();  // what it had in flight no longer counts
    }
  }
  if (recoveries >= options.max_recoveries) {
    fail_(request_id, absl::Status(status.code(), absl::StrCat(status.message(), " (after ",
                                                               recoveries, " recoveries)")));
    return;
  }
  spdlog::warn("request {}: {}; recovering ({} of {})", request_id, status.ToString(),
               recoveries + 1, options.max_recoveries);
  if (context_.metrics != nullptr) context_.metrics->recoveries->Increment();
  // The failed attempt stops wherever it still runs (best effort: a dead or
  // hung stage cannot answer, and the cleanup thread must not hold up the
  // recovery). Its late steps cannot harm the session: every attempt
  // computes the same tokens at the same positions, and every claim is
  // checked by digest.
  cleanup_->Post([this, plan, id = StageRequestId(request_id, attempt)] {
    for (const v1::PlanStage& stage : plan.stages()) {
      (void)context_.transport->Cancel(stage.node_id(), id);
    }
  });
  if (!recovery_.Post([this, request_id, attempt, plan, status] {
        Replan(request_id, attempt + 1, plan, status);
      })) {
    fail_(request_id, absl::UnavailableError("the node is shutting down"));
  }
}

void OriginRecovery::Replan(const std::string& request_id, uint32_t attempt, v1::Plan failed_plan,
                            absl::Status why) {
  const OriginClusterHooks& cluster = context_.cluster;
  // Which stages failed: they must not be in the next plan. A stage that
  // answers may have failed only this request (its queue was full, say); one
  // that restarted serves as a member (reporting it would drop its new
  // instance from the cluster), and the replay recomputes there.
  std::vector<std::string> avoid;
  for (const v1::PlanStage& stage : failed_plan.stages()) {
    if (stage.node_id() == context_.self_id) continue;
    const absl::Status s = cluster.health(stage);
    if (s.ok() || IsRestartedSincePlan(s)) continue;
    avoid.push_back(stage.node_id());
    cluster.on_unreachable(stage.node_id());
  }
  absl::StatusOr<v1::Plan> plan = cluster.await_plan(
      avoid, std::chrono::steady_clock::now() + context_.options.recovery_timeout);
  if (!plan.ok()) {
    fail_(request_id,
          absl::Status(plan.status().code(),
                       absl::StrCat(why.message(), "; no new plan: ", plan.status().message())));
    return;
  }
  size_t positions = 0;
  {
    absl::MutexLock lock(&table_->mu);
    ActiveRequest* a = table_->FindLocked(request_id, attempt);
    if (a == nullptr) return;
    a->Replanned(*plan);
    a->last_progress = std::chrono::steady_clock::now();
    positions = a->request.generation.prompt.size() + a->reply.size();
    pump_->ScheduleLocked();
  }
  spdlog::info("request {}: replaying {} positions on plan {}", request_id, positions,
               DescribePlan(*plan));
}

bool OriginRecovery::RetryWithoutReuseLater(const std::string& request_id,
                                            uint32_t failed_attempt) {
  return pump_->Post(
      [this, request_id, failed_attempt] { RetryWithoutReuse(request_id, failed_attempt); });
}

void OriginRecovery::RetryWithoutReuse(const std::string& request_id, uint32_t failed_attempt) {
  v1::Plan plan;
  {
    absl::MutexLock lock(&table_->mu);
    const ActiveRequest* a = table_->FindLocked(request_id, failed_attempt);
    if (a == nullptr) return;
    plan = a->request.plan;
  }
  // Every stage forgets the failed attempt before the retry's first step, so
  // none of its late steps can touch the session again.
  const std::string old_id = StageRequestId(request_id, failed_attempt);
  for (const v1::PlanStage& stage : plan.stages()) {
    if (absl::Status s = context_.transport->Cancel(stage.node_id(), old_id); !s.ok()) {
      Recover(request_id, failed_attempt,
              absl::Status(s.code(), absl::StrCat("cancelling after a cache miss (node ",
                                                  stage.node_id(), "): ", s.message())));
      return;
    }
  }
  absl::MutexLock lock(&table_->mu);
  ActiveRequest* a = table_->FindLocked(request_id, failed_attempt);
  if (a == nullptr) return;
  a->RestartWithoutReuse();
  a->last_progress = std::chrono::steady_clock::now();
  pump_->ScheduleLocked();
}

void OriginRecovery::ResumedLocked(ActiveRequest& a) const {
  // A replay's claim that got this far held on every stage (a miss restarts
  // the attempt from position 0).
  const uint32_t positions =
      static_cast<uint32_t>(a.request.generation.prompt.size() + a.reply.size());
  a.replay_reused += a.request.generation.reuse.reuse_len;
  a.replay_positions += positions;
  const double pause =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - a.failed_at).count();
  spdlog::info("request {} resumed {:.0f} ms after the failure: {} of {} positions from KV",
               a.request.request_id, pause * 1000, a.request.generation.reuse.reuse_len, positions);
  if (const OriginMetrics* m = context_.metrics; m != nullptr) {
    m->recovery_seconds->Observe(pause);
    m->replay_reused_tokens->Increment(a.request.generation.reuse.reuse_len);
    m->replay_recomputed_tokens->Increment(positions - a.request.generation.reuse.reuse_len);
  }
}

void OriginRecovery::WatchdogLoop() {
  const OriginOptions& options = context_.options;
  auto next_health = std::chrono::steady_clock::now() + options.health_interval;
  while (true) {
    {
      absl::MutexLock lock(&table_->mu);
      if (table_->mu.AwaitWithTimeout(absl::Condition(&watchdog_stopping_),
                                      absl::FromChrono(kWatchdogTick))) {
        return;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::pair<std::string, uint32_t>> stalled;  // id, attempt
    std::map<std::string, v1::PlanStage> stages;  // node id -> stage, over running requests
    {
      absl::MutexLock lock(&table_->mu);
      for (const auto& [id, a] : table_->requests) {
        if (a.Recovering()) continue;
        if (now - a.last_progress > options.no_progress_timeout)
          stalled.emplace_back(id, a.attempt);
        for (const v1::PlanStage& s : a.request.plan.stages()) stages[s.node_id()] = s;
      }
    }
    for (const auto& [id, attempt] : stalled) {
      Recover(id, attempt,
              absl::DeadlineExceededError(
                  absl::StrCat("no token for ", options.no_progress_timeout.count(), " ms")));
    }
    if (now < next_health) continue;
    next_health = now + options.health_interval;
    for (const auto& [node_id, stage] : stages) {
      if (node_id == context_.self_id) continue;
      absl::Status s = context_.cluster.health(stage);
      if (s.ok()) continue;
      // Restarted: its requests replay, but it stays a member.
      if (!IsRestartedSincePlan(s)) context_.cluster.on_unreachable(node_id);
      std::vector<std::pair<std::string, uint32_t>> affected;
      {
        absl::MutexLock lock(&table_->mu);
        for (const auto& [id, a] : table_->requests) {
          for (const v1::PlanStage& st : a.request.plan.stages()) {
            if (st.node_id() == node_id && !a.Recovering()) affected.emplace_back(id, a.attempt);
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
