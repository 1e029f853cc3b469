// Python's str.upper()/lower() for the scripts chat text commonly uses: ASCII,
// Latin-1, Latin Extended-A and Additional, Greek, Cyrillic, Armenian and
// fullwidth Latin. Simple (1:1) mappings plus "ß".upper() == "SS"; other
// code points (and context rules such as Greek final sigma) are unchanged,
// which differs from Python.
#include <string>

#include "chat/jinja/internal/unicode.h"

namespace ringlm::jinja::internal {
namespace {

// Pairs laid out as (upper, lower) alternating from `first`.
bool InPairRange(uint32_t cp, uint32_t first, uint32_t last) { return cp >= first && cp <= last; }

}  // namespace

uint32_t SimpleUpper(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  if (cp == 0xB5) return 0x39C;
  if ((cp >= 0xE0 && cp <= 0xFE && cp != 0xF7)) return cp - 0x20;
  if (cp == 0xFF) return 0x178;
  if (cp == 0x131) return 'I';
  if (cp == 0x17F) return 'S';
  if (InPairRange(cp, 0x100, 0x12F) || InPairRange(cp, 0x132, 0x137) ||
      InPairRange(cp, 0x14A, 0x177) || InPairRange(cp, 0x1E00, 0x1E95) ||
      InPairRange(cp, 0x1EA0, 0x1EFF) || InPairRange(cp, 0x460, 0x481) ||
      InPairRange(cp, 0x48A, 0x4BF) || InPairRange(cp, 0x4D0, 0x52F)) {
    return (cp % 2 == 1) ? cp - 1 : cp;
  }
  if (InPairRange(cp, 0x139, 0x148) || InPairRange(cp, 0x179, 0x17E) ||
      InPairRange(cp, 0x4C1, 0x4CE)) {
    return (cp % 2 == 0) ? cp - 1 : cp;
  }
  if (cp >= 0x3B1 && cp <= 0x3CB) return cp == 0x3C2 ? 0x3A3 : cp - 0x20;
  if (cp == 0x3AC) return 0x386;
  if (cp >= 0x3AD && cp <= 0x3AF) return cp - 0x25;
  if (cp == 0x3CC) return 0x38C;
  if (cp == 0x3CD || cp == 0x3CE) return cp - 0x3F;
  if (cp >= 0x430 && cp <= 0x44F) return cp - 0x20;
  if (cp >= 0x450 && cp <= 0x45F) return cp - 0x50;
  if (cp >= 0x561 && cp <= 0x586) return cp - 0x30;
  if (cp >= 0xFF41 && cp <= 0xFF5A) return cp - 0x20;
  return cp;
}

uint32_t SimpleLower(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7)) return cp + 0x20;
  if (cp == 0x178) return 0xFF;
  if (InPairRange(cp, 0x100, 0x12F) || InPairRange(cp, 0x132, 0x137) ||
      InPairRange(cp, 0x14A, 0x177) || InPairRange(cp, 0x1E00, 0x1E95) ||
      InPairRange(cp, 0x1EA0, 0x1EFF) || InPairRange(cp, 0x460, 0x481) ||
      InPairRange(cp, 0x48A, 0x4BF) || InPairRange(cp, 0x4D0, 0x52F)) {
    return (cp % 2 == 0) ? cp + 1 : cp;
  }
  if (InPairRange(cp, 0x139, 0x148) || InPairRange(cp, 0x179, 0x17E) ||
      InPairRange(cp, 0x4C1, 0x4CE)) {
    return (cp % 2 == 1) ? cp + 1 : cp;
  }
  if ((cp >= 0x391 && cp <= 0x3A1) || (cp >= 0x3A3 && cp <= 0x3AB)) return cp + 0x20;
  if (cp == 0x386) return 0x3AC;
  if (cp >= 0x388 && cp <= 0x38A) return cp + 0x25;
  if (cp == 0x38C) return 0x3CC;
  if (cp == 0x38E || cp == 0x38F) return cp + 0x3F;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 0x20;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;
  if (cp >= 0x531 && cp <= 0x556) return cp + 0x30;
  if (cp >= 0xFF21 && cp <= 0xFF3A) return cp + 0x20;
  return cp;
}

bool IsCased(uint32_t cp) {
  // Lowercase letters without a simple uppercase are cased too.
  if (cp == 0xDF || cp == 0x138 || cp == 0x149) return true;
  return SimpleUpper(cp) != cp || SimpleLower(cp) != cp;
}

namespace {

template <typename Fn>
std::string MapCodePoints(std::string_view s, Fn fn) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    uint32_t cp = DecodeUtf8(s, pos, &len);
    if (len == 1 && cp >= 0x80) {
      out.push_back(s[pos]);  // invalid byte: keep as is
    } else {
      fn(cp, &out);
    }
    pos += len;
  }
  return out;
}

void AppendUpper(uint32_t cp, std::string* out) {
  if (cp == 0xDF) {
    *out += "SS";
  } else {
    AppendUtf8(SimpleUpper(cp), out);
  }
}

}  // namespace

std::string PyUpper(std::string_view s) { return MapCodePoints(s, AppendUpper); }

std::string PyLower(std::string_view s) {
  return MapCodePoints(s, [](uint32_t cp, std::string* out) { AppendUtf8(SimpleLower(cp), out); });
}

std::string PyTitle(std::string_view s) {
  bool prev_cased = false;
  return MapCodePoints(s, [&](uint32_t cp, std::string* out) {
    if (prev_cased) {
      AppendUtf8(SimpleLower(cp), out);
    } else {
      // Python uses titlecase; it equals uppercase here except "ß" -> "Ss".
      if (cp == 0xDF) {
        *out += "Ss";
      } else {
        AppendUtf8(SimpleUpper(cp), out);
      }
    }
    prev_cased = IsCased(cp);
  });
}

std::string PyCapitalize(std::string_view s) {
  bool first = true;
  return MapCodePoints(s, [&](uint32_t cp, std::string* out) {
    if (first) {
      if (cp == 0xDF) {
        *out += "Ss";
      } else {
        AppendUtf8(SimpleUpper(cp), out);
      }
    } else {
      AppendUtf8(SimpleLower(cp), out);
    }
    first = false;
  });
}

}  // namespace ringlm::jinja::internal
