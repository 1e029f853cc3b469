// The steps waiting for a stage's worker, taken in batches.
#ifndef RINGLM_DAEMON_STAGE_STEP_QUEUE_H_
#define RINGLM_DAEMON_STAGE_STEP_QUEUE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/metrics.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// The key a stage keeps `origin`'s session `session_id` under: sessions live
// in their origin's namespace, so no head can touch another head's KV.
std::string SessionKey(const std::string& origin, const std::string& session_id);

// What a batch may hold at most.
struct BatchLimits {
  uint32_t max_tokens = 1024;
  uint32_t max_steps = 64;
};

// A bounded FIFO of steps (by count, and by the bytes of their messages).
// PopBatch takes the oldest step and, in arrival order, every later one that
// can run beside it in one forward pass: the same layer range, and no
// session (its own or the one it forks from) that another step of the batch
// touches. A session's steps therefore run in the order they came, and a
// step waits at most until the batches before it are done. Thread-safe.
class StepQueue {
 public:
  // `wait_seconds` (may be null) observes how long each step waited.
  StepQueue(size_t max_steps, uint64_t max_bytes, Histogram* wait_seconds = nullptr);

  // False (and the step is dropped) when full or stopped.
  bool Push(v1::StageStepRequest step);
  // Blocks until a step waits or Stop(); empty only after Stop().
  std::vector<v1::StageStepRequest> PopBatch(const BatchLimits& limits);
  // Blocks until at least `n` steps wait, Stop(), or `timeout`. False once
  // stopped.
  bool AwaitSteps(size_t n, absl::Duration timeout);
  bool stopped() const;
  // Wakes PopBatch for good and drops what waits.
  void Stop();
  size_t pending() const;
  uint64_t pending_bytes() const;

 private:
  struct Entry {
    v1::StageStepRequest step;
    uint64_t bytes = 0;
    std::chrono::steady_clock::time_point queued;
  };

  const size_t max_steps_;
  const uint64_t max_bytes_;
  Histogram* const wait_seconds_;
  mutable absl::Mutex mu_;
  std::deque<Entry> steps_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_STAGE_STEP_QUEUE_H_
