// Turns at the cores: two holders of one lock file exclude each other, a
// holder sees a waiter, a waiter can be stopped, and the default directory
// is private.
#include "daemon/stage/compute_lock.h"

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "gtest/gtest.h"

namespace ringlm {
namespace {

using namespace std::chrono_literals;

class ComputeLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/compute_lock_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ComputeLockTest, OneHolderAtATimeAndAWaiterGetsItWhenReleased) {
  auto a = ComputeLock::Open(dir_ + "/compute.lock");
  auto b = ComputeLock::Open(dir_ + "/compute.lock");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Acquire([] { return false; }));
  EXPECT_FALSE((*a)->OthersWaiting());
  std::atomic<bool> b_holds{false};
  std::thread waiter([&] {
    EXPECT_TRUE((*b)->Acquire([] { return false; }));
    b_holds = true;
  });
  for (int i = 0; i < 3000 && !(*a)->OthersWaiting(); ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE((*a)->OthersWaiting()) << "b's wait is not seen";
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(b_holds.load()) << "both held the lock at once";
  (*a)->Release();
  waiter.join();
  EXPECT_TRUE(b_holds.load());
  EXPECT_FALSE((*b)->OthersWaiting()) << "b still counts as waiting once it holds the lock";
  // Now a waits for b.
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(50ms);
    stop = true;
  });
  EXPECT_FALSE((*a)->Acquire([&] { return stop.load(); })) << "took a lock that b holds";
  stopper.join();
  (*b)->Release();
  EXPECT_TRUE((*a)->Acquire([] { return true; })) << "a free lock is taken even when stopping";
}

TEST_F(ComputeLockTest, ALockHeldByAClosedHolderIsFree) {
  auto b = ComputeLock::Open(dir_ + "/compute.lock");
  ASSERT_TRUE(b.ok());
  {
    auto a = ComputeLock::Open(dir_ + "/compute.lock");
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE((*a)->Acquire([] { return false; }));
  }  // closed, as by a daemon that died
  EXPECT_TRUE((*b)->Acquire([] { return true; }));
}

TEST_F(ComputeLockTest, TheDefaultDirectoryIsPrivateAndAnOpenOneIsRefused) {
  const char* old = std::getenv("XDG_RUNTIME_DIR");
  const std::string saved = old != nullptr ? old : "";
  ASSERT_EQ(::setenv("XDG_RUNTIME_DIR", dir_.c_str(), 1), 0);
  absl::StatusOr<std::string> path = ComputeLock::DefaultPath();
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir_ + "/ringlm/compute.lock");
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/ringlm").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(ComputeLock::Open(*path).ok());

  ASSERT_EQ(::chmod((dir_ + "/ringlm").c_str(), 0777), 0);
  absl::StatusOr<std::string> open = ComputeLock::DefaultPath();
  EXPECT_EQ(open.status().code(), absl::StatusCode::kPermissionDenied) << open.status();
  if (old != nullptr) {
    ::setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
  } else {
    ::unsetenv("XDG_RUNTIME_DIR");
  }
}

}  // namespace
}  // namespace ringlm
