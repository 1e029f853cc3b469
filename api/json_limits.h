// Parsing untrusted JSON with bounds on nesting and size, so that a request
// body cannot make the server build an unbounded document tree.
#ifndef RINGLM_API_JSON_LIMITS_H_
#define RINGLM_API_JSON_LIMITS_H_

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ringlm {

struct JsonLimits {
  // Arrays and objects open at once; the body's top-level object is depth 1.
  int max_depth = 64;
  // Values (scalars, arrays and objects) plus object keys in the whole text.
  size_t max_elements = 100000;
};

// Parses `text` as exactly one JSON value (RFC 8259, UTF-8 checked).
//
// The parse is a single SAX pass that builds the tree as it goes and stops
// at the first event past a limit, so memory stays in proportion to the
// accepted part: at most max_elements nodes plus the bytes of the strings,
// never more than a small multiple of the text (1 MB of "[[[[" costs nothing
// beyond the text: the parse stops at depth max_depth + 1).
//
// Errors, all InvalidArgument with no param (see api_error.h): the text is
// not valid JSON (the message gives the byte offset), is nested deeper than
// max_depth, or has more than max_elements elements.
// Thread-safe (no shared state).
absl::StatusOr<nlohmann::json> ParseJsonWithLimits(std::string_view text, const JsonLimits& limits);
// The same, keeping objects' keys in the text's order (request bodies, whose
// schemas and tools must keep the client's order).
absl::StatusOr<nlohmann::ordered_json> ParseOrderedJsonWithLimits(std::string_view text,
                                                                  const JsonLimits& limits);

// The member `name` of the object `body`, or nullptr when it is absent or
// JSON null (OpenAI's clients send null for "not set").
template <typename Json>
const Json* JsonField(const Json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace ringlm

#endif  // RINGLM_API_JSON_LIMITS_H_
