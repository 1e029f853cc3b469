// The web chat page (api/web/index.html), embedded into the binary at build
// time. Empty when the page was not present at configure time.
#ifndef RINGLM_API_WEB_PAGE_H_
#define RINGLM_API_WEB_PAGE_H_

#include <string_view>

namespace ringlm {

std::string_view EmbeddedWebPage();

}  // namespace ringlm

#endif  // RINGLM_API_WEB_PAGE_H_
