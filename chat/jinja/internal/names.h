// The filters and tests this engine implements; the parser rejects any other
// name (Unimplemented), as jinja2 rejects unknown ones at compile time.
#ifndef RINGLM_CHAT_JINJA_INTERNAL_NAMES_H_
#define RINGLM_CHAT_JINJA_INTERNAL_NAMES_H_

#include <string_view>

namespace ringlm::jinja::internal {

bool IsSupportedFilter(std::string_view name);
bool IsSupportedTest(std::string_view name);

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_NAMES_H_
