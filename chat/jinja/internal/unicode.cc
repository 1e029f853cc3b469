#include "chat/jinja/internal/unicode.h"

#include <algorithm>

namespace ringlm::jinja::internal {

uint32_t DecodeUtf8(std::string_view s, size_t pos, size_t* len) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  uint8_t b0 = byte(pos);
  size_t need = 0;
  uint32_t cp = 0;
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    need = 1;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    need = 2;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    need = 3;
    cp = b0 & 0x07;
  } else {
    *len = 1;
    return b0;
  }
  if (pos + need >= s.size()) {
    *len = 1;
    return b0;
  }
  for (size_t i = 1; i <= need; ++i) {
    uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) {
      *len = 1;
      return b0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  *len = need + 1;
  return cp;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  size_t pos = 0;
  while (pos < s.size()) {
    offsets.push_back(pos);
    size_t len = 1;
    DecodeUtf8(s, pos, &len);
    pos += len;
  }
  offsets.push_back(s.size());
  return offsets;
}

size_t CodePointCount(std::string_view s) {
  size_t count = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = 1;
    DecodeUtf8(s, pos, &len);
    pos += len;
    ++count;
  }
  return count;
}

bool IsPySpace(uint32_t cp) {
  if (cp >= 0x09 && cp <= 0x0D) return true;
  if (cp >= 0x1C && cp <= 0x20) return true;
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

namespace {

template <typename Pred>
void StripRange(std::string_view s, bool left, bool right, Pred strip, size_t* begin, size_t* end) {
  std::vector<size_t> offsets = CodePointOffsets(s);
  size_t lo = 0;
  size_t hi = offsets.size() - 1;  // number of code points
  auto cp_at = [&](size_t i) {
    size_t len = 1;
    return DecodeUtf8(s, offsets[i], &len);
  };
  if (left) {
    while (lo < hi && strip(cp_at(lo))) ++lo;
  }
  if (right) {
    while (hi > lo && strip(cp_at(hi - 1))) --hi;
  }
  *begin = offsets[lo];
  *end = offsets[hi];
}

}  // namespace

void StripSpaceRange(std::string_view s, bool left, bool right, size_t* begin, size_t* end) {
  StripRange(s, left, right, IsPySpace, begin, end);
}

void StripCharsRange(std::string_view s, std::string_view chars, bool left, bool right,
                     size_t* begin, size_t* end) {
  std::vector<uint32_t> set;
  for (size_t pos = 0; pos < chars.size();) {
    size_t len = 1;
    set.push_back(DecodeUtf8(chars, pos, &len));
    pos += len;
  }
  StripRange(
      s, left, right,
      [&](uint32_t cp) { return std::find(set.begin(), set.end(), cp) != set.end(); }, begin, end);
}

std::string AsciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace ringlm::jinja::internal
