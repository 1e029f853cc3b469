#include "api/admission.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/api_error.h"
#include "base/status_macros.h"

namespace ringlm {
namespace {

void Bump(Counter* counter) {
  if (counter != nullptr) counter->Increment();
}

}  // namespace

absl::StatusOr<AdmissionMetrics> RegisterAdmissionMetrics(MetricsRegistry& registry) {
  AdmissionMetrics m;
  RINGLM_ASSIGN_OR_RETURN(m.running,
                          registry.AddGauge("ringlm_api_running", "generations the API runs now"));
  RINGLM_ASSIGN_OR_RETURN(
      m.queued,
      registry.AddGauge("ringlm_api_queued", "requests waiting in line for a running slot"));
  constexpr char kRefused[] = "ringlm_api_refused_total";
  constexpr char kRefusedHelp[] = "requests refused by admission";
  RINGLM_ASSIGN_OR_RETURN(m.refused_full,
                          registry.AddCounter(kRefused, kRefusedHelp, {{"reason", "queue_full"}}));
  RINGLM_ASSIGN_OR_RETURN(m.refused_timeout,
                          registry.AddCounter(kRefused, kRefusedHelp, {{"reason", "timeout"}}));
  RINGLM_ASSIGN_OR_RETURN(m.wait_seconds,
                          registry.AddHistogram("ringlm_api_queue_wait_seconds",
                                                "time admitted requests waited in line",
                                                ExponentialBuckets(0.001, 4, 10)));
  return m;
}

Admission::Ticket::~Ticket() {
  if (owner_ != nullptr) owner_->Release(start_);
}

Admission::Admission(AdmissionOptions options) : options_(options) {
  options_.max_running = std::max(1, options_.max_running);
}

absl::StatusOr<Admission::Ticket> Admission::Admit() {
  absl::MutexLock lock(&mu_);
  const int max_running = options_.max_running;
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  const absl::Time arrived = absl::Now();
  if (running_ < max_running && line_.empty()) return TakeSlotLocked(arrived);
  if (static_cast<int>(line_.size()) >= options_.max_queued) {
    Bump(options_.metrics.refused_full);
    return WithRetryAfter(
        WithOpenAiCode(absl::ResourceExhaustedError(
                           absl::StrCat("Too many requests: ", max_running, " are running and ",
                                        line_.size(), " are waiting (the limits); retry later")),
                       "rate_limit_exceeded"),
        RetryHintLocked());
  }
  const uint64_t number = next_number_++;
  line_.push_back(number);
  ReportLocked();
  auto my_turn = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || (line_.front() == number && running_ < max_running);
  };
  const bool turn = mu_.AwaitWithTimeout(absl::Condition(&my_turn), options_.max_wait);
  line_.erase(std::find(line_.begin(), line_.end(), number));
  ReportLocked();
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  if (!turn) {
    Bump(options_.metrics.refused_timeout);
    return WithRetryAfter(
        WithOpenAiCode(absl::ResourceExhaustedError(absl::StrCat(
                           "The server is overloaded: no generation slot freed within ",
                           absl::FormatDuration(options_.max_wait), "; retry later")),
                       "server_overloaded"),
        RetryHintLocked());
  }
  return TakeSlotLocked(arrived);
}

Admission::Ticket Admission::TakeSlotLocked(absl::Time arrived) {
  ++running_;
  ReportLocked();
  const absl::Time now = absl::Now();
  if (options_.metrics.wait_seconds != nullptr) {
    options_.metrics.wait_seconds->Observe(absl::ToDoubleSeconds(now - arrived));
  }
  return Ticket(this, now);
}

void Admission::Release(absl::Time start) {
  const double held_s = absl::ToDoubleSeconds(absl::Now() - start);
  absl::MutexLock lock(&mu_);
  --running_;
  ReportLocked();
  mean_running_s_ = mean_running_s_ == 0 ? held_s : 0.9 * mean_running_s_ + 0.1 * held_s;
}

void Admission::Shutdown() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

void Admission::ReportLocked() {
  if (options_.metrics.running != nullptr) options_.metrics.running->Set(running_);
  if (options_.metrics.queued != nullptr) options_.metrics.queued->Set(line_.size());
}

int Admission::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

int Admission::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(line_.size());
}

int Admission::RetryHintLocked() const {
  const double per_slot = static_cast<double>(line_.size() + 1) / options_.max_running;
  return static_cast<int>(std::clamp(std::ceil(mean_running_s_ * per_slot), 1.0, 60.0));
}

}  // namespace ringlm
