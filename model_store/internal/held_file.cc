#include "model_store/internal/held_file.h"

#include <charconv>
#include <vector>

#include "absl/strings/str_cat.h"
#include "security/crypto.h"

namespace ringlm::model_store_internal {
namespace {

constexpr absl::string_view kHeldMagic = "ringlm-held 1 ";

// A non-negative decimal of 1 to 18 digits (so it fits in int64 with room),
// and nothing else.
bool ParseDecimal(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

std::string SerializeHeld(std::string_view manifest_digest, const std::vector<HeldEntry>& held) {
  std::string out = absl::StrCat(kHeldMagic, HexEncode(manifest_digest), "\n");
  for (const HeldEntry& e : held) absl::StrAppend(&out, e.tensor, " ", e.last_used_ms, "\n");
  return out;
}

uint64_t MaxHeldBytes(size_t tensor_count) {
  return kHeldMagic.size() + 2 * kSha256Bytes + 1 + static_cast<uint64_t>(tensor_count) * 40;
}

absl::StatusOr<std::vector<HeldEntry>> ParseHeld(std::string_view bytes,
                                                 std::string_view manifest_digest,
                                                 size_t tensor_count) {
  const std::string first = absl::StrCat(kHeldMagic, HexEncode(manifest_digest), "\n");
  if (bytes.substr(0, first.size()) != first) {
    return absl::DataLossError("held file: bad first line (not a held file, or another manifest)");
  }
  bytes.remove_prefix(first.size());
  std::vector<HeldEntry> held;
  std::vector<bool> seen(tensor_count, false);
  for (size_t line = 2; !bytes.empty(); ++line) {
    const size_t end = bytes.find('\n');
    if (end == std::string_view::npos) {
      return absl::DataLossError(absl::StrCat("held file: line ", line, " is not terminated"));
    }
    const std::string_view text = bytes.substr(0, end);
    bytes.remove_prefix(end + 1);
    const size_t space = text.find(' ');
    int64_t index = 0;
    int64_t used = 0;
    if (space == std::string_view::npos || !ParseDecimal(text.substr(0, space), &index) ||
        !ParseDecimal(text.substr(space + 1), &used)) {
      return absl::DataLossError(absl::StrCat("held file: line ", line, " is malformed"));
    }
    if (static_cast<uint64_t>(index) >= tensor_count) {
      return absl::DataLossError(
          absl::StrCat("held file: line ", line, " names tensor ", index, " of ", tensor_count));
    }
    if (seen[index]) {
      return absl::DataLossError(absl::StrCat("held file: line ", line, " repeats tensor ", index));
    }
    seen[index] = true;
    held.push_back(HeldEntry{static_cast<size_t>(index), used});
  }
  return held;
}

}  // namespace ringlm::model_store_internal
