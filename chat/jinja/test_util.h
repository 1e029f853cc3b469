// Helpers for the jinja tests: parse + render to plain text or segments.
#ifndef RINGLM_CHAT_JINJA_TEST_UTIL_H_
#define RINGLM_CHAT_JINJA_TEST_UTIL_H_

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/jinja/template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ringlm::jinja {

// GoogleTest printer: {control|content: "text"}.
inline void PrintTo(const Segment& s, std::ostream* os) {
  *os << (s.is_control ? "control:" : "content:") << ::testing::PrintToString(s.text);
}

}  // namespace ringlm::jinja

namespace ringlm::jinja::testing {

// Renders `source` with `trusted` / `untrusted` JSON objects as the context.
inline absl::StatusOr<std::vector<Segment>> RenderSegments(
    std::string_view source, const nlohmann::ordered_json& trusted = nullptr,
    const nlohmann::ordered_json& untrusted = nullptr, const RenderOptions& options = {}) {
  absl::StatusOr<Template> tmpl = Template::Parse(source);
  if (!tmpl.ok()) return tmpl.status();
  absl::StatusOr<Value> context = MakeContext(trusted, untrusted);
  if (!context.ok()) return context.status();
  return tmpl->Render(*context, options);
}

inline absl::StatusOr<std::string> Render(std::string_view source,
                                          const nlohmann::ordered_json& trusted = nullptr,
                                          const nlohmann::ordered_json& untrusted = nullptr,
                                          const RenderOptions& options = {}) {
  absl::StatusOr<std::vector<Segment>> segments =
      RenderSegments(source, trusted, untrusted, options);
  if (!segments.ok()) return segments.status();
  return JoinSegments(*segments);
}

}  // namespace ringlm::jinja::testing

#endif  // RINGLM_CHAT_JINJA_TEST_UTIL_H_
