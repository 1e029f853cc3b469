#include "chat/tool_call_parser.h"

#include <string>
#include <vector>

#include "chat/npm_template_for_test.h"
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
  EXPECT_EQ(DetectToolCallFamily("{{'<｜Assistant｜><｜tool▁calls▁begin｜>'}}"),
            ToolCallFamily::kDeepSeekV3);
  EXPECT_EQ(DetectToolCallFamily("<｜User｜>{{ m }}<｜Assistant｜>"), ToolCallFamily::kNone);
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

// A DeepSeek V3 block of calls, as the model writes it (its template's
// history form; the markers are control tokens its decoder shows as text).
std::string DeepSeekCall(const std::string& name, const std::string& args) {
  return "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + name + "\n```json\n" + args +
         "\n```<｜tool▁call▁end｜>";
}
const char kBegin[] = "<｜tool▁calls▁begin｜>";
const char kEnd[] = "<｜tool▁calls▁end｜>";

TEST(ToolCallParserTest, DetectsDeepSeekV3FromItsRealTemplate) {
  NPM_TEMPLATE_OR_SKIP(deepseek, "deepseek_v3");
  EXPECT_EQ(DetectToolCallFamily(deepseek), ToolCallFamily::kDeepSeekV3);
  // The template writes a call in history as the syntax (and so the
  // constraint) writes one: "function" is the type of an OpenAI call.
  const ToolCallSyntax* syntax = FindToolCallSyntax(ToolCallFamily::kDeepSeekV3);
  EXPECT_EQ(syntax->call_open, std::string(syntax->marker_open) + std::string(kDeepSeekCallBegin) +
                                   "function" + std::string(kDeepSeekCallSep));
  EXPECT_EQ(syntax->call_close,
            "\n```" + std::string(kDeepSeekCallEnd) + std::string(syntax->marker_close));
  for (const std::string part :
       {std::string(syntax->marker_open) + std::string(kDeepSeekCallBegin) +
            "' + tool['type'] + '" + std::string(kDeepSeekCallSep) +
            "' + tool['function']['name'] + '\n' + '```json' + '\n' + "
            "tool['function']['arguments'] + '\n' + '```' + '" +
            std::string(kDeepSeekCallEnd),
        std::string(syntax->marker_close)}) {
    EXPECT_NE(deepseek.find(part), std::string::npos) << part;
  }
  // The other npm templates are not taken for it.
  for (const char* other : {"qwen3", "gemma3", "llama3_2", "mistral_nemo"}) {
    const std::string t = testing::NpmChatTemplate(other);
    if (!t.empty()) EXPECT_NE(DetectToolCallFamily(t), ToolCallFamily::kDeepSeekV3) << other;
  }
}

// Content, then a block of two calls, then more content: fed in pieces of
// every size, the content streams (before the block ends) and both calls
// come out whole.
TEST(ToolCallParserTest, DeepSeekCallsInPiecesOfEverySize) {
  const std::string before = "Let me check both. <｜ not a marker ";
  const std::string block = std::string(kBegin) +
                            DeepSeekCall("get_weather", R"({"city": "Zürich"})") + "\n" +
                            DeepSeekCall("get_time", "{}") + kEnd;
  const std::string after = " Done.";
  const std::string reply = before + block + after;
  for (size_t size = 1; size <= reply.size(); ++size) {
    ToolCallScanner s(ToolCallFamily::kDeepSeekV3);
    std::string shown;
    size_t fed = 0;
    for (; fed < reply.size(); fed += size) {
      shown += s.Push(std::string_view(reply).substr(fed, size));
      if (fed + size >= before.size() && fed + size < before.size() + block.size()) {
        // Inside the block: everything before it has been shown.
        ASSERT_EQ(shown, before) << size;
        ASSERT_TRUE(s.TakeCalls().empty()) << size;
      }
    }
    shown += s.Finish();
    EXPECT_EQ(shown, before + after) << size;
    std::vector<ParsedToolCall> calls = s.TakeCalls();
    ASSERT_EQ(calls.size(), 2u) << size;
    EXPECT_EQ(calls[0].name, "get_weather");
    EXPECT_EQ(calls[0].arguments, R"({"city":"Zürich"})");
    EXPECT_EQ(calls[1].name, "get_time");
    EXPECT_EQ(calls[1].arguments, "{}");
    EXPECT_NE(calls[0].id, calls[1].id);
    EXPECT_TRUE(s.found_calls());
  }
}

