// IsStrictUtf8: well-formed UTF-8 per Unicode 15 table 3-7 (no overlong forms,
// no surrogates, nothing past U+10FFFF). Written here, independently of
// inference/tokenizer/unicode.h, so a fuzz target can check that code's output.
#ifndef RINGLM_FUZZ_UTF8_CHECK_H_
#define RINGLM_FUZZ_UTF8_CHECK_H_

#include <cstddef>
#include <string_view>

namespace ringlm::fuzz {

inline bool IsStrictUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (s.size() - i < len) return false;
    const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return false;
    for (size_t k = 2; k < len; ++k) {
      const unsigned char ck = static_cast<unsigned char>(s[i + k]);
      if (ck < 0x80 || ck > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

}  // namespace ringlm::fuzz

#endif  // RINGLM_FUZZ_UTF8_CHECK_H_
