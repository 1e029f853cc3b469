// Python's json.dumps for template values (HF's tojson filter).
#ifndef RINGLM_CHAT_JINJA_INTERNAL_JSON_DUMP_H_
#define RINGLM_CHAT_JINJA_INTERNAL_JSON_DUMP_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "chat/jinja/value.h"

namespace ringlm::jinja::internal {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  // json.dumps(indent=...): none, or the string one level indents by.
  std::optional<std::string> indent;
  // json.dumps(separators=...); defaults depend on `indent` as in Python.
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
  // Nesting beyond this fails (Python raises RecursionError much later).
  int max_depth = 512;
  // Output beyond this fails with ResourceExhausted.
  size_t max_bytes = 8 << 20;
};

// Errors (InvalidArgument): Undefined or engine objects inside `value`
// ("Object of type Undefined is not JSON serializable").
absl::StatusOr<std::string> JsonDump(const Value& value, const JsonDumpOptions& options);

// True if `value` and everything inside it is trusted.
bool AllTrusted(const Value& value);

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_JSON_DUMP_H_
