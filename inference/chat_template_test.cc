#include "inference/chat_template.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringlm {
namespace {

// The first messages of llama.cpp's tests/test-chat-template.cpp conversation,
// ending on a user turn so the generation prompt matters. Expected strings
// follow llama.cpp's llm_chat_apply_template (checked against the expected
// outputs of test-chat-template for the shared prefix).
std::vector<ChatMessage> Conversation() {
  return {{"system", "You are a helpful assistant"},
          {"user", "Hello"},
          {"assistant", "  Hi there  "},
          {"user", "Who are you"}};
}

std::string Render(ChatFormat format, bool add_generation_prompt = true) {
  absl::StatusOr<std::string> s = RenderChat(format, Conversation(), add_generation_prompt);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : "";
}

TEST(ChatTemplateTest, ChatML) {
  EXPECT_EQ(Render(ChatFormat::kChatML),
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\n  Hi there  <|im_end|>\n"
            "<|im_start|>user\nWho are you<|im_end|>\n"
            "<|im_start|>assistant\n");
  const std::string no_prompt = Render(ChatFormat::kChatML, false);
  const std::string tail = "<|im_start|>user\nWho are you<|im_end|>\n";
  ASSERT_GE(no_prompt.size(), tail.size());
  EXPECT_EQ(no_prompt.substr(no_prompt.size() - tail.size()), tail);
}

TEST(ChatTemplateTest, Llama2WithSystemBlock) {
  EXPECT_EQ(Render(ChatFormat::kLlama2),
            "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\n"
            "Hello [/INST]  Hi there  </s>[INST] Who are you [/INST]");
}

TEST(ChatTemplateTest, MistralFoldsSystemIntoFirstTurn) {
  // llama.cpp: "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>..."
  EXPECT_EQ(Render(ChatFormat::kMistral),
            "[INST] You are a helpful assistant\nHello [/INST]  Hi there  </s>"
            "[INST] Who are you [/INST]");
}

TEST(ChatTemplateTest, Llama3TrimsContentAndHasNoBosText) {
  const std::string s = Render(ChatFormat::kLlama3);
  EXPECT_EQ(s,
            "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(s.find("<|begin_of_text|>"), std::string::npos);
}

TEST(ChatTemplateTest, Zephyr) {
  EXPECT_EQ(Render(ChatFormat::kZephyr),
            "<|system|>\nYou are a helpful assistant<|endoftext|>\n"
            "<|user|>\nHello<|endoftext|>\n"
            "<|assistant|>\n  Hi there  <|endoftext|>\n"
            "<|user|>\nWho are you<|endoftext|>\n"
            "<|assistant|>\n");
}

TEST(ChatTemplateTest, PlainTranscript) {
  EXPECT_EQ(Render(ChatFormat::kPlain),
            "You are a helpful assistant\n\n"
            "User: Hello\n"
            "Assistant:  Hi there  \n"
            "User: Who are you\n"
            "Assistant:");
  std::vector<ChatMessage> m = {{"user", "Hi"}, {"assistant", "Hello."}};
  EXPECT_EQ(*RenderChat(ChatFormat::kPlain, m, false), "User: Hi\nAssistant: Hello.\n");
}

TEST(ChatTemplateTest, PlainAppendingATurnOnlyAppendsText) {
  std::vector<ChatMessage> turn = {{"system", "Be brief."}, {"user", "Tell a story"}};
  const std::string first = *RenderChat(ChatFormat::kPlain, turn, true);
  const std::string reply = " Once upon a time.";  // as the model continues "Assistant:"
  turn.push_back({"assistant", reply});
  turn.push_back({"user", "More"});
  const std::string second = *RenderChat(ChatFormat::kPlain, turn, true);
  EXPECT_EQ(second.rfind(first + reply, 0), 0u) << second;
}

TEST(ChatTemplateTest, RejectsUnknownRolesAndEmptyLists) {
  std::vector<ChatMessage> m = {{"user", "hi"}, {"tool", "x"}};
  for (ChatFormat f : {ChatFormat::kLlama2, ChatFormat::kLlama3, ChatFormat::kChatML,
                       ChatFormat::kMistral, ChatFormat::kZephyr, ChatFormat::kPlain}) {
    absl::StatusOr<std::string> s = RenderChat(f, m, true);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << FormatName(f);
    EXPECT_NE(std::string(s.status().message()).find("messages[1]"), std::string::npos);
    EXPECT_EQ(RenderChat(f, {}, true).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ChatTemplateTest, DetectsFormatsByMarkers) {
  // Abbreviated real templates.
  EXPECT_EQ(DetectChatFormat("{{ bos_token }}{% for message in messages %}"
                             "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>'"),
            ChatFormat::kLlama3);
  EXPECT_EQ(DetectChatFormat("{% for message in messages %}{{'<|im_start|>' + message['role']"),
            ChatFormat::kChatML);
  EXPECT_EQ(DetectChatFormat("{{ '[INST] <<SYS>>\\n' + system_message + '\\n<</SYS>>' }}"),
            ChatFormat::kLlama2);
  EXPECT_EQ(DetectChatFormat("{{ bos_token }}{% if message['role'] == 'user' %}"
                             "{{ '[INST] ' + message['content'] + ' [/INST]' }}"),
            ChatFormat::kMistral);
  EXPECT_EQ(DetectChatFormat("{% if message['role'] == 'user' %}{{ '<|user|>\\n' + "
                             "message['content'] + eos_token }}"),
            ChatFormat::kZephyr);
  EXPECT_EQ(DetectChatFormat(""), ChatFormat::kPlain);
  EXPECT_EQ(DetectChatFormat("{{ messages }}"), ChatFormat::kPlain);
  EXPECT_EQ(FormatName(ChatFormat::kChatML), "chatml");
  EXPECT_EQ(FormatName(ChatFormat::kPlain), "plain");
}

}  // namespace
}  // namespace ringlm
