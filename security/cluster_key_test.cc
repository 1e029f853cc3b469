#include "security/cluster_key.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/crypto.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kHex[] = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

void WriteWithMode(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  ASSERT_EQ(chmod(path.c_str(), mode), 0);
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0);
  return st.st_mode & 07777;
}

TEST(ClusterKeyTest, GenerateSerializeParseRoundTrip) {
  absl::StatusOr<ClusterKey> key = ClusterKey::Generate();
  ASSERT_TRUE(key.ok()) << key.status();
  const std::string text = key->Serialize();
  EXPECT_EQ(text.size(), ClusterKey::kFilePrefix.size() + 64 + 1);
  EXPECT_TRUE(text.starts_with("ringlm-cluster-key-v1:"));
  EXPECT_EQ(text.back(), '\n');
  absl::StatusOr<ClusterKey> parsed = ClusterKey::Parse(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Serialize(), text);
  EXPECT_EQ(parsed->ClusterId(), key->ClusterId());

  absl::StatusOr<ClusterKey> other = ClusterKey::Generate();
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->Serialize(), text);
}

TEST(ClusterKeyTest, ParsesKnownKeyAndDerivesDistinctValues) {
  absl::StatusOr<ClusterKey> key = ClusterKey::Parse(std::string("ringlm-cluster-key-v1:") + kHex);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->Serialize(), std::string("ringlm-cluster-key-v1:") + kHex + "\n");
  // Upper-case hex and trailing whitespace are accepted.
  absl::StatusOr<ClusterKey> upper = ClusterKey::Parse(std::string("ringlm-cluster-key-v1:") +
                                                       absl::AsciiStrToUpper(kHex) + " \r\n\n");
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ(upper->Serialize(), key->Serialize());

  std::string secret;
  for (int i = 0; i < 32; ++i) secret.push_back(static_cast<char>(i));
  EXPECT_EQ(key->AnnounceMacKey(), HkdfSha256(secret, "ringlm/v1/announce-mac"));
  EXPECT_EQ(key->ClusterId(), HexEncode(HkdfSha256(secret, "ringlm/v1/cluster-id", 8)));
  EXPECT_EQ(key->CaPrivateKeySeed(), HkdfSha256(secret, "ringlm/v1/ca-ed25519", 32));
  EXPECT_EQ(key->ClusterId().size(), 16u);
  EXPECT_NE(key->AnnounceMacKey(), ClusterKey::InsecureAnnounceMacKey());
  EXPECT_EQ(ClusterKey::InsecureAnnounceMacKey(), HkdfSha256("", "ringlm/v1/announce-mac"));
}

TEST(ClusterKeyTest, RejectsBadFormatsWithoutEchoingThem) {
  const std::string good = std::string("ringlm-cluster-key-v1:") + kHex;
  const std::string bad_inputs[] = {
      "",
      kHex,                                          // no prefix
      "ringlm-cluster-key-v2:" + std::string(kHex),  // wrong version
      good.substr(0, good.size() - 2),               // too short
      good + "00",                                   // too long
      good.substr(0, good.size() - 1) + "g",         // not hex
      " " + good,                                    // leading space
      good.substr(0, 30) + " " + good.substr(31),    // inner space
  };
  for (const std::string& text : bad_inputs) {
    absl::StatusOr<ClusterKey> key = ClusterKey::Parse(text);
    ASSERT_FALSE(key.ok()) << text;
    EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(key.status().message()), Not(HasSubstr("0a0b0c0d"))) << text;
  }
}

TEST(ClusterKeyTest, MovedFromAndCloneAreExplicit) {
  absl::StatusOr<ClusterKey> key = ClusterKey::Parse(std::string("ringlm-cluster-key-v1:") + kHex);
  ASSERT_TRUE(key.ok());
  ClusterKey copy = key->Clone();
  EXPECT_EQ(copy.Serialize(), key->Serialize());
  ClusterKey moved = std::move(copy);
  EXPECT_EQ(moved.Serialize(), key->Serialize());
  static_assert(!std::is_copy_constructible_v<ClusterKey>);
}

TEST(ClusterKeyTest, LoadFileChecksMode) {
  const std::string dir = testing::MakeTempDir("cluster_key_test");
  const std::string path = dir + "/cluster.key";
  const std::string text = std::string("ringlm-cluster-key-v1:") + kHex + "\n";

  WriteWithMode(path, text, 0644);
  absl::StatusOr<ClusterKey> refused = ClusterKey::LoadFile(path);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("chmod 600 " + path));
  EXPECT_THAT(std::string(refused.status().message()), Not(HasSubstr(kHex)));

  ASSERT_EQ(chmod(path.c_str(), 0640), 0);
  EXPECT_EQ(ClusterKey::LoadFile(path).status().code(), absl::StatusCode::kFailedPrecondition);

  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  absl::StatusOr<ClusterKey> loaded = ClusterKey::LoadFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->Serialize(), text);

  ASSERT_EQ(chmod(path.c_str(), 0400), 0);
  EXPECT_TRUE(ClusterKey::LoadFile(path).ok());
}

TEST(ClusterKeyTest, LoadFileErrorsNameThePath) {
  const std::string dir = testing::MakeTempDir("cluster_key_test");
  const std::string missing = dir + "/missing.key";
  absl::StatusOr<ClusterKey> key = ClusterKey::LoadFile(missing);
  EXPECT_EQ(key.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(key.status().message()), HasSubstr(missing));

  const std::string garbage = dir + "/garbage.key";
  WriteWithMode(garbage, "ringlm-cluster-key-v1:nothex\n", 0600);
  key = ClusterKey::LoadFile(garbage);
  EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(key.status().message()), HasSubstr(garbage));

  if (geteuid() != 0) {  // root reads anything
    const std::string unreadable = dir + "/unreadable.key";
    WriteWithMode(unreadable, "x", 0000);
    key = ClusterKey::LoadFile(unreadable);
    EXPECT_EQ(key.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(std::string(key.status().message()), HasSubstr(unreadable));
  }
}

TEST(ClusterKeyTest, WriteFileCreates0600AndRefusesToOverwrite) {
  const std::string dir = testing::MakeTempDir("cluster_key_test");
  const std::string path = dir + "/cluster.key";
  const mode_t old_umask = umask(0);  // would give 0666 to a careless writer
  absl::StatusOr<ClusterKey> key = ClusterKey::Generate();
  ASSERT_TRUE(key.ok());
  absl::Status written = key->WriteFile(path, /*overwrite=*/false);
  umask(old_umask);
  ASSERT_TRUE(written.ok()) << written;
  EXPECT_EQ(ModeOf(path), 0600u);
  absl::StatusOr<ClusterKey> loaded = ClusterKey::LoadFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->Serialize(), key->Serialize());

  absl::StatusOr<ClusterKey> other = ClusterKey::Generate();
  ASSERT_TRUE(other.ok());
  absl::Status again = other->WriteFile(path, /*overwrite=*/false);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ClusterKey::LoadFile(path)->Serialize(), key->Serialize());

  // Overwrite replaces the key and repairs a loose mode.
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  ASSERT_TRUE(other->WriteFile(path, /*overwrite=*/true).ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ClusterKey::LoadFile(path)->Serialize(), other->Serialize());

  EXPECT_EQ(key->WriteFile(dir + "/no/such/dir/key", false).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ringlm
