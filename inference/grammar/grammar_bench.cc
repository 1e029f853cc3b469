// grammar_bench: time GrammarMatcher::FillMask over real vocabularies in
// typical states. Prints one stable line per (vocabulary, state):
//   grammar_bench vocab=128256 model=llama3_2 state=in_string mask_ms=...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "inference/grammar/grammar_matcher.h"
#include "inference/grammar/json_schema.h"
#include "inference/grammar/test_vocab.h"
#include "inference/grammar/token_vocabulary.h"

namespace ringlm::grammar {
namespace {

struct Case {
  const char* state;
  const char* schema;  // nullptr = {"type":"json_object"}.
  const char* prefix;
};

constexpr Case kCases[] = {
    {"in_string",
     R"({"type":"object","properties":{"name":{"type":"string"},)"
     R"("age":{"type":"integer"}},"required":["name","age"]})",
     R"({"name": "Ada Lovel)"},
    {"after_value",
     R"({"type":"object","properties":{"name":{"type":"string"},)"
     R"("age":{"type":"integer"}},"required":["name","age"]})",
     R"({"name": "Ada")"},
    {"between_properties",
     R"({"type":"object","properties":{"name":{"type":"string"},)"
     R"("age":{"type":"integer"},"tags":{"type":"array"}},)"
     R"("required":["name"]})",
     R"({"name": "Ada", )"},
    {"in_number", R"({"type":"object","properties":{"age":{"type":"number"}}})", R"({"age": 12)"},
    // A free key that may still turn into the declared "name": tracked byte by
    // byte until it diverges (the whole-subtree shortcut is off until then).
    {"in_tracked_key",
     R"({"type":"object","properties":{"name":{"type":"string"}},)"
     R"("additionalProperties":{"type":"string"}})",
     R"({"na)"},
    {"json_object_value", nullptr, R"({"key": )"},
    {"json_object_in_key", nullptr, R"({"ke)"},
    {"start", nullptr, ""},
};

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

int Run(const std::string& model) {
  absl::StatusOr<std::vector<std::string>> tokens =
      testing::LoadByteLevelVocab(testing::HfTokenizerPath(model));
  if (!tokens.ok()) {
    std::printf("grammar_bench model=%s skipped: %s\n", model.c_str(),
                std::string(tokens.status().message()).c_str());
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto vocab = std::make_shared<const TokenVocabulary>(*std::move(tokens));
  std::printf("grammar_bench vocab=%zu model=%s trie_nodes=%zu build_ms=%.1f\n", vocab->size(),
              model.c_str(), vocab->trie().size(), Ms(std::chrono::steady_clock::now() - t0));
  for (const Case& c : kCases) {
    const nlohmann::ordered_json format =
        c.schema == nullptr
            ? nlohmann::ordered_json{{"type", "json_object"}}
            : nlohmann::ordered_json{
                  {"type", "json_schema"},
                  {"json_schema",
                   {{"name", "bench"}, {"schema", nlohmann::ordered_json::parse(c.schema)}}}};
    absl::StatusOr<std::optional<Grammar>> grammar = CompileResponseFormat(format);
    if (!grammar.ok() || !grammar->has_value()) {
      std::printf("grammar_bench state=%s error=%s\n", c.state,
                  std::string(grammar.status().message()).c_str());
      return 1;
    }
    GrammarMatcher matcher(**grammar, vocab);
    if (*c.prefix != '\0' && !matcher.AcceptBytes(c.prefix).ok()) {
      std::printf("grammar_bench state=%s error=prefix rejected\n", c.state);
      return 1;
    }
    std::vector<uint8_t> mask;
    matcher.FillMask(&mask);  // warm-up
    std::vector<double> times;
    for (int rep = 0; rep < 15; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      matcher.FillMask(&mask);
      times.push_back(Ms(std::chrono::steady_clock::now() - start));
    }
    std::sort(times.begin(), times.end());
    const size_t allowed = std::count(mask.begin(), mask.end(), 1);
    std::printf("grammar_bench vocab=%zu model=%s state=%s allowed=%zu mask_ms=%.2f max_ms=%.2f\n",
                vocab->size(), model.c_str(), c.state, allowed, times[times.size() / 2],
                times.back());
  }
  return 0;
}

}  // namespace
}  // namespace ringlm::grammar

int main(int argc, char** argv) {
  std::vector<std::string> models = {"llama3_2", "qwen3"};
  if (argc > 1) models.assign(argv + 1, argv + argc);
  int rc = 0;
  for (const std::string& m : models) rc |= ringlm::grammar::Run(m);
  return rc;
}
