// Property test: random walks that pick uniformly among allowed tokens always
// end in JSON valid against the schema (checked by Python's jsonschema).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "inference/grammar/grammar_matcher.h"
#include "inference/grammar/json_schema.h"
#include "inference/grammar/test_vocab.h"

namespace ringlm::grammar {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kWalks = 100;
constexpr int kMaxTokens = 4000;
constexpr char kPython[] = "/usr/bin/python3";

// Each entry: a response_format "schema" (or "json_object").
const char* const kSchemas[] = {
    // 0: nested objects
    R"({"type":"object","properties":{"user":{"type":"object","properties":{
        "name":{"type":"string","maxLength":20},"age":{"type":"integer"}},
        "required":["name","age"],"additionalProperties":false},"active":{"type":"boolean"}},
        "required":["user"],"additionalProperties":false})",
    // 1: array with min/maxItems
    R"({"type":"array","items":{"type":"number"},"minItems":1,"maxItems":5})",
    // 2: enums
    R"({"type":"object","properties":{"color":{"enum":["red","green","blue","é\"q"]},
        "size":{"enum":[1,2.5,null,[true]]}},"required":["color","size"],
        "additionalProperties":false})",
    // 3: anyOf
    R"({"anyOf":[{"type":"string","maxLength":10},{"type":"integer"},{"type":"object",
        "properties":{"k":{"type":"null"}},"required":["k"],"additionalProperties":false}]})",
    // 4: required and optional
    R"({"type":"object","properties":{"a":{"type":"string","maxLength":5},"b":{"type":"integer","exclusiveMinimum":0},
        "c":{"type":"boolean"},"d":{"type":"null"}},"required":["b","d"],
        "additionalProperties":false})",
    // 5: strings with min/maxLength
    R"({"type":"array","items":{"type":"string","minLength":2,"maxLength":8},"maxItems":4})",
    // 6: numbers, booleans, null
    R"({"type":"object","properties":{"n":{"type":"number"},"i":{"type":"integer","minimum":-3,"maximum":250},
        "b":{"type":"boolean"},"z":{"type":"null"}},"required":["n","i","b","z"],
        "additionalProperties":false})",
    // 7: additionalProperties as a schema
    R"({"type":"object","properties":{"id":{"type":"integer"},"ok":{"type":"boolean"}},
        "required":["id"],"additionalProperties":{"type":"string","maxLength":10}})",
    // 8: recursive $ref
    R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
        "kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":3}},
        "required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
    // 9: OpenAI strict style: nullable via anyOf, enum items, definitions
    R"({"type":"object","properties":{"q":{"anyOf":[{"type":"string","maxLength":12},
        {"type":"null"}]},"tags":{"type":"array","items":{"$ref":"#/definitions/tag"},
        "maxItems":3}},"required":["q","tags"],"additionalProperties":false,
        "definitions":{"tag":{"enum":["x","y"]}}})",
    // 10: free-form object (response_format json_object)
    "json_object",
};

bool PythonJsonschemaAvailable() {
  static const bool available =
      std::system((std::string(kPython) + " -c 'import jsonschema' >/dev/null 2>&1").c_str()) == 0;
  return available;
}

// Validates every sample; returns the number of valid ones and prints the
// first failures.
int ValidCount(const std::string& schema, const std::vector<std::string>& samples,
               const std::string& tag) {
  const std::string dir = ringlm::testing::MakeTempDir("grammar_walk");
  const std::string schema_path = dir + "/grammar_walk_" + tag + "_schema.json";
  const std::string samples_path = dir + "/grammar_walk_" + tag + "_samples.jsonl";
  const std::string result_path = dir + "/grammar_walk_" + tag + "_result.txt";
  std::ofstream(schema_path) << schema;
  {
    std::ofstream out(samples_path);
    for (const std::string& s : samples) out << nlohmann::json(s).dump() << "\n";
  }
  const std::string script =
      "import json,sys,jsonschema\n"
      "schema=json.load(open(sys.argv[1]))\n"
      "v=jsonschema.validators.validator_for(schema)(schema)\n"
      "ok=0\n"
      "for i,line in enumerate(open(sys.argv[2],encoding='utf-8')):\n"
      "  text=json.loads(line)\n"
      "  try:\n"
      "    errs=[e.message for e in v.iter_errors(json.loads(text))]\n"
      "  except ValueError as e:\n"
      "    errs=['not JSON: %s' % e]\n"
      "  if errs: print('sample', i, repr(text)[:200], errs[0][:200], file=sys.stderr)\n"
      "  else: ok+=1\n"
      "open(sys.argv[3],'w').write(str(ok))\n";
  const std::string script_path = dir + "/grammar_walk_validate.py";
  std::ofstream(script_path) << script;
  const std::string cmd = std::string(kPython) + " " + script_path + " " + schema_path + " " +
                          samples_path + " " + result_path;
  if (std::system(cmd.c_str()) != 0) return -1;
  std::ifstream in(result_path);
  int ok = -1;
  in >> ok;
  return ok;
}

