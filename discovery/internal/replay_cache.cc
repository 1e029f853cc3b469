#include "discovery/internal/replay_cache.h"

#include <algorithm>

namespace ringlm::internal {
namespace {

uint64_t LoadLe64(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes.size() && i < 8; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return v;
}

}  // namespace

ReplayCache::ReplayCache(std::chrono::milliseconds window, size_t capacity)
    : window_ms_(static_cast<uint64_t>(std::max<int64_t>(window.count(), 1))),
      capacity_(std::max<size_t>(capacity, 1)) {}

void ReplayCache::Drop() {
  auto oldest = by_time_.begin();
  watermark_ms_ = std::max(watermark_ms_, oldest->first);
  by_nonce_.erase(oldest->second);
  by_time_.erase(oldest);
}

ReplayCache::Verdict ReplayCache::Admit(std::string_view nonce, uint64_t timestamp_ms,
                                        uint64_t now_ms) {
  // Expire entries whose datagrams are stale by now.
  while (!by_time_.empty() && now_ms > by_time_.begin()->first &&
         now_ms - by_time_.begin()->first > window_ms_) {
    Drop();
  }
  const Nonce key{LoadLe64(nonce.substr(0, std::min<size_t>(nonce.size(), 8))),
                  LoadLe64(nonce.size() > 8 ? nonce.substr(8) : std::string_view())};
  if (by_nonce_.contains(key)) return Verdict::kReplayed;
  if (timestamp_ms <= watermark_ms_) return Verdict::kTooOld;
  if (by_nonce_.size() >= capacity_) {
    // Full of fresh entries: the oldest timestamp goes. If that would be this
    // one, refuse it rather than admit what would be forgotten at once (it was
    // never admitted, so nothing needs to remember it).
    if (timestamp_ms <= by_time_.begin()->first) return Verdict::kTooOld;
    Drop();
  }
  by_nonce_.insert(key);
  by_time_.emplace(timestamp_ms, key);
  return Verdict::kFresh;
}

}  // namespace ringlm::internal
