// Recovery of an origin's requests (docs/recovery.md): re-planning after a
// stage fails, the cache-miss retry, and the watchdog that finds stalls and
// dead stages nobody reported.
#ifndef RINGLM_DAEMON_ORIGIN_RECOVERY_H_
#define RINGLM_DAEMON_ORIGIN_RECOVERY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "base/task_queue.h"
#include "daemon/origin/origin_options.h"
#include "daemon/origin/prompt_pump.h"
#include "daemon/origin/request_state.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// Moves the requests of a RequestTable through kRecovering (see the
// diagram in request_state.h). When an attempt fails (a stage's report, a
// failed send, a stall the watchdog finds, a stage that stops answering
// health calls), Recover starts the next attempt in kRecovering and, on the
// recovery thread, Replan finds the failed nodes, waits for a plan without
// them and replays prompt plus reply on it through the pump. A status that
// says the request itself is bad, max_recoveries spent, or no plan within
// recovery_timeout end the request through `fail`. A cache miss instead
// restarts the prompt without reuse (RetryWithoutReuse, on the pump's
// thread, after every stage cancelled the failed attempt).
//
// Owns the recovery thread and the watchdog thread; borrows the context,
// the table, the pump and the cleanup queue (for best-effort cancels),
// which must outlive it. `fail` is called without locks. Thread-safe.
class OriginRecovery {
 public:
  using Fail = std::function<void(const std::string& request_id, const absl::Status& status)>;
  OriginRecovery(const OriginContext* context, RequestTable* table, PromptPump* pump,
                 TaskQueue* cleanup, Fail fail);
  ~OriginRecovery();
  OriginRecovery(const OriginRecovery&) = delete;
  OriginRecovery& operator=(const OriginRecovery&) = delete;

  // `attempt` of the request failed: recover it, or fail it when `status`
  // says the request itself is bad or it has used its recoveries. Nothing
  // happens when the request no longer runs that attempt, or recovers.
  void Recover(const std::string& request_id, uint32_t attempt, const absl::Status& status);
  // Queues RetryWithoutReuse on the pump's thread; false when it stopped.
  bool RetryWithoutReuseLater(const std::string& request_id, uint32_t failed_attempt);
  // The first token of a recovered attempt: counts the pause and the reuse
  // into `a`, which the caller holds under the table's lock.
  void ResumedLocked(ActiveRequest& a) const;
  // Joins the watchdog; then Stop lets a running replan finish and drops
  // the rest. Both idempotent.
  void StopWatchdog();
  void Stop();

 private:
  // On the recovery thread: finds the failed nodes, waits for a plan
  // without them, and replays.
  void Replan(const std::string& request_id, uint32_t attempt, v1::Plan failed_plan,
              absl::Status why);
  // A stage missed the claimed prefix: cancel the attempt everywhere, then
  // resend the whole prompt without reuse.
  void RetryWithoutReuse(const std::string& request_id, uint32_t failed_attempt);
  void WatchdogLoop();

  const OriginContext& context_;
  RequestTable* const table_;
  PromptPump* const pump_;
  TaskQueue* const cleanup_;
  const Fail fail_;
  bool watchdog_stopping_ ABSL_GUARDED_BY(table_->mu) = false;
  TaskQueue recovery_;    // Replan: waits for plans
  std::thread watchdog_;  // last: it runs WatchdogLoop
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_ORIGIN_RECOVERY_H_
