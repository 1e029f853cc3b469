#include "inference/ops/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace ringlm {
namespace {

void ExpectEachIndexOnce(ThreadPool& pool, int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(std::max<int64_t>(n, 1)));
  std::atomic<int> calls{0};
  pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
    EXPECT_LT(begin, end);
    calls.fetch_add(1);
    for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  EXPECT_LE(calls.load(), std::min<int64_t>(n, ThreadPool::kChunksPerThread * pool.n_threads()));
  if (n == 0) {
    EXPECT_EQ(calls.load(), 0);
  }
}

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.n_threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 5, 7, 100, 1001}) ExpectEachIndexOnce(pool, n);
  }
}

TEST(ThreadPoolTest, UsesTheWorkers) {
  // Each chunk waits until a second thread has joined the call, so this
  // passes as soon as a worker takes a chunk, and fails (after 30 s) if only
  // the caller ever runs them.
  ThreadPool pool(3);
  absl::Mutex mu;
  std::set<std::thread::id> ids;
  pool.ParallelFor(12, [&](int64_t, int64_t) {
    absl::MutexLock lock(&mu);
    ids.insert(std::this_thread::get_id());
    auto two = [&] { return ids.size() >= 2; };
    mu.AwaitWithTimeout(absl::Condition(&two), absl::Seconds(30));
  });
  EXPECT_GE(ids.size(), 2u);
}

TEST(ThreadPoolTest, ABlockedWorkerDoesNotHoldUpTheCall) {
  // The first chunk to start stands for a thread that lost its core: it
  // blocks until the other thread has done three quarters of the work. A
  // pool that gave each thread a fixed half would never get there.
  ThreadPool pool(2);
  const int64_t n = 100;
  absl::Mutex mu;
  int64_t others_done = 0;
  bool first_taken = false;
  int64_t first_size = 0;
  pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
    absl::MutexLock lock(&mu);
    if (!first_taken) {
      first_taken = true;
      first_size = end - begin;
      auto most_done = [&] { return others_done >= 3 * n / 4; };
      EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&most_done), absl::Seconds(30)));
      return;
    }
    others_done += end - begin;
  });
  EXPECT_EQ(others_done + first_size, n);
}

TEST(ThreadPoolTest, ACallerThatWaitsLongSleepsAndIsWoken) {
  // A chunk that outlasts the spin makes the caller sleep; it must be woken.
  ThreadPool pool(2);
  for (int rep = 0; rep < 20; ++rep) {
    std::atomic<int> ran{0};
    pool.ParallelFor(2, [&](int64_t, int64_t) {
      if (ran.fetch_add(1) == 0) absl::SleepFor(absl::Milliseconds(2));
    });
    EXPECT_EQ(ran.load(), 2);
  }
}

TEST(ThreadPoolTest, SingleThreadRunsInline) {
  ThreadPool pool(1);
  int calls = 0;
  pool.ParallelFor(10, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
    EXPECT_EQ(std::this_thread::get_id(), std::this_thread::get_id());
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPoolTest, ConcurrentCallersSerialize) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  auto caller = [&] {
    for (int rep = 0; rep < 200; ++rep) {
      std::atomic<int> done{0};
      pool.ParallelFor(6, [&](int64_t begin, int64_t end) {
        total.fetch_add(end - begin);
        done.fetch_add(1);
      });
      EXPECT_EQ(done.load(), 6);  // our own job finished completely
    }
  };
  {
    std::thread a(caller);
    std::thread b(caller);
    a.join();
    b.join();
  }
  EXPECT_EQ(total.load(), 2 * 200 * 6);
}

TEST(ThreadPoolTest, ManyPoolsConstructAndDestructCleanly) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(4);
    if (i % 2 == 0) ExpectEachIndexOnce(pool, 9);
  }
}

TEST(ThreadPoolTest, DefaultThreadCountIsSane) {
  const int n = DefaultThreadCount();
  EXPECT_GE(n, 1);
  const unsigned hc = std::thread::hardware_concurrency();
  if (hc > 0) {
    EXPECT_LE(n, static_cast<int>(hc));
  }
}

}  // namespace
}  // namespace ringlm
