// The time sources of discovery: a seam so tests can drive peer expiry and
// announcement freshness with a fake clock instead of sleeping.
#ifndef RINGLM_DISCOVERY_CLOCK_H_
#define RINGLM_DISCOVERY_CLOCK_H_

#include <chrono>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringlm {

using SteadyTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;

// Two clocks in one seam. Now() is monotonic and measures intervals (peer
// expiry); WallNow() is the calendar time that announcements carry as their
// timestamp, which other hosts compare with theirs (it may step when NTP
// corrects it). Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime Now() const = 0;
  virtual WallTime WallNow() const = 0;
};

// std::chrono::steady_clock and std::chrono::system_clock. Stateless; Get()
// returns a process-wide instance that lives forever.
class SystemClock final : public Clock {
 public:
  static Clock* Get();
  SteadyTime Now() const override { return std::chrono::steady_clock::now(); }
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }
};

// A clock that moves only when told to. Advance() moves both times together;
// SetWallNow() moves the wall time alone (an NTP step). Thread-safe. For tests.
class FakeClock final : public Clock {
 public:
  // 2025-01-01T00:00:00Z: a fixed, plausible wall time for tests.
  static constexpr WallTime kDefaultWallStart = WallTime{} + std::chrono::seconds(1735689600);

  explicit FakeClock(SteadyTime start = SteadyTime{} + std::chrono::hours(1),
                     WallTime wall_start = kDefaultWallStart)
      : now_(start), wall_now_(wall_start) {}
  SteadyTime Now() const override;
  WallTime WallNow() const override;
  void Advance(std::chrono::steady_clock::duration d);
  void SetWallNow(WallTime t);

 private:
  mutable absl::Mutex mu_;
  SteadyTime now_ ABSL_GUARDED_BY(mu_);
  WallTime wall_now_ ABSL_GUARDED_BY(mu_);
};

// Milliseconds since the Unix epoch; 0 for times before it.
uint64_t UnixMillis(WallTime t);

}  // namespace ringlm

#endif  // RINGLM_DISCOVERY_CLOCK_H_
