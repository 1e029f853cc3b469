#include "api/admission.h"

#include <gtest/gtest.h>

#include <optional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "api/api_error.h"

namespace ringlm {
namespace {

// Waits (without a timing assertion) until `pred` holds; false after 30 s.
template <typename Pred>
bool Eventually(const Pred& pred) {
  for (int i = 0; i < 30000 && !pred(); ++i) absl::SleepFor(absl::Milliseconds(1));
  return pred();
}

TEST(AdmissionTest, AdmitsUpToTheLimitAtOnce) {
  Admission admission({.max_running = 2, .max_queued = 0});
  auto a = admission.Admit();
  auto b = admission.Admit();
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(admission.running(), 2);
  auto c = admission.Admit();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrorCode(c.status()), "rate_limit_exceeded");
  EXPECT_GE(RetryAfterSeconds(c.status()), 1);
  EXPECT_EQ(ToHttpError(c.status()).http_status, 429);
  EXPECT_EQ(ToHttpError(c.status()).retry_after, RetryAfterSeconds(c.status()));
}

TEST(AdmissionTest, AReleasedSlotGoesToTheFirstInLine) {
  Admission admission({.max_running = 1, .max_queued = 8});
  std::optional<Admission::Ticket> holder;
  holder.emplace(*admission.Admit());
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) {
    // Each joins the line only after the one before it did.
    ASSERT_TRUE(Eventually([&] { return admission.queued() == i; }));
    waiters.emplace_back([&, i] {
      auto ticket = admission.Admit();
      ASSERT_TRUE(ticket.ok()) << ticket.status();
      absl::MutexLock lock(&mu);
      order.push_back(i);
    });
  }
  ASSERT_TRUE(Eventually([&] { return admission.queued() == 4; }));
  holder.reset();
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(admission.running(), 0);
  EXPECT_EQ(admission.queued(), 0);
}

TEST(AdmissionTest, AFullLineRefusesAtOnce) {
  Admission admission({.max_running = 1, .max_queued = 1});
  std::optional<Admission::Ticket> holder;
  holder.emplace(*admission.Admit());
  absl::Status waited;
  std::thread waiter([&] { waited = admission.Admit().status(); });
  ASSERT_TRUE(Eventually([&] { return admission.queued() == 1; }));
  auto refused = admission.Admit();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(ErrorCode(refused.status()), "rate_limit_exceeded");
  holder.reset();  // the waiter gets the slot
  waiter.join();
  EXPECT_TRUE(waited.ok()) << waited;
}

TEST(AdmissionTest, AWaitPastMaxWaitGivesUp) {
  Admission admission({.max_running = 1, .max_queued = 1, .max_wait = absl::Milliseconds(50)});
  auto holder = admission.Admit();
  ASSERT_TRUE(holder.ok());
  // Nothing frees the slot, so this waits max_wait and gives up.
  const absl::Status waited = admission.Admit().status();
  EXPECT_EQ(waited.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrorCode(waited), "server_overloaded");
  EXPECT_EQ(ToHttpError(waited).http_status, 503);
  EXPECT_GE(RetryAfterSeconds(waited), 1);
  EXPECT_EQ(admission.queued(), 0);
  EXPECT_EQ(admission.running(), 1);
}

TEST(AdmissionTest, ShutdownWakesTheLine) {
  Admission admission({.max_running = 1, .max_queued = 4});
  auto holder = admission.Admit();
  std::vector<absl::Status> results(3);
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&, i] { results[i] = admission.Admit().status(); });
  }
  ASSERT_TRUE(Eventually([&] { return admission.queued() == 3; }));
  admission.Shutdown();
  for (std::thread& t : waiters) t.join();
  for (const absl::Status& s : results) EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(admission.Admit().status().code(), absl::StatusCode::kUnavailable);
}

TEST(AdmissionTest, MetricsFollowTheSlotsAndTheLine) {
  MetricsRegistry registry;
  absl::StatusOr<AdmissionMetrics> metrics = RegisterAdmissionMetrics(registry);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  Admission admission(
      {.max_running = 1, .max_queued = 1, .max_wait = absl::Seconds(60), .metrics = *metrics});
  std::optional<Admission::Ticket> holder;
  holder.emplace(*admission.Admit());
  EXPECT_EQ(metrics->running->Value(), 1);
  std::thread waiter([&] { EXPECT_TRUE(admission.Admit().ok()); });
  ASSERT_TRUE(Eventually([&] { return metrics->queued->Value() == 1; }));
  EXPECT_FALSE(admission.Admit().ok());
  EXPECT_EQ(metrics->refused_full->Value(), 1);
  holder.reset();
  waiter.join();
  EXPECT_EQ(metrics->running->Value(), 0);
  EXPECT_EQ(metrics->queued->Value(), 0);
  EXPECT_EQ(metrics->wait_seconds->Count(), 2u);  // the holder's 0 and the waiter's wait
  const std::string text = registry.RenderPrometheusText();
  EXPECT_NE(text.find("ringlm_api_refused_total{reason=\"queue_full\"} 1"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace ringlm
