#include "security/cluster_key.h"

#include <openssl/crypto.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "security/crypto.h"
#include "security/internal/secret_file.h"

namespace ringlm {
namespace {

constexpr std::string_view kAnnounceMacInfo = "ringlm/v1/announce-mac";
constexpr std::string_view kClusterIdInfo = "ringlm/v1/cluster-id";
constexpr std::string_view kCaInfo = "ringlm/v1/ca-ed25519";
constexpr size_t kClusterIdBytes = 8;
// A key file is one short line; anything much longer is not a key file.
constexpr size_t kMaxFileBytes = 4096;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

absl::StatusOr<ClusterKey> ClusterKey::Generate() {
  std::string bytes = RandomBytes(kBytes);
  absl::StatusOr<ClusterKey> key = FromBytes(bytes);
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return key;
}

absl::StatusOr<ClusterKey> ClusterKey::FromBytes(std::string_view bytes) {
  if (bytes.size() != kBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a cluster key has ", kBytes, " bytes, not ", bytes.size()));
  }
  ClusterKey key;
  std::memcpy(key.secret_.data(), bytes.data(), kBytes);
  return key;
}

absl::StatusOr<ClusterKey> ClusterKey::Parse(std::string_view text) {
  // Debian's abseil has its own string_view type, so trim by hand.
  while (!text.empty() && absl::ascii_isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  const std::string prefix(kFilePrefix);
  if (!text.starts_with(kFilePrefix)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a ringlm cluster key: expected a line starting with '", prefix, "'"));
  }
  text.remove_prefix(kFilePrefix.size());
  if (text.size() != 2 * kBytes) {
    return absl::InvalidArgumentError(absl::StrCat("malformed cluster key: expected ", 2 * kBytes,
                                                   " hex digits after '", prefix, "', found ",
                                                   text.size(), " characters"));
  }
  ClusterKey key;
  for (size_t i = 0; i < kBytes; ++i) {
    const int hi = HexValue(text[2 * i]);
    const int lo = HexValue(text[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      // 1-based column of the bad digit; the digit itself is not echoed.
      const size_t column = kFilePrefix.size() + 2 * i + (hi < 0 ? 1 : 2);
      return absl::InvalidArgumentError(
          absl::StrCat("malformed cluster key: column ", column, " is not a hex digit"));
    }
    key.secret_[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return key;
}

absl::StatusOr<ClusterKey> ClusterKey::LoadFile(const std::string& path) {
  absl::StatusOr<std::string> text =
      security_internal::ReadSecretFile(path, "cluster key file", kMaxFileBytes);
  if (!text.ok()) return text.status();
  absl::StatusOr<ClusterKey> key = Parse(*text);
  OPENSSL_cleanse(text->data(), text->size());
  if (!key.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster key file ", path, ": ", key.status().message()));
  }
  return key;
}

ClusterKey::ClusterKey(ClusterKey&& other) noexcept : secret_(other.secret_) {
  OPENSSL_cleanse(other.secret_.data(), kBytes);
}

ClusterKey& ClusterKey::operator=(ClusterKey&& other) noexcept {
  if (this != &other) {
    secret_ = other.secret_;
    OPENSSL_cleanse(other.secret_.data(), kBytes);
  }
  return *this;
}

ClusterKey::~ClusterKey() { OPENSSL_cleanse(secret_.data(), kBytes); }

ClusterKey ClusterKey::Clone() const {
  ClusterKey copy;
  copy.secret_ = secret_;
  return copy;
}

std::string_view ClusterKey::bytes() const {
  return std::string_view(reinterpret_cast<const char*>(secret_.data()), kBytes);
}

absl::Status ClusterKey::WriteFile(const std::string& path, bool overwrite) const {
  std::string text = Serialize();
  absl::Status status = security_internal::WriteSecretFile(path, text, overwrite);
  OPENSSL_cleanse(text.data(), text.size());
  return status;
}

std::string ClusterKey::Serialize() const {
  return absl::StrCat(std::string(kFilePrefix), HexEncode(bytes()), "\n");
}

std::string ClusterKey::AnnounceMacKey() const { return HkdfSha256(bytes(), kAnnounceMacInfo); }

std::string ClusterKey::InsecureAnnounceMacKey() { return HkdfSha256("", kAnnounceMacInfo); }

std::string ClusterKey::ClusterId() const {
  return HexEncode(HkdfSha256(bytes(), kClusterIdInfo, kClusterIdBytes));
}

std::string ClusterKey::CaPrivateKeySeed() const { return HkdfSha256(bytes(), kCaInfo, 32); }

std::string ClusterKeyFile(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  const char* env = std::getenv("RINGLM_CLUSTER_KEY_FILE");
  return env != nullptr ? env : "";
}

}  // namespace ringlm
