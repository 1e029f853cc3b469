// Internal to inference/jinja: reading a filter's arguments, shared by the
// string and sequence filters.
#ifndef RINGLM_CHAT_JINJA_INTERNAL_FILTER_ARGS_H_
#define RINGLM_CHAT_JINJA_INTERNAL_FILTER_ARGS_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chat/jinja/internal/interpreter.h"
#include "chat/jinja/internal/objects.h"
#include "chat/jinja/internal/str_cat.h"

namespace ringlm::jinja::internal {

// "template error at line N: filter 'F': message".
inline absl::Status FilterError(const CallArgs& args, std::string_view filter,
                                std::string_view message) {
  return TemplateError(args.line, Cat("filter '", filter, "': ", message));
}

// Argument `index` (or keyword `name`) as a bool; `dflt` when absent.
inline bool BoolArg(const CallArgs& args, size_t index, std::string_view name, bool dflt) {
  const Value* v = args.Get(index, name);
  return v == nullptr ? dflt : v->Truthy();
}

// Argument `index` (or keyword `name`) as an integer; `dflt` when absent or
// none, an error naming `filter` when it is not an integer.
inline absl::StatusOr<int64_t> IntArg(const CallArgs& args, size_t index, std::string_view name,
                                      int64_t dflt, std::string_view filter) {
  const Value* v = args.Get(index, name);
  if (v == nullptr || v->is_none()) return dflt;
  if (!(v->is_int() || v->is_bool())) {
    return FilterError(args, filter, Cat("'", name, "' must be an integer"));
  }
  return v->AsInt();
}

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_FILTER_ARGS_H_
