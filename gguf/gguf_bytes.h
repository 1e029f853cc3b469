// Little-endian byte helpers shared by the GGUF reader and writer (internal).
#ifndef RINGLM_GGUF_GGUF_BYTES_H_
#define RINGLM_GGUF_GGUF_BYTES_H_

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/string_view.h"

namespace ringlm::gguf_internal {

// Reads an n-byte (n <= 8) little-endian unsigned value. Precondition: `p`
// points at n readable bytes.
inline uint64_t LoadLe(const uint8_t* p, uint32_t n) {
  uint64_t v = 0;
  for (uint32_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Appends the low n bytes of `v`, little-endian.
inline void AppendLe(std::string* out, uint64_t v, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Message building. This abseil predates std::string_view support in
// absl::StrCat, so the GGUF code concatenates with these instead.
inline void AppendPiece(std::string* out, const char* s) { out->append(s); }
inline void AppendPiece(std::string* out, const std::string& s) { out->append(s); }
inline void AppendPiece(std::string* out, std::string_view s) { out->append(s); }
inline void AppendPiece(std::string* out, absl::string_view s) { out->append(s.data(), s.size()); }
template <typename T>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool> &&
         !std::is_same_v<T, char>) void AppendPiece(std::string* out, T v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

// Concatenates strings and integers (integers in decimal; char and bool are
// not accepted, to avoid surprises).
template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (AppendPiece(&out, args), ...);
  return out;
}

}  // namespace ringlm::gguf_internal

#endif  // RINGLM_GGUF_GGUF_BYTES_H_
