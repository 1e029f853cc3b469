// `ringlm keygen` and `ringlm join-command`.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "base/testing/temp_dir.h"
#include "cli/commands.h"
#include "cli/test_commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/cluster_key.h"

namespace ringlm {
namespace {

using testing::CommandResult;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::RunCommand;
using ::testing::StartsWith;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

mode_t Mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST(KeygenCommandTest, HelpListsTheFlags) {
  CommandResult r = RunCommand(RunKeygen, {"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--out"));
  EXPECT_THAT(r.out, HasSubstr("--force"));
}

TEST(KeygenCommandTest, WritesAPrivateKeyThatLoads) {
  const std::string path = testing::MakeTempDir("keygen") + "/cluster.key";
  CommandResult r = RunCommand(RunKeygen, {"--out", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, IsEmpty());
  EXPECT_EQ(Mode(path), 0600u);
  absl::StatusOr<ClusterKey> key = ClusterKey::LoadFile(path);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(r.out, "wrote a new cluster key to " + path + " (cluster " + key->ClusterId() +
                       ")\ncopy it to every node, mode 0600, then: ringlmd --cluster-key " + path +
                       " ...\n");
}

TEST(KeygenCommandTest, RefusesToOverwriteWithoutForce) {
  const std::string path = testing::MakeTempDir("keygen") + "/cluster.key";
  ASSERT_EQ(RunCommand(RunKeygen, {"--out", path}).exit_code, 0);
  const std::string first = ReadFile(path);

  CommandResult again = RunCommand(RunKeygen, {"--out", path});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, StartsWith("ringlm: ALREADY_EXISTS: "));
  EXPECT_THAT(again.out, IsEmpty());
  EXPECT_EQ(ReadFile(path), first);

  CommandResult forced = RunCommand(RunKeygen, {"--out", path, "--force"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(ReadFile(path), first);
  EXPECT_EQ(Mode(path), 0600u);
  EXPECT_TRUE(ClusterKey::LoadFile(path).ok());
}

TEST(KeygenCommandTest, FailsWithoutAUsablePath) {
  CommandResult none = RunCommand(RunKeygen, {});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(none.err, "ringlm: INVALID_ARGUMENT: --out FILE is required\n");
  CommandResult no_dir =
      RunCommand(RunKeygen, {"--out", testing::MakeTempDir("keygen") + "/missing/cluster.key"});
  EXPECT_EQ(no_dir.exit_code, 1);
  EXPECT_THAT(no_dir.err, StartsWith("ringlm: NOT_FOUND: "));
}

class JoinCommandTest : public ::testing::Test {
 protected:
  void SetUp() override { ::unsetenv("RINGLM_CLUSTER_KEY_FILE"); }
  void TearDown() override { ::unsetenv("RINGLM_CLUSTER_KEY_FILE"); }
};

TEST_F(JoinCommandTest, PrintsALineThatInstallsTheKeyAndStartsTheDaemon) {
  const std::string path = testing::MakeTempDir("join") + "/cluster.key";
  ASSERT_EQ(RunCommand(RunKeygen, {"--out", path}).exit_code, 0);
  const std::string serialized = std::string(absl::StripTrailingAsciiWhitespace(ReadFile(path)));
  CommandResult r = RunCommand(RunJoinCommand, {"--cluster-key", path, "--model", "/m/it's.gguf",
                                                "--key-path", "/etc/ringlm x/cluster.key"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(
      r.out,
      "(umask 077 && mkdir -p \"$(dirname '/etc/ringlm x/cluster.key')\" && printf '%s\\n' '" +
          serialized +
          "' > '/etc/ringlm x/cluster.key') && ringlmd --model '/m/it'\\''s.gguf' "
          "--cluster-key '/etc/ringlm x/cluster.key'\n");

  ::setenv("RINGLM_CLUSTER_KEY_FILE", path.c_str(), 1);
  CommandResult from_env = RunCommand(RunJoinCommand, {});
  ASSERT_EQ(from_env.exit_code, 0) << from_env.err;
  EXPECT_THAT(from_env.out, HasSubstr("'" + serialized + "'"));
  EXPECT_THAT(from_env.out, HasSubstr("ringlmd --model '/models/model.gguf' --cluster-key "
                                      "'/etc/ringlm/cluster.key'\n"));
}

TEST_F(JoinCommandTest, FailsWithoutAKey) {
  CommandResult none = RunCommand(RunJoinCommand, {});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(none.err,
            "ringlm: INVALID_ARGUMENT: --cluster-key FILE (or RINGLM_CLUSTER_KEY_FILE) is "
            "required\n");
  CommandResult missing = RunCommand(RunJoinCommand, {"--cluster-key", "/nonexistent.key"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, StartsWith("ringlm: NOT_FOUND: "));
  EXPECT_THAT(missing.out, IsEmpty());
}

}  // namespace
}  // namespace ringlm
