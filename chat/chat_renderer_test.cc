#include "chat/chat_renderer.h"

#include <memory>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace ringlm
