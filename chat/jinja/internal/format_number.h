// Python's repr() of floats and json.dumps-style number text.
#ifndef RINGLM_CHAT_JINJA_INTERNAL_FORMAT_NUMBER_H_
#define RINGLM_CHAT_JINJA_INTERNAL_FORMAT_NUMBER_H_

#include <string>

namespace ringlm::jinja::internal {

// repr(float): shortest round-trip digits, "1.0", "1e+16", "1.5e-07", "inf".
std::string PyFloatRepr(double d);

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_FORMAT_NUMBER_H_
