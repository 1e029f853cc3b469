#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "inference/tokenizer/tokenizer.h"

namespace ringlm {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Well-formed UTF-8 (Unicode Table 3-7): for a lead byte, the sequence length
// and the allowed range of the SECOND byte (later bytes are 80..BF).
struct LeadInfo {
  int length;  // 0: not a valid lead byte
  uint8_t second_lo;
  uint8_t second_hi;
};

LeadInfo ClassifyLead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};  // excludes surrogates
  if (b == 0xF0) return {4, 0x90, 0xBF};  // excludes overlongs
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // excludes > U+10FFFF
  return {0, 0, 0};
}

// Moves the longest decodable prefix of `pending` to `out`: complete valid
// sequences verbatim, each maximal ill-formed subpart as one U+FFFD. An
// incomplete but so-far-valid tail stays in `pending` unless `flush`, in which
// case it also becomes U+FFFD.
void DrainUtf8(std::string& pending, bool flush, std::string& out) {
  size_t i = 0;
  while (i < pending.size()) {
    const auto lead = static_cast<uint8_t>(pending[i]);
    const LeadInfo info = ClassifyLead(lead);
    if (info.length == 0) {
      out.append(kReplacement);
      ++i;
      continue;
    }
    // Count how many bytes after the lead fit the well-formed pattern.
    int valid = 1;
    while (valid < info.length && i + valid < pending.size()) {
      const auto b = static_cast<uint8_t>(pending[i + valid]);
      const uint8_t lo = valid == 1 ? info.second_lo : 0x80;
      const uint8_t hi = valid == 1 ? info.second_hi : 0xBF;
      if (b < lo || b > hi) break;
      ++valid;
    }
    if (valid == info.length) {
      out.append(pending, i, valid);
    } else if (i + valid == pending.size() && !flush) {
      break;  // incomplete: wait for more bytes
    } else {
      out.append(kReplacement);  // truncated by a bad byte (or by Flush)
    }
    i += valid;
  }
  pending.erase(0, i);
}

}  // namespace

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

std::string StreamingDecoder::Push(int32_t id) {
  pending_ += tokenizer_.TokenToPiece(id);
  std::string out;
  DrainUtf8(pending_, /*flush=*/false, out);
  return out;
}

std::string StreamingDecoder::Flush() {
  std::string out;
  DrainUtf8(pending_, /*flush=*/true, out);
  pending_.clear();
  return out;
}

}  // namespace ringlm
