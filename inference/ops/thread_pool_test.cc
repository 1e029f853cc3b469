#include "inference/ops/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

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
  EXPECT_LE(calls.load(), std::max<int64_t>(0, std::min<int64_t>(n, pool.n_threads())));
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

TEST(ThreadPoolTest, UsesWorkersAndCaller) {
  ThreadPool pool(3);
  std::vector<std::thread::id> ids(3);
  pool.ParallelFor(3, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) ids[i] = std::this_thread::get_id();
  });
  EXPECT_EQ(ids[0], std::this_thread::get_id());
  EXPECT_NE(ids[1], ids[0]);
  EXPECT_NE(ids[2], ids[0]);
  EXPECT_NE(ids[1], ids[2]);
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
      EXPECT_EQ(done.load(), 3);  // our own job finished completely
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
