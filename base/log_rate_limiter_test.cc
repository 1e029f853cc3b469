#include "base/log_rate_limiter.h"

#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using std::chrono::seconds;
using TimePoint = LogRateLimiter::TimePoint;

TEST(LogRateLimiterTest, OneLinePerKeyPerInterval) {
  LogRateLimiter limiter(seconds(10));
  const TimePoint t0 = TimePoint{} + seconds(100);
  uint64_t suppressed = 99;
  EXPECT_TRUE(limiter.Allow("a", t0, &suppressed));
  EXPECT_EQ(suppressed, 0u);
  EXPECT_FALSE(limiter.Allow("a", t0 + seconds(1), &suppressed));
  EXPECT_FALSE(limiter.Allow("a", t0 + seconds(9), &suppressed));
  EXPECT_TRUE(limiter.Allow("b", t0 + seconds(9), &suppressed));  // keys are independent
  EXPECT_TRUE(limiter.Allow("a", t0 + seconds(10), &suppressed));
  EXPECT_EQ(suppressed, 2u);
}

TEST(LogRateLimiterTest, ManyDistinctKeysStayBounded) {
  LogRateLimiter limiter(seconds(10), /*max_keys=*/8);
  const TimePoint t0 = TimePoint{} + seconds(100);
  uint64_t suppressed = 0;
  // 10,000 distinct keys within one interval (e.g. one per sender): the first
  // 8 get their own line, the rest share one overflow slot, so one more line.
  int allowed = 0;
  for (int i = 0; i < 10000; ++i) {
    if (limiter.Allow(absl::StrCat("sender ", i), t0, &suppressed)) ++allowed;
  }
  EXPECT_EQ(allowed, 9);
  EXPECT_EQ(limiter.tracked_keys(), 8u);
  // A later interval: idle keys with nothing suppressed are forgotten to make
  // room, so a new key gets its own slot again.
  EXPECT_TRUE(limiter.Allow("late", t0 + seconds(20), &suppressed));
  EXPECT_LE(limiter.tracked_keys(), 8u);
  EXPECT_FALSE(limiter.Allow("late", t0 + seconds(21), &suppressed));
}

}  // namespace
}  // namespace ringlm
