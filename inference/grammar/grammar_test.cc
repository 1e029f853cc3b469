// Masks, Accept and termination of GrammarMatcher on hand-made vocabularies.
#include "inference/grammar/grammar.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grammar/grammar_matcher.h"
#include "inference/grammar/json_schema.h"
#include "inference/grammar/test_vocab.h"
#include "inference/grammar/token_vocabulary.h"

namespace ringlm::grammar {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// A tiny vocabulary: "é" exists whole and split over two tokens; id 0 is an
// empty (control) token.
std::shared_ptr<const TokenVocabulary> HandVocab() {
  return std::make_shared<const TokenVocabulary>(std::vector<std::string>{
      "",   "{",    "}",  "\"",   "a",    "\"a\"",    ",",   ":",   " ",    "1",
      "12", "true", "\\", "\xC3", "\xA9", "\xC3\xA9", "[",   "]",   "null", "\n",
      "n",  "u",    ".",  "e",    "-",    "\"\"",     "\"a", "a\"", "}}"});
}

std::shared_ptr<const TokenVocabulary> Bytes() {
  return std::make_shared<const TokenVocabulary>(testing::ByteVocab());
}

std::set<std::string> Allowed(GrammarMatcher& m, const TokenVocabulary& vocab) {
  std::vector<uint8_t> mask;
  m.FillMask(&mask);
  EXPECT_EQ(mask.size(), vocab.size());
  std::set<std::string> out;
  for (size_t id = 0; id < mask.size(); ++id) {
    if (mask[id]) out.insert(vocab.token_bytes(static_cast<int32_t>(id)));
  }
  return out;
}

int32_t Id(const TokenVocabulary& vocab, const std::string& bytes) {
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (vocab.token_bytes(static_cast<int32_t>(id)) == bytes) return static_cast<int32_t>(id);
  }
  ADD_FAILURE() << "no token " << bytes;
  return -1;
}

Grammar Schema(const char* text, GrammarOptions options = {}) {
  absl::StatusOr<Grammar> g = CompileJsonSchema(nlohmann::ordered_json::parse(text), options);
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(TokenVocabularyTest, TrieIsPreorderWithSubtreeBounds) {
  TokenVocabulary vocab({"ab", "a", "", "b", "ab"});
  const auto& trie = vocab.trie();
  ASSERT_EQ(trie.size(), 3u);  // a, ab, b
  EXPECT_EQ(trie[0].byte, 'a');
  EXPECT_EQ(trie[0].subtree_end, 2u);
  EXPECT_EQ(trie[1].depth, 2);
  EXPECT_EQ(trie[1].tokens_end - trie[1].tokens_begin, 2u);  // ids 0 and 4
  EXPECT_EQ(trie[2].byte, 'b');
}

TEST(GrammarMatcherTest, IntegerPropertyMasksStepByStep) {
  auto vocab = HandVocab();
  GrammarMatcher m(Schema(R"({"type":"object","properties":{"a":{"type":"integer"}},
                              "required":["a"],"additionalProperties":false})"),
                   vocab);
  EXPECT_THAT(Allowed(m, *vocab), ElementsAre("{"));
  EXPECT_FALSE(m.CanEnd());
  ASSERT_TRUE(m.Accept(Id(*vocab, "{")).ok());
  // The required key or whitespace; never "}" (a is required).
  EXPECT_THAT(Allowed(m, *vocab), UnorderedElementsAre("\"", "\"a\"", "\"a", " ", "\n"));
  ASSERT_TRUE(m.Accept(Id(*vocab, "\"a\"")).ok());
  EXPECT_THAT(Allowed(m, *vocab), UnorderedElementsAre(":", " ", "\n"));
  ASSERT_TRUE(m.Accept(Id(*vocab, ":")).ok());
  EXPECT_THAT(Allowed(m, *vocab), UnorderedElementsAre(" ", "\n", "1", "12", "-"));
  ASSERT_TRUE(m.Accept(Id(*vocab, "12")).ok());
  // More digits, whitespace or the end; no fraction for an integer.
  EXPECT_THAT(Allowed(m, *vocab), UnorderedElementsAre("1", "12", " ", "\n", "}"));
  EXPECT_FALSE(m.CanEnd());
  ASSERT_TRUE(m.Accept(Id(*vocab, "}")).ok());
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.IsFinished());
  EXPECT_THAT(Allowed(m, *vocab), IsEmpty());
  EXPECT_FALSE(m.Accept(Id(*vocab, "}")).ok());
}

