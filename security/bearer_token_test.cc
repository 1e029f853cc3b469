// Bearer tokens: which Authorization headers match, and the token file's
// rules (the same as the cluster key's).
#include "security/bearer_token.h"

#include <sys/stat.h>

#include <fstream>

#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

TEST(BearerTokenTest, MatchesOnlyTheExactTokenAfterTheScheme) {
  EXPECT_TRUE(BearerMatches("Bearer abc123", "abc123"));
  EXPECT_TRUE(BearerMatches("bearer abc123", "abc123"));
  EXPECT_TRUE(BearerMatches("BEARER \t abc123 \t", "abc123"));
  for (const char* header : {"", "Bearer", "Bearer ", "Bearerabc123", "Basic abc123",
                             "Bearer abc12", "Bearer abc1234", "Bearer abc 123", "abc123"}) {
    EXPECT_FALSE(BearerMatches(header, "abc123")) << header;
  }
  // An empty token never matches, whatever the header.
  EXPECT_FALSE(BearerMatches("Bearer ", ""));
  EXPECT_FALSE(BearerMatches("Bearer  ", ""));
}

// Writes `contents` to a new file under a temp dir with `mode`.
std::string WriteFile(const std::string& contents, mode_t mode) {
  static int n = 0;
  const std::string path = testing::MakeTempDir("bearer-token") + "/token" + std::to_string(++n);
  std::ofstream(path) << contents;
  chmod(path.c_str(), mode);
  return path;
}

TEST(BearerTokenTest, TheFilesTokenIsItsTrimmedContent) {
  absl::StatusOr<std::string> token = ReadBearerTokenFile(WriteFile("  abc123\n\n", 0600), "t");
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "abc123");
  token = ReadBearerTokenFile(WriteFile("abc123", 0400), "t");
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "abc123");
}

TEST(BearerTokenTest, AFileThatCannotHoldATokenIsRefusedWithTheReason) {
  struct Case {
    std::string contents;
    mode_t mode;
    absl::StatusCode code;
    std::string says;
  };
  for (const Case& c : {
           Case{"", 0600, absl::StatusCode::kInvalidArgument, "is empty"},
           Case{" \n\t\n", 0600, absl::StatusCode::kInvalidArgument, "is empty"},
           Case{"two words", 0600, absl::StatusCode::kInvalidArgument, "printable ASCII"},
           Case{"abc123", 0644, absl::StatusCode::kFailedPrecondition, "chmod 600"},
           Case{"abc123", 0640, absl::StatusCode::kFailedPrecondition, "group or others"},
           Case{std::string(5000, 'a'), 0600, absl::StatusCode::kInvalidArgument, "too large"},
       }) {
    absl::StatusOr<std::string> token =
        ReadBearerTokenFile(WriteFile(c.contents, c.mode), "metrics token file");
    ASSERT_FALSE(token.ok()) << c.says;
    EXPECT_EQ(token.status().code(), c.code) << token.status();
    EXPECT_NE(token.status().message().find(c.says), std::string::npos) << token.status();
    EXPECT_NE(token.status().message().find("metrics token file"), std::string::npos);
  }
  absl::StatusOr<std::string> missing =
      ReadBearerTokenFile("/nonexistent/ringlm-token", "metrics token file");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
}

}  // namespace
}  // namespace ringlm
