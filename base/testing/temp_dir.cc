#include "base/testing/temp_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringlm::testing {
namespace {

// The directories this program made. Destroyed at exit, after every test and
// before gtest's own singleton (which existed before the first MakeTempDir).
class TempDirRegistry {
 public:
  ~TempDirRegistry() {
    const bool failed = ::testing::UnitTest::GetInstance()->Failed();
    absl::MutexLock lock(&mu_);
    for (const std::string& dir : dirs_) {
      if (failed) {
        std::fprintf(stderr, "kept for the logs: %s\n", dir.c_str());
        continue;
      }
      std::error_code ignored;  // best effort: a test may have removed it
      std::filesystem::remove_all(dir, ignored);
    }
  }

  void Add(std::string dir) {
    absl::MutexLock lock(&mu_);
    dirs_.push_back(std::move(dir));
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> dirs_ ABSL_GUARDED_BY(mu_);
};

TempDirRegistry& Registry() {
  static TempDirRegistry registry;
  return registry;
}

}  // namespace

std::string MakeTempDir(const std::string& prefix) {
  ::testing::UnitTest::GetInstance();  // constructed first, so destroyed last
  std::string base = ::testing::TempDir();
  if (!base.empty() && base.back() != '/') base += '/';
  std::string path = base + prefix + "-XXXXXX";
  if (mkdtemp(path.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed for " << path;
    return "";
  }
  Registry().Add(path);
  return path;
}

}  // namespace ringlm::testing
