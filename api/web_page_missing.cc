// Built when api/web/index.html does not exist: no page to serve.
#include "api/web_page.h"

namespace ringlm {

std::string_view EmbeddedWebPage() { return {}; }

}  // namespace ringlm
