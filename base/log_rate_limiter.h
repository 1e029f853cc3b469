// LogRateLimiter: at most one log line per key per interval, so a flood of
// bad packets cannot flood the log.
//
// Ownership: owns its per-key state; keys should come from a small fixed set
// (reasons, destinations), since state is kept per key forever.
// Thread-safety: thread-safe.
#ifndef RINGLM_BASE_LOG_RATE_LIMITER_H_
#define RINGLM_BASE_LOG_RATE_LIMITER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringlm {

class LogRateLimiter {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit LogRateLimiter(std::chrono::steady_clock::duration interval) : interval_(interval) {}

  // Allow() at the current time, when the count of suppressed lines is not
  // wanted.
  bool Allow(std::string_view key) {
    uint64_t suppressed = 0;
    return Allow(key, std::chrono::steady_clock::now(), &suppressed);
  }

  // True when a line for `key` may be logged at `now`: the first call for a
  // key, and then the first call at least `interval` after the last allowed
  // one. On true, *suppressed gets the number of calls refused since the last
  // allowed one.
  bool Allow(std::string_view key, TimePoint now, uint64_t* suppressed) {
    absl::MutexLock lock(&mu_);
    auto it = keys_.find(key);
    if (it == keys_.end()) it = keys_.emplace(std::string(key), State{}).first;
    State& s = it->second;
    if (s.logged_once && now - s.last_logged < interval_) {
      ++s.suppressed;
      return false;
    }
    *suppressed = s.suppressed;
    s.suppressed = 0;
    s.logged_once = true;
    s.last_logged = now;
    return true;
  }

 private:
  struct State {
    bool logged_once = false;
    TimePoint last_logged{};
    uint64_t suppressed = 0;
  };
  const std::chrono::steady_clock::duration interval_;
  absl::Mutex mu_;
  std::map<std::string, State, std::less<>> keys_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringlm

#endif  // RINGLM_BASE_LOG_RATE_LIMITER_H_