// A model may stop (end of sentence) without closing the block, even without
// closing its last call; and a reply may hold several blocks.
TEST(ToolCallParserTest, DeepSeekOpenBlocksAreParsedAtTheEnd) {
  ToolCallScanner open(ToolCallFamily::kDeepSeekV3);
  EXPECT_EQ(Scan(open, {kBegin, DeepSeekCall("f", R"({"x": [1, 2]})")}), "");
  std::vector<ParsedToolCall> calls = open.TakeCalls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].arguments, R"({"x":[1,2]})");
  ToolCallScanner cut(ToolCallFamily::kDeepSeekV3);
  EXPECT_EQ(Scan(cut, {kBegin, "<｜tool▁call▁begin｜>function<｜tool▁sep｜>g\n```json\n{}\n```"}),
            "");
  ASSERT_EQ(cut.TakeCalls().size(), 1u);
  ToolCallScanner unfenced(ToolCallFamily::kDeepSeekV3);
  EXPECT_EQ(Scan(unfenced, {kBegin, "<｜tool▁call▁begin｜>function<｜tool▁sep｜>h\n{\"a\": 1}",
                            "<｜tool▁call▁end｜>", kEnd}),
            "");
  ASSERT_EQ(unfenced.TakeCalls().size(), 1u);
  ToolCallScanner two(ToolCallFamily::kDeepSeekV3);
  EXPECT_EQ(Scan(two, {"a", kBegin, DeepSeekCall("f", "{}"), kEnd, "b", kBegin,
                       DeepSeekCall("g", "{}"), kEnd}),
            "ab");
  EXPECT_EQ(two.TakeCalls().size(), 2u);
}

// A block any part of which does not parse is content, markers and all.
TEST(ToolCallParserTest, DeepSeekBlocksThatDoNotParseStayContent) {
  const std::string good = DeepSeekCall("f", "{}");
  for (const std::string& body : {
           DeepSeekCall("f", "{not json"),
           DeepSeekCall("f", "[1, 2]"),                   // not an object
           DeepSeekCall("two words", "{}"),               // not a name
           DeepSeekCall("", "{}"),                        // no name
           good + " and some text",                       // text between calls
           good + "\n" + DeepSeekCall("g", "{\"a\": }"),  // the second is bad
           std::string("<｜tool▁call▁begin｜>f\n```json\n{}\n```<｜tool▁call▁end｜>"),  // no sep
           std::string("<｜tool▁call▁begin｜>code<｜tool▁sep｜>f\n{}<｜tool▁call▁end｜>"),
           std::string("just text"),
           std::string(""),
       }) {
    for (const bool closed : {true, false}) {
      const std::string reply = "x " + std::string(kBegin) + body + (closed ? kEnd : "");
      ToolCallScanner s(ToolCallFamily::kDeepSeekV3);
      EXPECT_EQ(Scan(s, {reply}), reply);
      EXPECT_TRUE(s.TakeCalls().empty()) << reply;
      EXPECT_FALSE(s.found_calls()) << reply;
    }
  }
  // A partial marker at the end is held back while it may grow, then shown.
  ToolCallScanner partial(ToolCallFamily::kDeepSeekV3);
  EXPECT_EQ(partial.Push("ok <｜tool▁ca"), "ok ");
  EXPECT_EQ(partial.Push("t"), "<｜tool▁cat");
  EXPECT_EQ(partial.Finish(), "");
}

// What the output constraint makes the model write (tool_call_syntax.h, as
// output_constraint.cc builds it) is what the scanner takes as a call.
TEST(ToolCallParserTest, TheConstrainedFormOfEveryFamilyParsesAsOneCall) {
  for (ToolCallFamily family : {ToolCallFamily::kHermes, ToolCallFamily::kLlama3,
                                ToolCallFamily::kMistral, ToolCallFamily::kDeepSeekV3}) {
    const ToolCallSyntax* syntax = FindToolCallSyntax(family);
    ASSERT_NE(syntax, nullptr);
    const std::string written = std::string(syntax->call_open) + "get_weather" +
                                std::string(syntax->name_close) + "{\"city\": \"Oslo\"}" +
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
  EXPECT_EQ(FindToolCallSyntax("deepseek-v3"), FindToolCallSyntax(ToolCallFamily::kDeepSeekV3));
  EXPECT_EQ(ToolCallFamilyName(ToolCallFamily::kNone), "none");
}

}  // namespace
}  // namespace ringlm
