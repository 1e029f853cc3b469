// ReplayCache: remembers the nonces of recently accepted announcements, so a
// captured datagram sent again is recognised and dropped.
//
// Purpose: the second half of freshness. The service first drops datagrams
// whose timestamp is more than `window` (max_clock_skew) from its wall clock;
// within that window only the nonce tells a replay from a new datagram.
// Contract: Admit() returns kFresh at most once per nonce, and never for a
// datagram it cannot vouch for. Every entry it ever drops, by expiry or by
// capacity, raises a watermark to at least that entry's timestamp, and any
// datagram with a timestamp at or below the watermark is refused as kTooOld.
// So forgetting a nonce can never let its datagram back in:
//   - expiry drops an entry once now - timestamp > window, i.e. exactly when
//     its datagram has become stale and would be refused for that alone
//     (entries live at most 2 x window after insertion, since a timestamp may
//     lead our clock by up to `window`); the watermark also covers a wall
//     clock that later steps back and would make it look fresh again;
//   - capacity drops the entry with the oldest timestamp first; its replay
//     would be at or below the watermark.
// Under normal load the watermark trails the clock by `window` and refuses
// nothing that is not stale already; only a flood of more than `capacity`
// accepted datagrams per window (which needs the MAC key) makes it refuse
// some fresh ones (fail closed, counted as replays).
// Cost: O(log n) per Admit; at capacity 16384 about 1.5 MB.
// Thread-safety: none; the service uses it from its receiver thread only.
#ifndef RINGLM_DISCOVERY_INTERNAL_REPLAY_CACHE_H_
#define RINGLM_DISCOVERY_INTERNAL_REPLAY_CACHE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_set.h"

namespace ringlm::internal {

inline constexpr size_t kDefaultReplayCacheCapacity = 16384;

class ReplayCache {
 public:
  enum class Verdict {
    kFresh,     // not seen before; now remembered
    kReplayed,  // this nonce was admitted before
    kTooOld,    // timestamp at or below the watermark: its nonce may be forgotten
  };

  // Precondition: capacity >= 1, window > 0.
  ReplayCache(std::chrono::milliseconds window, size_t capacity = kDefaultReplayCacheCapacity);

  // Admits the datagram with `nonce` (kAnnouncementNonceBytes long) and
  // `timestamp_ms`, seen at our wall time `now_ms`. The caller has already
  // refused stale timestamps. Expires old entries first.
  Verdict Admit(std::string_view nonce, uint64_t timestamp_ms, uint64_t now_ms);

  size_t size() const { return by_nonce_.size(); }
  uint64_t watermark_ms() const { return watermark_ms_; }

 private:
  using Nonce = std::pair<uint64_t, uint64_t>;
  void Drop();  // drops the entry with the oldest timestamp

  const uint64_t window_ms_;
  const size_t capacity_;
  absl::flat_hash_set<Nonce> by_nonce_;
  std::set<std::pair<uint64_t, Nonce>> by_time_;  // (timestamp_ms, nonce), oldest first
  uint64_t watermark_ms_ = 0;
};

}  // namespace ringlm::internal

#endif  // RINGLM_DISCOVERY_INTERNAL_REPLAY_CACHE_H_
