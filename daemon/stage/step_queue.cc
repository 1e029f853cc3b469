#include "daemon/stage/step_queue.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace ringlm {
namespace {

const v1::PlanStage& StageOf(const v1::StageStepRequest& step) {
  return step.plan().stages(static_cast<int>(step.stage_index()));
}

}  // namespace

std::string SessionKey(const std::string& origin, const std::string& session_id) {
  return absl::StrCat(origin, "/", session_id);
}

StepQueue::StepQueue(size_t max_steps, uint64_t max_bytes, Histogram* wait_seconds)
    : max_steps_(max_steps), max_bytes_(max_bytes), wait_seconds_(wait_seconds) {}

bool StepQueue::Push(v1::StageStepRequest step) {
  const uint64_t bytes = step.ByteSizeLong();
  absl::MutexLock lock(&mu_);
  if (stopping_ || steps_.size() >= max_steps_ || bytes > max_bytes_ - bytes_) return false;
  steps_.push_back(Entry{std::move(step), bytes, std::chrono::steady_clock::now()});
  bytes_ += bytes;
  return true;
}

bool StepQueue::AwaitSteps(size_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || steps_.size() >= n; };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  return !stopping_;
}

bool StepQueue::stopped() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

std::vector<v1::StageStepRequest> StepQueue::PopBatch(const BatchLimits& limits) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](StepQueue* q)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) { return q->stopping_ || !q->steps_.empty(); },
      this));
  std::vector<v1::StageStepRequest> batch;
  if (stopping_) return batch;
  const v1::PlanStage range = StageOf(steps_.front().step);
  std::set<std::string> sessions;  // touched by the batch, or skipped over
  uint32_t tokens = 0;
  const auto now = std::chrono::steady_clock::now();
  for (auto it = steps_.begin(); it != steps_.end() && batch.size() < limits.max_steps;) {
    const v1::StageStepRequest& step = it->step;
    const v1::PlanStage& stage = StageOf(step);
    const std::string own = SessionKey(step.origin(), step.session_id());
    const std::string source =
        step.fork_from().empty() ? "" : SessionKey(step.origin(), step.fork_from());
    const uint32_t n = static_cast<uint32_t>(step.tokens_size());
    const bool fits =
        batch.empty() ||
        (tokens + n <= limits.max_tokens && stage.first_layer() == range.first_layer() &&
         stage.last_layer() == range.last_layer() && sessions.count(own) == 0 &&
         (source.empty() || sessions.count(source) == 0));
    // A step left behind still holds its sessions: nothing of theirs may
    // overtake it.
    sessions.insert(own);
    if (!source.empty()) sessions.insert(source);
    if (!fits) {
      ++it;
      continue;
    }
    tokens += n;
    bytes_ -= it->bytes;
    if (wait_seconds_ != nullptr) {
      wait_seconds_->Observe(std::chrono::duration<double>(now - it->queued).count());
    }
    batch.push_back(std::move(it->step));
    it = steps_.erase(it);
  }
  return batch;
}

void StepQueue::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  steps_.clear();
  bytes_ = 0;
}

size_t StepQueue::pending() const {
  absl::MutexLock lock(&mu_);
  return steps_.size();
}

uint64_t StepQueue::pending_bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace ringlm
