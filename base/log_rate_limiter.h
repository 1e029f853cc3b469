// LogRateLimiter: at most one log line per key per interval, so a flood of
// bad inputs (packets, peer messages) cannot flood the log.
//
// Ownership: owns its per-key state, bounded by `max_keys`: keys should come
// from a small fixed set (reasons, destinations), but a key derived from
// input (a sender, an interface that comes and goes) cannot grow the state
// without bound. When a new key finds the table full, keys idle for a whole
// interval (which would be allowed anyway and have nothing suppressed) are
// forgotten; if none is, the new key shares one overflow slot with every
// other key that did not fit, and is rate-limited together with them.
// Thread-safety: thread-safe.
#ifndef RINGLM_BASE_LOG_RATE_LIMITER_H_
#define RINGLM_BASE_LOG_RATE_LIMITER_H_

#include <chrono>
#include <cstddef>
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
  static constexpr size_t kDefaultMaxKeys = 64;

  explicit LogRateLimiter(std::chrono::steady_clock::duration interval,
                          size_t max_keys = kDefaultMaxKeys)
      : interval_(interval), max_keys_(max_keys) {}

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
    State* s = Find(key, now);
    if (s->logged_once && now - s->last_logged < interval_) {
      ++s->suppressed;
      return false;
    }
    *suppressed = s->suppressed;
    s->suppressed = 0;
    s->logged_once = true;
    s->last_logged = now;
    return true;
  }

  // Keys with their own state (not counting the overflow slot); for tests.
  size_t tracked_keys() const {
    absl::MutexLock lock(&mu_);
    return keys_.size();
  }

 private:
  struct State {
    bool logged_once = false;
    TimePoint last_logged{};
    uint64_t suppressed = 0;
  };

  State* Find(std::string_view key, TimePoint now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = keys_.find(key);
    if (it != keys_.end()) return &it->second;
    if (keys_.size() >= max_keys_) {
      std::erase_if(keys_, [&](const auto& kv) {
        return kv.second.suppressed == 0 && now - kv.second.last_logged >= interval_;
      });
    }
    if (keys_.size() >= max_keys_) return &overflow_;
    return &keys_.emplace(std::string(key), State{}).first->second;
  }

  const std::chrono::steady_clock::duration interval_;
  const size_t max_keys_;
  mutable absl::Mutex mu_;
  std::map<std::string, State, std::less<>> keys_ ABSL_GUARDED_BY(mu_);
  State overflow_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringlm

#endif  // RINGLM_BASE_LOG_RATE_LIMITER_H_
