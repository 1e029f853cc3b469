#include "security/bearer_token.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "security/crypto.h"
#include "security/internal/secret_file.h"

namespace ringlm {
namespace {

constexpr size_t kMaxTokenFileBytes = 4096;

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

}  // namespace

bool BearerMatches(std::string_view header, std::string_view token) {
  constexpr std::string_view kScheme = "bearer";
  if (token.empty() || header.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(absl::string_view(header.data(), kScheme.size()),
                              absl::string_view(kScheme.data(), kScheme.size())) ||
      !IsBlank(header[kScheme.size()])) {
    return false;
  }
  header.remove_prefix(kScheme.size());
  while (!header.empty() && IsBlank(header.front())) header.remove_prefix(1);
  while (!header.empty() && IsBlank(header.back())) header.remove_suffix(1);
  return ConstantTimeEquals(header, token);
}

absl::StatusOr<std::string> ReadBearerTokenFile(const std::string& path, const std::string& what) {
  absl::StatusOr<std::string> text =
      security_internal::ReadSecretFile(path, what, kMaxTokenFileBytes);
  if (!text.ok()) return text.status();
  const std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is empty"));
  for (char c : token) {
    if (c < '!' || c > '~') {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", path,
                       ": the token must be printable ASCII without spaces (as `openssl rand "
                       "-hex 32` writes)"));
    }
  }
  return token;
}

}  // namespace ringlm
