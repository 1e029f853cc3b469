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

void FakeClock::Advance(std::chrono::steady_clock::duration d) {
  absl::MutexLock lock(&mu_);
  now_ += d;
}

}  // namespace ringlm