// Picks uniformly among the allowed tokens: rejection sampling first (exactly
// uniform on success), the full mask when that fails; -1 if none is allowed.
int32_t PickAllowed(GrammarMatcher& m, size_t vocab_size, bool always_mask, std::mt19937_64& rng) {
  if (!always_mask) {
    for (int attempt = 0; attempt < 64; ++attempt) {
      const int32_t t = static_cast<int32_t>(rng() % vocab_size);
      if (m.IsAllowed(t)) return t;
    }
  }
  std::vector<uint8_t> mask;
  m.FillMask(&mask);
  std::vector<int32_t> allowed;
  for (size_t id = 0; id < mask.size(); ++id) {
    if (mask[id]) allowed.push_back(static_cast<int32_t>(id));
  }
  if (allowed.empty()) return -1;
  const int32_t pick = allowed[rng() % allowed.size()];
  // The cheap check and the mask agree.
  EXPECT_TRUE(m.IsAllowed(pick));
  const int32_t other = static_cast<int32_t>(rng() % vocab_size);
  EXPECT_EQ(m.IsAllowed(other), mask[other] == 1) << "token " << other;
  return pick;
}

// Free-form JSON with the default bounds (2048-code-point strings, 32
// properties, depth 8) is finite but can outgrow kMaxTokens under a uniform
// random walk; that case runs with tighter bounds. Schemas use the defaults.
GrammarOptions OptionsFor(const std::string& schema) {
  GrammarOptions options;
  if (schema == "json_object") {
    options.max_string_length = 64;
    options.max_key_length = 16;
    options.max_additional_properties = 8;
    options.max_array_items = 8;
    options.max_any_depth = 4;
  }
  return options;
}

absl::StatusOr<Grammar> CompileCase(const std::string& schema) {
  Json format = schema == "json_object"
                    ? Json{{"type", "json_object"}}
                    : Json{{"type", "json_schema"},
                           {"json_schema", {{"name", "walk"}, {"schema", Json::parse(schema)}}}};
  absl::StatusOr<std::optional<Grammar>> g = CompileResponseFormat(format, OptionsFor(schema));
  if (!g.ok()) return g.status();
  return **g;
}

void RunWalks(const std::shared_ptr<const TokenVocabulary>& vocab, const std::string& name,
              bool always_mask) {
  if (!PythonJsonschemaAvailable()) {
    GTEST_SKIP() << kPython << " with the jsonschema module is not available";
  }
  for (size_t c = 0; c < std::size(kSchemas); ++c) {
    const std::string schema = kSchemas[c];
    absl::StatusOr<Grammar> grammar = CompileCase(schema);
    ASSERT_TRUE(grammar.ok()) << grammar.status();
    std::vector<std::string> samples;
    int longest = 0;
    for (int walk = 0; walk < kWalks; ++walk) {
      std::mt19937_64 rng(1000 * c + walk);
      GrammarMatcher m(*grammar, vocab);
      std::string out;
      int steps = 0;
      while (!m.IsFinished() && !(m.CanEnd() && (rng() & 1))) {
        ASSERT_LT(steps, kMaxTokens)
            << "schema " << c << " walk " << walk << ": " << out.substr(0, 300);
        const int32_t token = PickAllowed(m, vocab->size(), always_mask, rng);
        ASSERT_GE(token, 0) << "no allowed token: schema " << c << " after " << out.substr(0, 300);
        ASSERT_TRUE(m.Accept(token).ok());
        out += vocab->token_bytes(token);
        ++steps;
      }
      ASSERT_TRUE(m.CanEnd());
      EXPECT_FALSE(nlohmann::json::parse(out, nullptr, false).is_discarded()) << out;
      longest = std::max(longest, steps);
      samples.push_back(out);
    }
    const std::string validated = schema == "json_object" ? R"({"type":"object"})" : schema;
    const int valid = ValidCount(validated, samples, name + std::to_string(c));
    std::printf("random_walk vocab=%s schema=%zu valid=%d/%d longest_tokens=%d\n", name.c_str(), c,
                valid, kWalks, longest);
    EXPECT_EQ(valid, kWalks) << "schema " << c << ": " << schema;
  }
}

