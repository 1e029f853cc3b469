#include "inference/tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace ringlm::tokenizer_internal {
namespace {

// bytes_to_unicode as a table: printable Latin-1 maps to itself.
struct ByteMaps {
  std::array<uint32_t, 256> to_cpt{};
  ByteMaps() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_cpt[b] = printable ? static_cast<uint32_t>(b) : next++;
    }
  }
};

const ByteMaps& Maps() {
  static const ByteMaps* maps = new ByteMaps();
  return *maps;
}

bool IsContinuation(std::string_view text, size_t i) {
  return i < text.size() && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80;
}

}  // namespace

CodepointClass ClassifyCodepoint(uint32_t cpt) {
  const CodepointRange* end = kCodepointRanges + kNumCodepointRanges;
  // First range whose last >= cpt.
  const CodepointRange* it = std::lower_bound(
      kCodepointRanges, end, cpt, [](const CodepointRange& r, uint32_t c) { return r.last < c; });
  return (it != end && it->first <= cpt) ? it->cls : CodepointClass::kOther;
}

LetterCategory ClassifyLetter(uint32_t cpt) {
  const LetterRange* end = kLetterRanges + kNumLetterRanges;
  const LetterRange* it = std::lower_bound(
      kLetterRanges, end, cpt, [](const LetterRange& r, uint32_t c) { return r.last < c; });
  return (it != end && it->first <= cpt) ? it->category : LetterCategory::kNotLetter;
}

std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b0 = static_cast<uint8_t>(text[i]);
    uint32_t cpt = kReplacementCharacter;
    size_t n = 1;
    if (b0 < 0x80) {
      cpt = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      if (IsContinuation(text, i + 1)) {
        cpt = ((b0 & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
        n = 2;
      }
    } else if ((b0 & 0xF0) == 0xE0) {
      if (IsContinuation(text, i + 1) && IsContinuation(text, i + 2)) {
        cpt = ((b0 & 0x0Fu) << 12) | ((static_cast<uint8_t>(text[i + 1]) & 0x3Fu) << 6) |
              (static_cast<uint8_t>(text[i + 2]) & 0x3Fu);
        n = 3;
      }
    } else if ((b0 & 0xF8) == 0xF0) {
      if (IsContinuation(text, i + 1) && IsContinuation(text, i + 2) &&
          IsContinuation(text, i + 3)) {
        const uint32_t v = ((b0 & 0x07u) << 18) |
                           ((static_cast<uint8_t>(text[i + 1]) & 0x3Fu) << 12) |
                           ((static_cast<uint8_t>(text[i + 2]) & 0x3Fu) << 6) |
                           (static_cast<uint8_t>(text[i + 3]) & 0x3Fu);
        if (v <= 0x10FFFF) {
          cpt = v;
          n = 4;
        }
      }
    }
    out.push_back(cpt);
    i += n;
  }
  return out;
}

void AppendUtf8(uint32_t cpt, std::string& out) {
  if (cpt > 0x10FFFF) cpt = kReplacementCharacter;
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

uint32_t ByteToCodepoint(uint8_t byte) { return Maps().to_cpt[byte]; }

int CodepointToByte(uint32_t cpt) {
  if (cpt < 256) {
    const bool printable =
        (cpt >= 0x21 && cpt <= 0x7E) || (cpt >= 0xA1 && cpt <= 0xAC) || cpt >= 0xAE;
    return printable ? static_cast<int>(cpt) : -1;
  }
  // U+0100.. stand for the non-printable bytes in order.
  const std::array<uint32_t, 256>& to_cpt = Maps().to_cpt;
  for (int b = 0; b < 256; ++b) {
    if (to_cpt[b] == cpt) return b;
  }
  return -1;
}

}  // namespace ringlm::tokenizer_internal
