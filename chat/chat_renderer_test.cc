#include "chat/chat_renderer.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "chat/npm_template_for_test.h"
#include "gtest/gtest.h"
#include "inference/tokenizer/llama2c_vocab_for_test.h"

namespace ringlm {
namespace {

class ChatRendererTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = testing::Tok512Tokenizer();
    ASSERT_NE(tokenizer_, nullptr);
  }
  static inline const Tokenizer* tokenizer_ = nullptr;
};

const std::vector<ChatMessage> kChat = {{"system", "Be kind."}, {"user", "Hi <s>"}};

TEST_F(ChatRendererTest, RunsTheModelsJinjaTemplateAndDropsItsBos) {
  // The tokenizer adds BOS (add_bos): the template's own bos_token goes.
  absl::StatusOr<ChatRenderer> r = ChatRenderer::Create(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
      "{% if add_generation_prompt %}[assistant]{% endif %}",
      {}, *tokenizer_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->is_jinja());
  EXPECT_TRUE(r->warning().empty());
  absl::StatusOr<std::vector<PromptSegment>> s = r->Render(kChat, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(JoinSegments(*s), "[system] Be kind.\n[user] Hi <s>\n[assistant]");
  // Content stays content: "<s>" typed by the user is not a control token.
  ASSERT_GE(s->size(), 4u);
  EXPECT_EQ((*s)[0].text, "[");
  EXPECT_TRUE((*s)[0].is_control);
  for (const PromptSegment& segment : *s) {
    if (segment.text.find("Be kind.") != std::string::npos ||
        segment.text.find("<s>") != std::string::npos) {
      EXPECT_FALSE(segment.is_control) << segment.text;
    }
  }
  const std::vector<int32_t> ids = tokenizer_->EncodeSegments(*s, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tokenizer_->bos_id()), 1);
}

TEST_F(ChatRendererTest, UnsupportedConstructsFallBackWithAWarning) {
  absl::StatusOr<ChatRenderer> r =
      ChatRenderer::Create("{% include 'x' %}<|im_start|>", {}, *tokenizer_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->is_jinja());
  EXPECT_NE(r->warning().find("include"), std::string::npos) << r->warning();
  EXPECT_NE(r->Describe().find("chatml"), std::string::npos) << r->Describe();
  // The built-in formats refuse tools, clearly.
  absl::StatusOr<std::vector<PromptSegment>> s =
      r->Render(kChat, {ToolDefinition{.name = "f", .description = "", .parameters = {}}});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("tools need the model's own chat template"),
            std::string::npos);
}

TEST_F(ChatRendererTest, ChatTemplateFlagChoosesAndRefusesWhatItCannotUse) {
  absl::StatusOr<ChatRenderer> builtin =
      ChatRenderer::Create("{{ x }}", ChatTemplateChoice{.builtin = "llama3"}, *tokenizer_);
  ASSERT_TRUE(builtin.ok());
  EXPECT_FALSE(builtin->is_jinja());
  EXPECT_NE(builtin->Describe().find("llama3"), std::string::npos);
  EXPECT_FALSE(ChatRenderer::Create("", ChatTemplateChoice{.builtin = "vicuna"}, *tokenizer_).ok());
  absl::StatusOr<ChatRenderer> bad =
      ChatRenderer::Create("", ChatTemplateChoice{.jinja = "{% macro %}"}, *tokenizer_);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<ChatRenderer> file = ChatRenderer::Create(
      "", ChatTemplateChoice{.jinja = "{{ messages[0].content | upper }}"}, *tokenizer_);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(JoinSegments(*file->Render(kChat, {})), "BE KIND.");
}

