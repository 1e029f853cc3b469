// Python str operations on provenance-carrying Text: substrings keep the
// provenance of the characters they contain; synthesized text (case changes,
// formatting of values) is content if any input character is content.
#ifndef RINGLM_CHAT_JINJA_INTERNAL_STRING_OPS_H_
#define RINGLM_CHAT_JINJA_INTERNAL_STRING_OPS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/jinja/text.h"
#include "chat/jinja/value.h"

namespace ringlm::jinja::internal {

// str.strip/lstrip/rstrip; `chars` null means whitespace.
Text StripText(const Text& s, const Text* chars, bool left, bool right);
// str.split / str.rsplit; `sep` null means runs of whitespace.
// Functions below that take `max_bytes` / `max_parts` stop building once the
// result passes it (callers then fail with ResourceExhausted), so a hostile
// template cannot allocate far beyond the render limits.
std::vector<Text> SplitText(const Text& s, const Text* sep, int64_t maxsplit, bool from_right,
                            size_t max_parts);
// str.replace; count < 0 means all.
Text ReplaceText(const Text& s, const Text& old, const Text& replacement, int64_t count,
                 size_t max_bytes);
// str.splitlines() (Python's line boundaries, ends dropped).
std::vector<Text> SplitLines(const Text& s, size_t max_parts);
// printf-style formatting: "%s %d" % (a, b). Errors are InvalidArgument.
// `allow_unused`: an argument left over is not an error.
absl::StatusOr<Text> PercentFormat(const Text& format, const std::vector<Value>& args,
                                   size_t max_bytes, bool allow_unused = false);
// str.format with "{}", "{0}", "{name}" and "{{" / "}}"; no format specs.
absl::StatusOr<Text> BraceFormat(const Text& format, const std::vector<Value>& args,
                                 size_t max_bytes,
                                 const std::vector<std::pair<std::string, Value>>& kwargs);

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_STRING_OPS_H_
