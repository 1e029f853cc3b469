#include "inference/sampling/output_constraint.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "inference/sampling/sampler.h"
#include "inference/sampling/tool_call_syntax.h"
#include "nlohmann/json.hpp"

namespace ringlm {
namespace {

// Single bytes (printable ASCII and newline), a few longer pieces, then id
// kEnd as the end-of-generation token (no bytes). With `shown_tokens`, also
// every other byte and the tokens whose text the tool-call syntaxes show
// (DeepSeek V3's markers), as a byte-level vocabulary with them would be.
struct TinyVocab {
  std::vector<std::string> pieces;
  int32_t end = -1;
  explicit TinyVocab(bool shown_tokens = false) {
    for (int c = 0x20; c < 0x7f; ++c) pieces.push_back(std::string(1, static_cast<char>(c)));
    pieces.push_back("\n");
    for (const char* p : {"<tool_call>", "</tool_call>", "\"name\"", "true", "{\"", "\": "}) {
      pieces.push_back(p);
    }
    if (shown_tokens) {
      for (int c = 0x80; c < 0x100; ++c) pieces.push_back(std::string(1, static_cast<char>(c)));
      for (std::string_view p : FindToolCallSyntax(ToolCallFamily::kDeepSeekV3)->shown_tokens) {
        pieces.push_back(std::string(p));
      }
    }
    end = static_cast<int32_t>(pieces.size());
    pieces.push_back("");
  }
};

// Samples a whole reply from random logits under `spec`; returns its text.
std::string SampleReply(const std::string& spec, uint64_t seed, bool shown_tokens = false) {
  static const TinyVocab plain_vocab;
  static const TinyVocab shown_vocab(/*shown_tokens=*/true);
  const TinyVocab& vocab = shown_tokens ? shown_vocab : plain_vocab;
  absl::StatusOr<grammar::Grammar> g = CompileConstraint(spec);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return "";
  auto tokens = MakeTokenVocabulary(
      static_cast<int32_t>(vocab.pieces.size()), [&](int32_t id) { return vocab.pieces[id]; },
      [&](int32_t id) { return id != vocab.end; });
  ConstrainedSampling constrained(
      *g, tokens, std::make_shared<std::vector<int32_t>>(std::vector<int32_t>{vocab.end}));
  SamplingParams params;
  params.seed = seed;
  Sampler sampler(params);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0, 3);
  std::string text;
  for (int step = 0; step < 5000; ++step) {
    std::vector<float> logits(vocab.pieces.size());
    for (float& l : logits) l = noise(rng);
    EXPECT_TRUE(constrained.Mask(logits).ok());
    const int32_t token = sampler.Sample(logits);
    EXPECT_TRUE(std::isfinite(logits[token]));
    EXPECT_TRUE(constrained.Accept(token).ok());
    if (token == vocab.end) return text;
    text += vocab.pieces[token];
  }
  ADD_FAILURE() << "no end after 5000 tokens: " << text;
  return text;
}

TEST(OutputConstraintTest, SchemaRepliesFromNoiseAreValidJson) {
  const std::string spec = R"({"type":"json_schema","schema":{"type":"object",
      "properties":{"city":{"type":"string","maxLength":8},"n":{"type":"integer"},
      "ok":{"type":"boolean"},"unit":{"enum":["c","f"]}},
      "required":["city","unit"],"additionalProperties":false}})";
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const std::string text = SampleReply(spec, seed);
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_TRUE(j.is_object()) << text;
    EXPECT_TRUE(j["city"].is_string()) << text;
    EXPECT_LE(j["city"].get<std::string>().size(), 8u * 4) << text;
    EXPECT_TRUE(j["unit"] == "c" || j["unit"] == "f") << text;
    for (const auto& [key, value] : j.items()) {
      EXPECT_TRUE(key == "city" || key == "n" || key == "ok" || key == "unit") << text;
    }
  }
}

TEST(OutputConstraintTest, AnyJsonObjectAndForcedToolCalls) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const std::string text = SampleReply(R"({"type":"json_object"})", seed);
    EXPECT_TRUE(nlohmann::json::parse(text, nullptr, false).is_object()) << text;
  }
  const std::string spec = R"({"type":"tool_call","family":"hermes","functions":[
      {"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string",
       "maxLength":6}},"required":["city"],"additionalProperties":false}},
      {"name":"get_time","parameters":{"type":"object","properties":{},"additionalProperties":false}}]})";
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const std::string text = SampleReply(spec, seed);
    ASSERT_EQ(text.rfind("<tool_call>\n", 0), 0u) << text;
    ASSERT_GE(text.size(), 25u);
    ASSERT_EQ(text.substr(text.size() - 13), "\n</tool_call>") << text;
    const nlohmann::json call =
        nlohmann::json::parse(text.substr(12, text.size() - 25), nullptr, false);
    ASSERT_TRUE(call.is_object()) << text;
    EXPECT_TRUE(call["name"] == "get_weather" || call["name"] == "get_time") << text;
    EXPECT_TRUE(call["arguments"].is_object()) << text;
  }
  const std::string llama = SampleReply(
      R"({"type":"tool_call","family":"llama3-json","functions":[{"name":"f","parameters":{"type":"object","properties":{},"additionalProperties":false}}]})",
      3);
  EXPECT_EQ(llama.rfind(R"({"name": "f", "parameters": )", 0), 0u) << llama;
  EXPECT_TRUE(nlohmann::json::parse(llama, nullptr, false)["parameters"].is_object()) << llama;
}

