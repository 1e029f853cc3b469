#include "chat/jinja/internal/format_number.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace ringlm::jinja::internal {

std::string PyFloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci = [-]D[.DDD]e[+-]XX
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  int exponent = std::atoi(sci.c_str() + e + 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_buf[16];
    snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp_buf;
    return out;
  }
  if (exponent < 0) {
    out += "0." + std::string(-exponent - 1, '0') + digits;
    return out;
  }
  size_t int_len = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= int_len) {
    out += digits + std::string(int_len - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, int_len) + "." + digits.substr(int_len);
  }
  return out;
}

}  // namespace ringlm::jinja::internal
