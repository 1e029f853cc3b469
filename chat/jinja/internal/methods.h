// Which Python methods of str, dict and list templates may call.
#ifndef RINGLM_CHAT_JINJA_INTERNAL_METHODS_H_
#define RINGLM_CHAT_JINJA_INTERNAL_METHODS_H_

#include <string_view>

#include "chat/jinja/value.h"

namespace ringlm::jinja::internal {

// True if `name` is a supported read-only method of obj's type.
bool IsBuiltinMethod(const Value& obj, std::string_view name);
// True if `name` is a mutating method jinja2's ImmutableSandboxedEnvironment
// refuses (list.append, dict.update, ...).
bool IsUnsafeMethod(const Value& obj, std::string_view name);

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_METHODS_H_
