// Admission of generations: at most max_running at once, and behind them a
// bounded first-come, first-served line.
//
// What it is for: past the limit a request waits for a slot instead of
// being turned away, up to max_queued of them for at most max_wait each.
// When the line is full, the request is refused at once with a hint of
// when to retry (HTTP 429 with Retry-After); a request that waited max_wait
// without a slot gets 503 with the same hint.
//
// Thread-safe. A Ticket is one running slot; destroying it frees the slot
// for the first in line. Tickets must not outlive the Admission. Shutdown
// makes every waiter give up (Unavailable) and refuses new requests.
//
// Cost: Admit and the ticket's release take one mutex; waiters wait on it
// (absl::Mutex re-checks their conditions when a slot frees).
#ifndef RINGLM_API_ADMISSION_H_
#define RINGLM_API_ADMISSION_H_

#include <cstdint>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/metrics.h"

namespace ringlm {

// What Admission reports; every pointer may be null.
struct AdmissionMetrics {
  Gauge* running = nullptr;
  Gauge* queued = nullptr;
  Counter* refused_full = nullptr;     // the line was full (429)
  Counter* refused_timeout = nullptr;  // waited max_wait in vain (503)
  Histogram* wait_seconds = nullptr;   // time in line of each admitted request
};

// ringlm_api_running, ringlm_api_queued, ringlm_api_refused_total{reason}
// and ringlm_api_queue_wait_seconds in `registry`.
absl::StatusOr<AdmissionMetrics> RegisterAdmissionMetrics(MetricsRegistry& registry);

struct AdmissionOptions {
  int max_running = 64;                         // generations at once (at least 1)
  int max_queued = 256;                         // waiting behind them (0 = refuse at once)
  absl::Duration max_wait = absl::Seconds(60);  // longest wait in line
  AdmissionMetrics metrics;                     // must outlive the Admission
};

class Admission {
 public:
  // One running slot; released on destruction (or when moved from).
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept : owner_(other.owner_), start_(other.start_) {
      other.owner_ = nullptr;
    }
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket();

   private:
    friend class Admission;
    Ticket(Admission* owner, absl::Time start) : owner_(owner), start_(start) {}
    Admission* owner_;
    absl::Time start_;
  };

  explicit Admission(AdmissionOptions options);

  // A running slot, now or after waiting in line. Errors:
  //   ResourceExhausted, OpenAI code rate_limit_exceeded: the line is full;
  //   ResourceExhausted, code server_overloaded: waited max_wait in vain;
  //   Unavailable: shutting down.
  // Each ResourceExhausted carries a retry hint (api_error.h's
  // RetryAfterSeconds).
  absl::StatusOr<Ticket> Admit();

  // Wakes every waiter with Unavailable; later Admit calls fail the same way.
  void Shutdown();

  int running() const;
  int queued() const;

 private:
  void Release(absl::Time start);
  // Publishes running_ and the line's length.
  void ReportLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Seconds until a slot is likely to free for a newcomer: the mean running
  // time so far, times the line ahead of it per slot, in [1, 60].
  int RetryHintLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A running slot for a request that came at `arrived`.
  Ticket TakeSlotLocked(absl::Time arrived) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  AdmissionOptions options_;  // max_running at least 1; not changed after construction
  mutable absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<uint64_t> line_ ABSL_GUARDED_BY(mu_);  // waiters' numbers, first in front
  uint64_t next_number_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  double mean_running_s_ ABSL_GUARDED_BY(mu_) = 0;  // moving average of slot hold time
};

}  // namespace ringlm

#endif  // RINGLM_API_ADMISSION_H_
