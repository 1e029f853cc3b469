// The characters of Prometheus metric names and label keys, shared by the
// registry (which checks what it registers) and the text parser.
#ifndef RINGLM_BASE_INTERNAL_METRIC_NAMES_H_
#define RINGLM_BASE_INTERNAL_METRIC_NAMES_H_

#include <string_view>

namespace ringlm {

// The series a histogram family adds to its name.
inline constexpr std::string_view kHistogramSuffixes[] = {"_bucket", "_sum", "_count"};

// [a-zA-Z_:] starts a metric name; label keys do not allow ':'.
inline bool IsNameStart(char c, bool allow_colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
}
inline bool IsNameChar(char c, bool allow_colon) {
  return IsNameStart(c, allow_colon) || (c >= '0' && c <= '9');
}

}  // namespace ringlm

#endif  // RINGLM_BASE_INTERNAL_METRIC_NAMES_H_
