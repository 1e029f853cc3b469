#include "chat/jinja/internal/lexer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringlm::jinja::internal {
namespace {

std::vector<std::string> Describe(std::string_view source) {
  absl::StatusOr<std::vector<Token>> tokens = Lex(source);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  std::vector<std::string> out;
  if (!tokens.ok()) return out;
  for (const Token& t : *tokens) {
    switch (t.type) {
      case TokenType::kData:
        out.push_back("data:" + t.value);
        break;
      case TokenType::kVarBegin:
        out.push_back("{{");
        break;
      case TokenType::kVarEnd:
        out.push_back("}}");
        break;
      case TokenType::kBlockBegin:
        out.push_back("{%");
        break;
      case TokenType::kBlockEnd:
        out.push_back("%}");
        break;
      case TokenType::kName:
        out.push_back("name:" + t.value);
        break;
      case TokenType::kString:
        out.push_back("str:" + t.value);
        break;
      case TokenType::kInteger:
        out.push_back("int:" + std::to_string(t.int_value));
        break;
      case TokenType::kFloat:
        out.push_back("float:" + t.value);
        break;
      case TokenType::kOperator:
        out.push_back("op:" + t.value);
        break;
      case TokenType::kEof:
        out.push_back("eof");
        break;
    }
  }
  return out;
}

using V = std::vector<std::string>;

TEST(JinjaLexerTest, TokenizesExpressions) {
  EXPECT_EQ(Describe("a{{ x.y[0] | f(1.5, 'q') }}b"),
            (V{"data:a", "{{", "name:x", "op:.", "name:y", "op:[", "int:0", "op:]", "op:|",
               "name:f", "op:(", "float:1.5", "op:,", "str:q", "op:)", "}}", "data:b", "eof"}));
  EXPECT_EQ(Describe("{{ a // b ** c != d }}"), (V{"{{", "name:a", "op://", "name:b", "op:**",
                                                   "name:c", "op:!=", "name:d", "}}", "eof"}));
}

TEST(JinjaLexerTest, DecodesStringEscapes) {
  EXPECT_EQ(Describe(R"({{ "a\n\t\"\u00e9\x41\q" }})"), (V{"{{",
                                                           "str:a\n\t\"\xc3\xa9"
                                                           "A\\q",
                                                           "}}", "eof"}));
}

TEST(JinjaLexerTest, TrimBlocksDropsOneNewlineAfterBlock) {
  EXPECT_EQ(Describe("{% if x %}\n\nA"), (V{"{%", "name:if", "name:x", "%}", "data:\nA", "eof"}));
}

TEST(JinjaLexerTest, LstripBlocksStripsIndentBeforeBlockNotVariable) {
  EXPECT_EQ(Describe("x\n   {% if %}\n  {{ y }}"),
            (V{"data:x\n", "{%", "name:if", "%}", "data:  ", "{{", "name:y", "}}", "eof"}));
}

TEST(JinjaLexerTest, MinusStripsAllWhitespace) {
  EXPECT_EQ(Describe("a \n {{- x -}} \n b"), (V{"data:a", "{{", "name:x", "}}", "data:b", "eof"}));
}

TEST(JinjaLexerTest, PlusDisablesLstrip) {
  EXPECT_EQ(Describe("  {%+ if %}"), (V{"data:  ", "{%", "name:if", "%}", "eof"}));
}

TEST(JinjaLexerTest, CommentsAndRaw) {
  EXPECT_EQ(Describe("a{# c #}b{% raw %}{{ x }}{% endraw %}c"),
            (V{"data:a", "data:b", "data:{{ x }}", "data:c", "eof"}));
}

TEST(JinjaLexerTest, DropsOneTrailingNewlineAndNormalizesCr) {
  EXPECT_EQ(Describe("a\r\nb\n\n"), (V{"data:a\nb\n", "eof"}));
}

TEST(JinjaLexerTest, DictBracesDoNotEndVariable) {
  EXPECT_EQ(Describe("{{ {'a': 1} }}"),
            (V{"{{", "op:{", "str:a", "op::", "int:1", "op:}", "}}", "eof"}));
}

TEST(JinjaLexerTest, Errors) {
  EXPECT_FALSE(Lex("{{ 'abc }}").ok());
  EXPECT_FALSE(Lex("{# never closed").ok());
  EXPECT_FALSE(Lex("{{ x ").ok());
  EXPECT_FALSE(Lex("{{ ) }}").ok());
  EXPECT_FALSE(Lex("{{ x $ y }}").ok());
  absl::StatusOr<std::vector<Token>> t = Lex("a\nb\n{{ 'x }}");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("line 3"), std::string::npos) << t.status();
}

}  // namespace
}  // namespace ringlm::jinja::internal
