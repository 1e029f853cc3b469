// Lanes keep each destination's order, a stuck destination holds up only
// its own lanes, a node's tokens and steps do not wait for each other, and
// every lane and the lane count are bounded.
#include "daemon/stage/ring_sender.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

TEST(RingSenderTest, AStuckLaneHoldsUpOnlyItsOwnDestination) {
  RingSender sender(RingSender::Limits{});
  absl::Notification release;
  absl::Mutex mu;
  std::vector<int> to_a;
  ASSERT_TRUE(sender.Post(
      "stuck", [&] { release.WaitForNotification(); }, 0));
  absl::Notification a_done;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(sender.Post(
        "a",
        [&, i] {
          absl::MutexLock lock(&mu);
          to_a.push_back(i);
          if (i == 99) a_done.Notify();
        },
        0));
  }
  EXPECT_TRUE(a_done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  {
    absl::MutexLock lock(&mu);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(to_a[i], i);  // in order
  }
  release.Notify();
  sender.Stop();
  EXPECT_FALSE(sender.Post(
      "a", [] {}, 0));
}

// A delivery waiting for its origin's reply does not hold up the next step
// to the same node.
TEST(RingSenderTest, TokensToANodeDoNotWaitForItsStepsNorTheReverse) {
  RingSender sender(RingSender::Limits{});
  absl::Notification release, tokens_sent, steps_sent;
  ASSERT_TRUE(sender.Post(
      "a", [&] { release.WaitForNotification(); }, 0, RingSender::Lane::kSteps));
  ASSERT_TRUE(sender.Post(
      "a", [&] { tokens_sent.Notify(); }, 0, RingSender::Lane::kTokens));
  EXPECT_TRUE(tokens_sent.WaitForNotificationWithTimeout(absl::Seconds(10)));
  release.Notify();
  absl::Notification release_tokens;
  ASSERT_TRUE(sender.Post(
      "a", [&] { release_tokens.WaitForNotification(); }, 0, RingSender::Lane::kTokens));
  ASSERT_TRUE(sender.Post(
      "a", [&] { steps_sent.Notify(); }, 0, RingSender::Lane::kSteps));
  EXPECT_TRUE(steps_sent.WaitForNotificationWithTimeout(absl::Seconds(10)));
  release_tokens.Notify();
  sender.Stop();
}

TEST(RingSenderTest, LanesAndTheirQueuesAreBounded) {
  RingSender sender(RingSender::Limits{.max_lanes = 2, .max_pending = 2, .max_pending_bytes = 100});
  absl::Notification started, release;
  auto hold = [&] {
    started.Notify();
    release.WaitForNotification();
  };
  auto nothing = [] {};
  ASSERT_TRUE(sender.Post("a", hold, 0));
  started.WaitForNotification();  // running, so no longer waiting
  ASSERT_TRUE(sender.Post("b", nothing, 0));
  EXPECT_FALSE(sender.Post("c", nothing, 0)) << "a third lane";
  // Two may wait behind the running one, holding 100 bytes at most.
  EXPECT_FALSE(sender.Post("a", nothing, 101));
  int queued = 0;
  while (sender.Post("a", nothing, 10)) ++queued;
  EXPECT_EQ(queued, 2);
  release.Notify();
  sender.Stop();
}

}  // namespace
}  // namespace ringlm