// Small hand vocabulary: every printable ASCII byte and "\n", a few merged
// tokens, "é" whole and split in two, and an empty control token.
std::shared_ptr<const TokenVocabulary> HandVocab() {
  std::vector<std::string> tokens = {
      "",       "\n", "\xC3", "\xA9",  "\xC3\xA9",         "\"a\"",   "true", "null", "{\"", "\":",
      "\", \"", "12", "},",   "\\u00", "\xF0\x9F\x98\x80", "\xE2\x82"};
  for (int b = 0x20; b < 0x7f; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  return std::make_shared<const TokenVocabulary>(std::move(tokens));
}

TEST(RandomWalkTest, HandVocabulary) { RunWalks(HandVocab(), "hand", /*always_mask=*/true); }

TEST(RandomWalkTest, Llama32Vocabulary) {
  absl::StatusOr<std::vector<std::string>> tokens =
      testing::LoadByteLevelVocab(testing::HfTokenizerPath("llama3_2"));
  if (!tokens.ok()) GTEST_SKIP() << "llama3_2 vocabulary unavailable: " << tokens.status();
  RunWalks(std::make_shared<const TokenVocabulary>(*std::move(tokens)), "llama3_2",
           /*always_mask=*/false);
}

}  // namespace
}  // namespace ringlm::grammar

namespace ringlm::grammar {
namespace {

// FillMask (with its whole-subtree shortcuts) agrees with the per-token
// check on every token of a real vocabulary, in states near the bounds.
TEST(MaskConsistencyTest, Llama32MaskEqualsPerTokenCheck) {
  absl::StatusOr<std::vector<std::string>> tokens =
      testing::LoadByteLevelVocab(testing::HfTokenizerPath("llama3_2"));
  if (!tokens.ok()) GTEST_SKIP() << "llama3_2 vocabulary unavailable: " << tokens.status();
  auto vocab = std::make_shared<const TokenVocabulary>(*std::move(tokens));
  const struct {
    const char* schema;
    const char* prefix;
  } kStates[] = {
      {R"({"type":"string","maxLength":12})", R"("abcdefgh)"},  // 4 code points left
      {R"({"type":"string","minLength":3,"maxLength":40})", R"("a)"},
      {R"({"anyOf":[{"type":"string","maxLength":5},{"type":"string","maxLength":9}]})",
       R"("ab)"},                              // two string heads with different room
      {R"({"type":"string"})", "\"\xE2\x82"},  // mid UTF-8 sequence
      {R"({"type":"string"})", R"("x\u00)"},   // mid escape
      {R"({"type":"object","properties":{"name":{"type":"string"}},
           "additionalProperties":{"type":"integer"}})",
       R"({"na)"},  // a key that may still become the declared "name"
      {R"({"type":"object","properties":{"a":{"type":"integer","minimum":10,"maximum":300}}})",
       R"({"a": 2)"},
  };
  for (const auto& state : kStates) {
    absl::StatusOr<Grammar> g = CompileJsonSchema(Json::parse(state.schema));
    ASSERT_TRUE(g.ok()) << g.status();
    GrammarMatcher m(*g, vocab);
    ASSERT_TRUE(m.AcceptBytes(state.prefix).ok()) << state.prefix;
    std::vector<uint8_t> mask;
    m.FillMask(&mask);
    size_t allowed = 0;
    for (size_t id = 0; id < vocab->size(); ++id) {
      ASSERT_EQ(mask[id] == 1, m.IsAllowed(static_cast<int32_t>(id)))
          << state.prefix << " + token " << id << " '" << vocab->token_bytes(id) << "'";
      allowed += mask[id];
    }
    EXPECT_GT(allowed, 0u) << state.prefix;
  }
}

}  // namespace
}  // namespace ringlm::grammar
