// absl::StrCat that also takes std::string_view (this Abseil build's
// absl::string_view is its own type, not std::string_view).
#ifndef RINGLM_CHAT_JINJA_INTERNAL_STR_CAT_H_
#define RINGLM_CHAT_JINJA_INTERNAL_STR_CAT_H_

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ringlm::jinja::internal {

template <typename T>
const T& CatArg(const T& v) {
  return v;
}
inline absl::string_view CatArg(std::string_view v) {
  return absl::string_view(v.data(), v.size());
}

template <typename... Args>
std::string Cat(const Args&... args) {
  return absl::StrCat(CatArg(args)...);
}

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_STR_CAT_H_