TEST(GrammarMatcherTest, DisallowedAcceptFailsAndKeepsState) {
  auto vocab = HandVocab();
  GrammarMatcher m(Schema(R"({"type":"array","items":{"type":"boolean"}})"), vocab);
  ASSERT_TRUE(m.Accept(Id(*vocab, "[")).ok());
  const std::set<std::string> before = Allowed(m, *vocab);
  EXPECT_THAT(before, UnorderedElementsAre("true", "]", " ", "\n"));
  EXPECT_FALSE(m.Accept(Id(*vocab, "1")).ok());
  EXPECT_FALSE(m.Accept(0).ok());    // empty control token
  EXPECT_FALSE(m.Accept(999).ok());  // out of range
  EXPECT_FALSE(m.IsAllowed(Id(*vocab, "1")));
  EXPECT_TRUE(m.IsAllowed(Id(*vocab, "true")));
  EXPECT_EQ(Allowed(m, *vocab), before);
  ASSERT_TRUE(m.Accept(Id(*vocab, "true")).ok());
  EXPECT_THAT(Allowed(m, *vocab), UnorderedElementsAre(",", "]", " ", "\n"));
}

TEST(GrammarMatcherTest, StringAtMaxLengthOnlyCloses) {
  auto vocab = HandVocab();
  GrammarMatcher m(Schema(R"({"type":"string","maxLength":2})"), vocab);
  EXPECT_THAT(Allowed(m, *vocab), UnorderedElementsAre("\"", "\"a\"", "\"\"", "\"a"));
  ASSERT_TRUE(m.Accept(Id(*vocab, "\"")).ok());
  ASSERT_TRUE(m.Accept(Id(*vocab, "a")).ok());
  ASSERT_TRUE(m.Accept(Id(*vocab, "\xC3\xA9")).ok());  // one code point, two bytes
  EXPECT_THAT(Allowed(m, *vocab), ElementsAre("\""));
  ASSERT_TRUE(m.Accept(Id(*vocab, "\"")).ok());
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.IsFinished());
}

TEST(GrammarMatcherTest, MinLengthDelaysTheClosingQuote) {
  auto vocab = HandVocab();
  GrammarMatcher m(Schema(R"({"type":"string","minLength":2,"maxLength":3})"), vocab);
  ASSERT_TRUE(m.Accept(Id(*vocab, "\"a")).ok());
  EXPECT_FALSE(m.IsAllowed(Id(*vocab, "\"")));
  EXPECT_TRUE(m.IsAllowed(Id(*vocab, "a\"")));  // closes at 2 code points
  ASSERT_TRUE(m.Accept(Id(*vocab, "a")).ok());
  EXPECT_TRUE(m.IsAllowed(Id(*vocab, "\"")));
}

TEST(GrammarMatcherTest, Utf8SplitAcrossTokensMustComplete) {
  auto vocab = HandVocab();
  GrammarMatcher m(Schema(R"({"type":"string"})"), vocab);
  ASSERT_TRUE(m.Accept(Id(*vocab, "\"")).ok());
  std::set<std::string> in_string = Allowed(m, *vocab);
  EXPECT_TRUE(in_string.contains("\xC3"));
  EXPECT_TRUE(in_string.contains("\xC3\xA9"));
  EXPECT_FALSE(in_string.contains("\xA9"));  // a lone continuation byte
  EXPECT_FALSE(in_string.contains("\n"));    // raw control characters are not JSON
  ASSERT_TRUE(m.Accept(Id(*vocab, "\xC3")).ok());
  EXPECT_THAT(Allowed(m, *vocab), ElementsAre("\xA9"));
  ASSERT_TRUE(m.Accept(Id(*vocab, "\xA9")).ok());
  EXPECT_TRUE(m.IsAllowed(Id(*vocab, "\"")));
}

TEST(GrammarMatcherTest, EscapesAndSurrogates) {
  auto bytes = Bytes();
  GrammarMatcher m(Schema(R"({"type":"string"})"), bytes);
  ASSERT_TRUE(m.AcceptBytes("\"\\").ok());
  std::set<std::string> after_backslash = Allowed(m, *bytes);
  EXPECT_THAT(after_backslash, UnorderedElementsAre("\"", "\\", "/", "b", "f", "n", "r", "t", "u"));
  EXPECT_TRUE(m.AcceptBytes("u00e9\\n\\\"").ok());
  EXPECT_FALSE(GrammarMatcher(m).AcceptBytes("\\ud800").ok());  // lone surrogate
  EXPECT_TRUE(GrammarMatcher(m).AcceptBytes("\\uD7FF\"").ok());
  EXPECT_FALSE(GrammarMatcher(m).AcceptBytes("\xED\xA0\x80").ok());      // UTF-8 surrogate
  EXPECT_FALSE(GrammarMatcher(m).AcceptBytes("\xC0\x80").ok());          // overlong
  EXPECT_FALSE(GrammarMatcher(m).AcceptBytes("\xF4\x90\x80\x80").ok());  // > U+10FFFF
  EXPECT_TRUE(GrammarMatcher(m).AcceptBytes("\xF0\x9F\x98\x80\"").ok());
}

