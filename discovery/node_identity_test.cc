#include "discovery/node_identity.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// A fresh directory under the test temp dir, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "/ringlm_node_id_XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path) << content;
}

// Sets an environment variable for one scope and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(NodeIdentityTest, CreatesPersistsAndReloads) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/a/b/ringlm";
  absl::StatusOr<std::string> id = LoadOrCreateNodeId(dir);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_TRUE(std::regex_match(*id, std::regex("node-[0-9a-f]{12}"))) << *id;
  EXPECT_EQ(ReadFile(dir + "/node_id"), *id + "\n");

  absl::StatusOr<std::string> again = LoadOrCreateNodeId(dir);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *id);

  // No temporary files left behind.
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  EXPECT_THAT(names, ::testing::ElementsAre("node_id"));
}

TEST(NodeIdentityTest, DifferentDirsGetDifferentIds) {
  TempDir a, b;
  absl::StatusOr<std::string> ida = LoadOrCreateNodeId(a.path());
  absl::StatusOr<std::string> idb = LoadOrCreateNodeId(b.path());
  ASSERT_TRUE(ida.ok() && idb.ok());
  EXPECT_NE(*ida, *idb);
}

TEST(NodeIdentityTest, ReadsAHandWrittenId) {
  TempDir tmp;
  WriteFile(tmp.path() + "/node_id", "kitchen-laptop");
  absl::StatusOr<std::string> id = LoadOrCreateNodeId(tmp.path());
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "kitchen-laptop");
}

TEST(NodeIdentityTest, CorruptFileIsDataLoss) {
  for (const std::string& content :
       {std::string(""), std::string("\n"), std::string("two words\n"), std::string("id\n\n"),
        std::string("\x00\x01\x02", 3), std::string(65, 'a'), std::string(5000, 'a')}) {
    TempDir tmp;
    WriteFile(tmp.path() + "/node_id", content);
    absl::StatusOr<std::string> id = LoadOrCreateNodeId(tmp.path());
    ASSERT_FALSE(id.ok()) << "accepted " << content.size() << " bytes";
    EXPECT_EQ(id.status().code(), absl::StatusCode::kDataLoss) << id.status();
    EXPECT_THAT(id.status().message(), HasSubstr(tmp.path() + "/node_id"));
    EXPECT_THAT(id.status().message(), HasSubstr("corrupt"));
    // The corrupt file is left for the user to inspect.
    EXPECT_EQ(ReadFile(tmp.path() + "/node_id"), content);
  }
}

TEST(NodeIdentityTest, FileSystemErrors) {
  EXPECT_EQ(LoadOrCreateNodeId("").status().code(), absl::StatusCode::kInvalidArgument);
  TempDir tmp;
  WriteFile(tmp.path() + "/plain", "x");
  // The state "directory" is a regular file.
  absl::StatusOr<std::string> id = LoadOrCreateNodeId(tmp.path() + "/plain");
  EXPECT_FALSE(id.ok());
  // node_id is a directory.
  fs::create_directories(tmp.path() + "/d/node_id");
  id = LoadOrCreateNodeId(tmp.path() + "/d");
  EXPECT_FALSE(id.ok());
}

TEST(NodeIdentityTest, ConcurrentCreatorsAgree) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/state";
  std::vector<absl::StatusOr<std::string>> ids(8, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back([&, i] { ids[i] = LoadOrCreateNodeId(dir); });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& id : ids) {
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(*id, *ids[0]);
  }
  EXPECT_EQ(ReadFile(dir + "/node_id"), *ids[0] + "\n");
}

TEST(NodeIdentityTest, DefaultStateDir) {
  {
    ScopedEnv xdg("XDG_STATE_HOME", "/var/lib/xdg");
    EXPECT_EQ(DefaultStateDir(), "/var/lib/xdg/ringlm");
  }
  {
    ScopedEnv xdg("XDG_STATE_HOME", "relative/ignored");
    ScopedEnv home("HOME", "/home/tester");
    EXPECT_EQ(DefaultStateDir(), "/home/tester/.local/state/ringlm");
  }
  {
    ScopedEnv xdg("XDG_STATE_HOME", nullptr);
    ScopedEnv home("HOME", "/home/tester");
    EXPECT_EQ(DefaultStateDir(), "/home/tester/.local/state/ringlm");
  }
}

}  // namespace
}  // namespace ringlm
