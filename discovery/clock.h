// The time source of discovery: a seam so tests can drive peer expiry with a
// fake clock instead of sleeping.
#ifndef RINGLM_DISCOVERY_CLOCK_H_
#define RINGLM_DISCOVERY_CLOCK_H_

#include <chrono>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringlm {

using SteadyTime = std::chrono::steady_clock::time_point;

// A monotonic clock. Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime Now() const = 0;
};

// std::chrono::steady_clock. Stateless; Get() returns a process-wide instance
// that lives forever.
class SystemClock final : public Clock {
 public:
  static Clock* Get();
  SteadyTime Now() const override { return std::chrono::steady_clock::now(); }
};

// A clock that moves only when told to. Thread-safe. For tests.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(SteadyTime start = SteadyTime{} + std::chrono::hours(1)) : now_(start) {}
  SteadyTime Now() const override;
  void Advance(std::chrono::steady_clock::duration d);

 private:
  mutable absl::Mutex mu_;
  SteadyTime now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringlm

#endif  // RINGLM_DISCOVERY_CLOCK_H_
