#include "chat/tool_call_parser.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringlm {
namespace {

// Feeds `pieces` one by one; returns the content shown, in order.
std::string Scan(ToolCallScanner& scanner, const std::vector<std::string>& pieces) {
  std::string shown;
  for (const std::string& p : pieces) shown += scanner.Push(p);
  return shown + scanner.Finish();
}

TEST(ToolCallParserTest, DetectsTheFamilyFromTheTemplate) {
  EXPECT_EQ(DetectToolCallFamily("{{- '<tool_call>\\n' }}"), ToolCallFamily::kHermes);
  EXPECT_EQ(DetectToolCallFamily("[AVAILABLE_TOOLS] ... [TOOL_CALLS]"), ToolCallFamily::kMistral);
  EXPECT_EQ(DetectToolCallFamily("<|start_header_id|>{% if tools %}"), ToolCallFamily::kLlama3);
  EXPECT_EQ(DetectToolCallFamily("<|start_header_id|>user"), ToolCallFamily::kNone);
  EXPECT_EQ(DetectToolCallFamily("<|im_start|>"), ToolCallFamily::kNone);
}

TEST(ToolCallParserTest, HermesCallsSplitAcrossPiecesAndContentAroundThem) {
  ToolCallScanner s(ToolCallFamily::kHermes);
  std::string shown;
  shown += s.Push("Let me check. <tool");
  EXPECT_EQ(shown, "Let me check. ");  // "<tool" may open a call: held back
  shown += s.Push("_call>\n{\"name\": \"get_weather\", \"argu");
  shown += s.Push("ments\": {\"city\": \"Paris\"}}\n</tool_call>");
  std::vector<ParsedToolCall> calls = s.TakeCalls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_EQ(calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(calls[0].id.size(), 29u);
  shown += s.Push("\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}");
  shown += s.Finish();  // the model stopped before </tool_call>
  calls = s.TakeCalls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "get_time");
  EXPECT_EQ(calls[0].arguments, "{}");
  EXPECT_EQ(shown, "Let me check. \n");
  EXPECT_TRUE(s.found_calls());
}

TEST(ToolCallParserTest, WhatDoesNotParseStaysContent) {
  ToolCallScanner s(ToolCallFamily::kHermes);
  const std::string text = "a <tool_call>not json</tool_call> b <tool_ca";
  EXPECT_EQ(Scan(s, {text}), text);
  EXPECT_TRUE(s.TakeCalls().empty());
  EXPECT_FALSE(s.found_calls());
  ToolCallScanner l(ToolCallFamily::kLlama3);
  EXPECT_EQ(Scan(l, {" {\"nam", "e\": 3}"}), " {\"name\": 3}");
  EXPECT_FALSE(l.found_calls());
}

TEST(ToolCallParserTest, Llama3JsonIsTheWholeReply) {
  ToolCallScanner s(ToolCallFamily::kLlama3);
  EXPECT_EQ(Scan(s, {" ", "{\"name\": \"f\", ", "\"parameters\": {\"x\": 1}}"}), "");
  std::vector<ParsedToolCall> calls = s.TakeCalls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "f");
  EXPECT_EQ(calls[0].arguments, R"({"x":1})");
  // Chained with ';'.
  ToolCallScanner chained(ToolCallFamily::kLlama3);
  EXPECT_EQ(Scan(chained, {R"({"name": "a", "parameters": {}}; {"name": "b", "parameters": {}})"}),
            "");
  EXPECT_EQ(chained.TakeCalls().size(), 2u);
  // Plain text streams at once.
  ToolCallScanner text(ToolCallFamily::kLlama3);
  EXPECT_EQ(text.Push("Hello"), "Hello");
  EXPECT_EQ(text.Push(" {json}"), " {json}");
}

TEST(ToolCallParserTest, MistralArraysWithOrWithoutTheMarkerText) {
  ToolCallScanner s(ToolCallFamily::kMistral);
  EXPECT_EQ(Scan(s, {"[{\"name\": \"f\", \"arguments\": {\"q\": \"x\"}}, ",
                     "{\"name\": \"g\", \"arguments\": \"{}\"}]"}),
            "");
  std::vector<ParsedToolCall> calls = s.TakeCalls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].name, "g");
  EXPECT_EQ(calls[1].arguments, "{}");
  ToolCallScanner marked(ToolCallFamily::kMistral);
  EXPECT_EQ(Scan(marked, {"[TOOL_", "CALLS][{\"name\": \"f\", \"arguments\": {}}]"}), "");
  EXPECT_EQ(marked.TakeCalls().size(), 1u);
  ToolCallScanner text(ToolCallFamily::kMistral);
  EXPECT_EQ(Scan(text, {"Sure", "!"}), "Sure!");
}

// What the output constraint makes the model write (tool_call_syntax.h, as
// output_constraint.cc builds it) is what the scanner takes as a call.
TEST(ToolCallParserTest, TheConstrainedFormOfEveryFamilyParsesAsOneCall) {
  for (ToolCallFamily family :
       {ToolCallFamily::kHermes, ToolCallFamily::kLlama3, ToolCallFamily::kMistral}) {
    const ToolCallSyntax* syntax = FindToolCallSyntax(family);
    ASSERT_NE(syntax, nullptr);
    const std::string written = std::string(syntax->call_open) + "get_weather\", \"" +
                                std::string(syntax->args_key) + "\": {\"city\": \"Oslo\"}" +
                                std::string(syntax->call_close);
    ToolCallScanner scanner(family);
    EXPECT_EQ(Scan(scanner, {written}), "") << syntax->name;
    std::vector<ParsedToolCall> calls = scanner.TakeCalls();
    ASSERT_EQ(calls.size(), 1u) << syntax->name << ": " << written;
    EXPECT_EQ(calls[0].name, "get_weather");
    EXPECT_EQ(calls[0].arguments, R"({"city":"Oslo"})");
    EXPECT_EQ(FindToolCallSyntax(syntax->name), syntax);
  }
  EXPECT_EQ(FindToolCallSyntax(ToolCallFamily::kNone), nullptr);
  EXPECT_EQ(ToolCallFamilyName(ToolCallFamily::kNone), "none");
}

}  // namespace
}  // namespace ringlm
