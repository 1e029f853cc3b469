#include "api/admission.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/api_error.h"

namespace ringlm {
namespace {

constexpr char kRetryAfterUrl[] = "ringlm.api/retry_after";

absl::Status WithRetryHint(absl::Status status, int seconds) {
  status.SetPayload(kRetryAfterUrl, absl::Cord(std::to_string(seconds)));
  return status;
}

}  // namespace

Admission::Ticket::~Ticket() {
  if (owner_ != nullptr) owner_->Release(start_);
}

Admission::Admission(AdmissionOptions options) : options_(options) {}

absl::StatusOr<Admission::Ticket> Admission::Admit() {
  absl::MutexLock lock(&mu_);
  const int max_running = std::max(1, options_.max_running);
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  if (running_ < max_running && line_.empty()) {
    ++running_;
    return Ticket(this, absl::Now());
  }
  if (static_cast<int>(line_.size()) >= options_.max_queued) {
    return WithRetryHint(
        WithOpenAiCode(absl::ResourceExhaustedError(
                           absl::StrCat("Too many requests: ", max_running, " are running and ",
                                        line_.size(), " are waiting (the limits); retry later")),
                       "rate_limit_exceeded"),
        RetryHintLocked());
  }
  const uint64_t number = next_number_++;
  line_.push_back(number);
  auto my_turn = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || (line_.front() == number && running_ < max_running);
  };
  const bool turn = mu_.AwaitWithTimeout(absl::Condition(&my_turn), options_.max_wait);
  line_.erase(std::find(line_.begin(), line_.end(), number));
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  if (!turn) {
    return WithRetryHint(
        WithOpenAiCode(absl::ResourceExhaustedError(absl::StrCat(
                           "The server is overloaded: no generation slot freed within ",
                           absl::FormatDuration(options_.max_wait), "; retry later")),
                       "server_overloaded"),
        RetryHintLocked());
  }
  ++running_;
  return Ticket(this, absl::Now());
}

void Admission::Release(absl::Time start) {
  const double held_s = absl::ToDoubleSeconds(absl::Now() - start);
  absl::MutexLock lock(&mu_);
  --running_;
  mean_running_s_ = mean_running_s_ == 0 ? held_s : 0.9 * mean_running_s_ + 0.1 * held_s;
}

void Admission::Shutdown() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
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
  const double per_slot = static_cast<double>(line_.size() + 1) / std::max(1, options_.max_running);
  return static_cast<int>(std::clamp(std::ceil(mean_running_s_ * per_slot), 1.0, 60.0));
}

int RetryAfterSeconds(const absl::Status& status) {
  const auto payload = status.GetPayload(kRetryAfterUrl);
  int seconds = 0;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &seconds)) return 0;
  return seconds;
}

}  // namespace ringlm