TEST_F(ChatRendererTest, TemplateErrorsAreTheClientsAndNamedSo) {
  absl::StatusOr<ChatRenderer> r = ChatRenderer::Create(
      "{% if messages[0].role != 'user' %}{{ raise_exception('Conversation roles must "
      "alternate') }}{% endif %}",
      {}, *tokenizer_);
  ASSERT_TRUE(r.ok());
  absl::StatusOr<std::vector<PromptSegment>> s = r->Render(kChat, {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Conversation roles must alternate"), std::string::npos);
}

// DeepSeek V3's template shows no `tools` and takes a call in history only as
// content none with its arguments a string: the renderer tells the model of
// the tools in a system message and passes calls as the template wants them.
TEST_F(ChatRendererTest, DeepSeekV3GetsItsToolsAndCallsInItsOwnShape) {
  NPM_TEMPLATE_OR_SKIP(deepseek, "deepseek_v3");
  absl::StatusOr<ChatRenderer> r = ChatRenderer::Create(deepseek, {}, *tokenizer_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tool_family(), ToolCallFamily::kDeepSeekV3);
  EXPECT_NE(r->Describe().find("tool calls: deepseek-v3, tools told in a system message"),
            std::string::npos)
      << r->Describe();
  const std::vector<ToolDefinition> tools = {
      {.name = "get_weather",
       .description = "Now.",
       .parameters = {{"type", "object"}},
       .raw = {{"type", "function"},
               {"function", {{"name", "get_weather"}, {"description", "Now."}}}}}};
  const std::string preamble =
      "You can call these tools (functions) to answer the user's requests:\n"
      R"({"type":"function","function":{"name":"get_weather","description":"Now."}})"
      "\n\nTo call a tool, write:\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
      "<｜tool▁sep｜>NAME\n```json\nARGUMENTS\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>\n"
      "where NAME is the function's name and ARGUMENTS a JSON object of its parameters.";
  // After the system message the client sent...
  absl::StatusOr<std::vector<PromptSegment>> s = r->Render(kChat, tools);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(JoinSegments(*s), "Be kind.\n\n" + preamble + "<｜User｜>Hi <s><｜Assistant｜>");
  for (const PromptSegment& segment : *s) {
    if (segment.text.find("get_weather") != std::string::npos) EXPECT_FALSE(segment.is_control);
  }
  // ... or as one of its own; without tools, none.
  s = r->Render({{"user", "Hi"}}, tools);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(JoinSegments(*s), preamble + "<｜User｜>Hi<｜Assistant｜>");
  s = r->Render({{"user", "Hi"}}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(JoinSegments(*s), "<｜User｜>Hi<｜Assistant｜>");
  // An agent's history: the call as the template writes it, then its result.
  const std::vector<ChatMessage> history = {
      {"user", "Weather?"},
      {.role = "assistant",
       .content = "",
       .tool_calls = {{.id = "call_1", .name = "get_weather", .arguments = R"({"city":"Paris"})"}}},
      {.role = "tool", .content = "18 C", .tool_call_id = "call_1"}};
  s = r->Render(history, tools);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(
      JoinSegments(*s),
      preamble +
          "<｜User｜>Weather?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
          "<｜tool▁sep｜>get_weather\n```json\n{\"city\":\"Paris\"}\n```<｜tool▁call▁end｜>"
          "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>18 C<｜tool▁output▁end｜>"
          "<｜tool▁outputs▁end｜>");
}

// Phi-3-mini's template (tests/templates/extra/phi3.jinja, compared with
// jinja2 by check_templates.py): its role markers and <|end|> are control
// tokens, and <|end|>, which closes every turn, ends generation (the
// tokenizer knows it by its text, as llama.cpp does).
TEST_F(ChatRendererTest, Phi3TurnsAreClosedByEndWhichEndsTheReply) {
  std::ifstream in(std::string(RINGLM_SOURCE_DIR) + "/tests/templates/extra/phi3.jinja");
  ASSERT_TRUE(in);
  const std::string phi3((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::unique_ptr<Tokenizer> tokenizer =
      testing::Tok512WithControlTokens({"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"});
  ASSERT_NE(tokenizer, nullptr);
  absl::StatusOr<ChatRenderer> r = ChatRenderer::Create(phi3, {}, *tokenizer);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->is_jinja());
  EXPECT_EQ(r->tool_family(), ToolCallFamily::kNone);
  const std::vector<ChatMessage> chat = {
      {"system", "Be kind."}, {"user", "Hi <|end|>"}, {"assistant", "Hello."}, {"user", "Bye"}};
  absl::StatusOr<std::vector<PromptSegment>> s = r->Render(chat, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(JoinSegments(*s),
            "<|system|>\nBe kind.<|end|>\n<|user|>\nHi <|end|><|end|>\n<|assistant|>\nHello.<|end|>"
            "\n<|user|>\nBye<|end|>\n<|assistant|>\n");
  const int32_t end = tokenizer->Encode("<|end|>", false, true).at(0);
  EXPECT_TRUE(tokenizer->IsEndOfGeneration(end));
  // Four turns, four <|end|> tokens: the one the user typed stays text.
  const std::vector<int32_t> ids = tokenizer->EncodeSegments(*s, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), end), 4);
  const int32_t assistant = tokenizer->Encode("<|assistant|>", false, true).at(0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), assistant), 2);
}

}  // namespace
}  // namespace ringlm
