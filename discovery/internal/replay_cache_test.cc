#include "discovery/internal/replay_cache.h"

#include <chrono>
#include <string>

#include "gtest/gtest.h"

namespace ringlm::internal {
namespace {

using std::chrono::milliseconds;
using Verdict = ReplayCache::Verdict;

// A 16-byte nonce from a number; differs in both halves for i and j != i.
std::string Nonce(uint64_t i) {
  std::string n(16, '\0');
  for (int b = 0; b < 8; ++b) {
    n[b] = static_cast<char>(i >> (8 * b));
    n[8 + b] = static_cast<char>((i * 0x9E3779B97F4A7C15ull) >> (8 * b));
  }
  return n;
}

constexpr uint64_t kNow = 1'735'689'600'000;  // ms

TEST(ReplayCacheTest, SecondSightOfANonceIsAReplay) {
  ReplayCache cache(milliseconds(30000));
  EXPECT_EQ(cache.Admit(Nonce(1), kNow, kNow), Verdict::kFresh);
  EXPECT_EQ(cache.Admit(Nonce(1), kNow, kNow + 10), Verdict::kReplayed);
  // The nonce alone decides, not the timestamp beside it.
  EXPECT_EQ(cache.Admit(Nonce(1), kNow + 5, kNow + 10), Verdict::kReplayed);
  EXPECT_EQ(cache.Admit(Nonce(2), kNow, kNow + 10), Verdict::kFresh);
  // Nonces that share one half are still different nonces.
  std::string half = Nonce(1);
  half[15] ^= 1;
  EXPECT_EQ(cache.Admit(half, kNow, kNow + 10), Verdict::kFresh);
  EXPECT_EQ(cache.size(), 3u);
}

TEST(ReplayCacheTest, EntriesLiveUntilTheirTimestampIsStale) {
  ReplayCache cache(milliseconds(30000));
  // Stamped 30 s ahead of our clock (the most the skew allows): kept for 60 s.
  EXPECT_EQ(cache.Admit(Nonce(1), kNow + 30000, kNow), Verdict::kFresh);
  EXPECT_EQ(cache.Admit(Nonce(2), kNow, kNow), Verdict::kFresh);
  EXPECT_EQ(cache.Admit(Nonce(3), kNow + 1, kNow + 30000), Verdict::kFresh);  // 2 not yet stale
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.Admit(Nonce(2), kNow, kNow + 30000), Verdict::kReplayed);
  // 30001 ms on, entry 2's timestamp is stale: it expires, and its replay is
  // refused by the watermark (a clock stepped back would not let it in).
  EXPECT_EQ(cache.Admit(Nonce(4), kNow + 30001, kNow + 30001), Verdict::kFresh);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.watermark_ms(), kNow);
  EXPECT_EQ(cache.Admit(Nonce(2), kNow, kNow + 30001), Verdict::kTooOld);
  // Entry 1 lives until its timestamp is 30 s old: 60 s after insertion.
  EXPECT_EQ(cache.Admit(Nonce(1), kNow + 30000, kNow + 60000), Verdict::kReplayed);
  EXPECT_EQ(cache.Admit(Nonce(5), kNow + 60001, kNow + 60001), Verdict::kFresh);
  EXPECT_EQ(cache.size(), 2u);  // 1 and 3 expired; 4 is exactly 30 s old and stays, and 5
  EXPECT_EQ(cache.Admit(Nonce(1), kNow + 30000, kNow + 60001), Verdict::kTooOld);
}

TEST(ReplayCacheTest, CapacityDropsTheOldestAndNeverReadmitsIt) {
  ReplayCache cache(milliseconds(30000), /*capacity=*/4);
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(cache.Admit(Nonce(i), kNow + 10 * i, kNow), Verdict::kFresh);
  }
  // Full: the oldest timestamp (nonce 0) goes to make room.
  EXPECT_EQ(cache.Admit(Nonce(9), kNow + 100, kNow), Verdict::kFresh);
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_EQ(cache.watermark_ms(), kNow);
  // Its replay is still fresh by the clock, but cannot get back in.
  EXPECT_EQ(cache.Admit(Nonce(0), kNow, kNow), Verdict::kTooOld);
  EXPECT_EQ(cache.Admit(Nonce(1), kNow + 10, kNow), Verdict::kReplayed);
  // A new datagram older than everything a full cache holds is refused
  // rather than admitted and forgotten at once.
  EXPECT_EQ(cache.Admit(Nonce(20), kNow + 5, kNow), Verdict::kTooOld);
  EXPECT_EQ(cache.size(), 4u);
  // Many more: the size stays bounded and every earlier nonce stays refused.
  for (uint64_t i = 100; i < 1100; ++i) {
    EXPECT_EQ(cache.Admit(Nonce(i), kNow + 1000 + i, kNow), Verdict::kFresh);
  }
  EXPECT_EQ(cache.size(), 4u);
  for (uint64_t i : {0, 1, 2, 3, 9, 100, 500, 1095}) {
    const uint64_t ts = i < 4 ? kNow + 10 * i : i == 9 ? kNow + 100 : kNow + 1000 + i;
    EXPECT_NE(cache.Admit(Nonce(i), ts, kNow), Verdict::kFresh) << i;
  }
}

}  // namespace
}  // namespace ringlm::internal