TEST(OutputConstraintTest, ForcedDeepSeekCallsAreItsTemplatesBlocks) {
  const std::string spec = R"({"type":"tool_call","family":"deepseek-v3","functions":[
      {"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string",
       "maxLength":6}},"required":["city"],"additionalProperties":false}},
      {"name":"get_time","parameters":{"type":"object","properties":{},"additionalProperties":false}}]})";
  const std::string open = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>";
  const std::string close = "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const std::string text = SampleReply(spec, seed, /*shown_tokens=*/true);
    ASSERT_EQ(text.rfind(open, 0), 0u) << text;
    ASSERT_GE(text.size(), open.size() + close.size());
    ASSERT_EQ(text.substr(text.size() - close.size()), close) << text;
    const std::string call = text.substr(open.size(), text.size() - open.size() - close.size());
    const size_t fence = call.find("\n```json\n");
    ASSERT_NE(fence, std::string::npos) << text;
    const std::string name = call.substr(0, fence);
    EXPECT_TRUE(name == "get_weather" || name == "get_time") << text;
    const nlohmann::json args = nlohmann::json::parse(call.substr(fence + 9), nullptr, false);
    ASSERT_TRUE(args.is_object()) << text;
    EXPECT_EQ(args.size(), name == "get_weather" ? 1u : 0u) << text;
  }
}

// Issue 38: tool parameters that leave additionalProperties out (llama.cpp's
// own test tools do) give calls with only the declared keys.
TEST(OutputConstraintTest, ToolCallsWithoutAdditionalPropertiesHaveOnlyDeclaredKeys) {
  const std::string spec = R"({"type":"tool_call","family":"llama3-json","functions":[
      {"name":"special_function","parameters":{"type":"object","properties":{
       "arg1":{"type":"integer","description":"The arg."}},"required":["arg1"]}},
      {"name":"python","parameters":{"type":"object","properties":{
       "code":{"type":"string","maxLength":8}},"required":["code"]}}]})";
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const std::string text = SampleReply(spec, seed);
    const nlohmann::json call = nlohmann::json::parse(text, nullptr, false);
    ASSERT_TRUE(call.is_object()) << text;
    const nlohmann::json& args = call["parameters"];
    ASSERT_TRUE(args.is_object()) << text;
    ASSERT_EQ(args.size(), 1u) << text;
    if (call["name"] == "special_function") {
      EXPECT_TRUE(args["arg1"].is_number_integer()) << text;
    } else {
      EXPECT_EQ(call["name"], "python") << text;
      EXPECT_TRUE(args["code"].is_string()) << text;
    }
  }
}

TEST(OutputConstraintTest, AmbiguousSchemasStayCheapAndValid) {
  // 60 overlapping alternatives: the matcher keeps a bounded number of parse
  // heads (so masks stay cheap) and every reply still validates.
  std::string alternatives;
  for (int i = 0; i < 60; ++i) {
    alternatives += (i ? "," : "") + std::string(R"({"type":"string","maxLength":)") +
                    std::to_string(5 + i) + "}";
  }
  const std::string spec = R"({"type":"json_schema","schema":{"anyOf":[)" + alternatives + "]}}";
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const std::string text = SampleReply(spec, seed);
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_TRUE(j.is_string()) << text;
    EXPECT_LE(j.get<std::string>().size(), 64u * 4) << text;
  }
}

TEST(OutputConstraintTest, BadSpecsAreRefusedClearly) {
  for (const char* spec :
       {"", "[]", R"({"type":"xml"})", R"({"type":"json_schema"})",
        R"({"type":"json_schema","schema":{"type":"string","pattern":"a+"}})",
        R"({"type":"tool_call","family":"cobol","functions":[{"name":"f","parameters":{}}]})",
        R"({"type":"tool_call","family":"hermes","functions":[]})"}) {
    absl::StatusOr<grammar::Grammar> g = CompileConstraint(spec);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  }
  EXPECT_FALSE(CompileConstraint(std::string(kMaxConstraintBytes + 1, ' ')).ok());
}

}  // namespace
}  // namespace ringlm
