// UTF-8 helpers with Python's str semantics where templates can observe them:
// code-point indexing, str.isspace(), and ASCII-only case mapping.
#ifndef RINGLM_CHAT_JINJA_INTERNAL_UNICODE_H_
#define RINGLM_CHAT_JINJA_INTERNAL_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringlm::jinja::internal {

// Decodes the code point at s[pos]; sets *len to its byte length. An invalid
// byte decodes as itself with length 1 (so arbitrary bytes never fail).
uint32_t DecodeUtf8(std::string_view s, size_t pos, size_t* len);
void AppendUtf8(uint32_t cp, std::string* out);

// Byte offsets of every code point start, plus s.size() at the end.
std::vector<size_t> CodePointOffsets(std::string_view s);
size_t CodePointCount(std::string_view s);

// Python's str.isspace() for one code point.
bool IsPySpace(uint32_t cp);

// Byte range [*begin, *end) of s with Python whitespace stripped.
void StripSpaceRange(std::string_view s, bool left, bool right, size_t* begin, size_t* end);
// Same, stripping any code point that occurs in `chars`.
void StripCharsRange(std::string_view s, std::string_view chars, bool left, bool right,
                     size_t* begin, size_t* end);

std::string AsciiUpper(std::string_view s);
std::string AsciiLower(std::string_view s);

// Python's str.upper(), lower(), title(), capitalize() (case_map.cc: common
// scripts only; see there).
uint32_t SimpleUpper(uint32_t cp);
uint32_t SimpleLower(uint32_t cp);
bool IsCased(uint32_t cp);
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyTitle(std::string_view s);
std::string PyCapitalize(std::string_view s);

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_UNICODE_H_
