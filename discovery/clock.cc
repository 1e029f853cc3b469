#include "discovery/clock.h"

namespace ringlm {

Clock* SystemClock::Get() {
  static SystemClock* const clock = new SystemClock();
  return clock;
}

SteadyTime FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

WallTime FakeClock::WallNow() const {
  absl::MutexLock lock(&mu_);
  return wall_now_;
}

void FakeClock::Advance(std::chrono::steady_clock::duration d) {
  absl::MutexLock lock(&mu_);
  now_ += d;
  wall_now_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
}

void FakeClock::SetWallNow(WallTime t) {
  absl::MutexLock lock(&mu_);
  wall_now_ = t;
}

uint64_t UnixMillis(WallTime t) {
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  return ms < 0 ? 0 : static_cast<uint64_t>(ms);
}

}  // namespace ringlm