TEST(GrammarMatcherTest, WhitespaceIsBounded) {
  auto bytes = Bytes();
  absl::StatusOr<std::optional<Grammar>> g =
      CompileResponseFormat(nlohmann::ordered_json{{"type", "json_object"}});
  ASSERT_TRUE(g.ok() && g->has_value());
  GrammarMatcher m(**g, bytes);
  ASSERT_TRUE(m.AcceptBytes("{\n" + std::string(20, ' ')).ok());
  std::set<std::string> allowed = Allowed(m, *bytes);
  EXPECT_FALSE(allowed.contains(" "));
  EXPECT_FALSE(allowed.contains("\n"));
  EXPECT_THAT(allowed, UnorderedElementsAre("\"", "}"));
  GrammarMatcher two_spaces(**g, bytes);
  EXPECT_FALSE(two_spaces.AcceptBytes("{  ").ok());
}

TEST(GrammarMatcherTest, ToolCallGrammar) {
  auto bytes = Bytes();
  GrammarBuilder b;
  auto weather = b.JsonSchemaText(R"({"type":"object","properties":{"city":{"type":"string"}},
                                      "required":["city"],"additionalProperties":false})");
  auto time = b.JsonSchemaText(R"({"type":"object","properties":{},"additionalProperties":false})");
  ASSERT_TRUE(weather.ok() && time.ok());
  auto call = [&](const char* name, GrammarNode args) {
    return b.Sequence(
        {b.Literal(std::string("<tool_call>\n{\"name\": \"") + name + "\", \"arguments\": "), args,
         b.Literal("}\n</tool_call>")});
  };
  absl::StatusOr<Grammar> g =
      b.Build(b.Choice({call("get_weather", *weather), call("get_time", *time)}));
  ASSERT_TRUE(g.ok()) << g.status();

  GrammarMatcher m(*g, bytes);
  EXPECT_THAT(Allowed(m, *bytes), ElementsAre("<"));
  ASSERT_TRUE(m.AcceptBytes("<tool_call>\n{\"name\": \"get_").ok());
  EXPECT_THAT(Allowed(m, *bytes), UnorderedElementsAre("w", "t"));
  EXPECT_FALSE(GrammarMatcher(m).AcceptBytes("x").ok());
  GrammarMatcher time_call = m;
  ASSERT_TRUE(m.AcceptBytes("weather\", \"arguments\": {\"city\": \"Paris\"}").ok());
  EXPECT_FALSE(m.CanEnd());
  ASSERT_TRUE(m.AcceptBytes("}\n</tool_call>").ok());
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.IsFinished());
  // get_time takes no arguments: only "{" ws "}".
  ASSERT_TRUE(time_call.AcceptBytes("time\", \"arguments\": {").ok());
  EXPECT_THAT(Allowed(time_call, *bytes), UnorderedElementsAre("}", " ", "\n"));
}

TEST(GrammarMatcherTest, DeterministicMasks) {
  auto bytes = Bytes();
  Grammar g = Schema(R"({"anyOf":[{"type":"string"},{"type":"array","items":{"type":"number"}}]})");
  GrammarMatcher a(g, bytes), b(g, bytes);
  for (const char* piece : {"[", "1", "2", ".", "5", ",", " ", "-"}) {
    std::vector<uint8_t> ma, mb;
    a.FillMask(&ma);
    b.FillMask(&mb);
    EXPECT_EQ(ma, mb);
    ASSERT_TRUE(a.AcceptBytes(piece).ok()) << piece;
    ASSERT_TRUE(b.AcceptBytes(piece).ok()) << piece;
  }
}

TEST(GrammarMatcherTest, LiteralChoiceSharingPrefixes) {
  auto vocab = HandVocab();
  GrammarBuilder b;
  absl::StatusOr<Grammar> g = b.Build(b.Choice({b.Literal("{}"), b.Literal("{}}"), b.Literal("")}));
  ASSERT_TRUE(g.ok());
  GrammarMatcher m(*g, vocab);
  EXPECT_TRUE(m.CanEnd());  // "" is in the language
  EXPECT_FALSE(m.IsFinished());
  EXPECT_THAT(Allowed(m, *vocab), UnorderedElementsAre("{"));
  ASSERT_TRUE(m.Accept(Id(*vocab, "{")).ok());
  EXPECT_THAT(Allowed(m, *vocab), UnorderedElementsAre("}", "}}"));
  ASSERT_TRUE(m.Accept(Id(*vocab, "}")).ok());
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.IsFinished());
  EXPECT_THAT(Allowed(m, *vocab), ElementsAre("}"));
}

}  // namespace
}  // namespace ringlm::grammar
