// Chat templates: turning an OpenAI-style message list into the prompt text a
// model was trained on. Like llama.cpp's llm_chat_apply_template this is not a
// Jinja interpreter: the GGUF's `tokenizer.chat_template` is matched against a
// few well-known formats by distinctive markers, and each format is rendered by
// hand-written code that gives the same text llama.cpp does.
//
// BOS is never part of the rendered text: the tokenizer adds it (add_bos), as
// llama.cpp's server does, so a prompt never starts with two BOS tokens.
//
// The template's own markers ("<|im_start|>", "[INST]", "</s>", ...) and the
// messages' content are kept apart: RenderChatSegments marks each run as
// control (template text) or content, and Tokenizer::EncodeSegments turns
// special-token texts into control tokens only inside the markers. So a user
// who types "<|im_start|>system" gets those characters as plain text, not a
// forged turn. RenderChat gives the joined text (what llama.cpp renders);
// tokenizing that with parse_special = true is the old, forgeable behaviour.
#ifndef RINGLM_CHAT_CHAT_TEMPLATE_H_
#define RINGLM_CHAT_CHAT_TEMPLATE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {

enum class ChatFormat {
  kLlama2,   // "[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST]" (llama.cpp "llama2-sys")
  kLlama3,   // "<|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>"
  kChatML,   // "<|im_start|>role\n...<|im_end|>\n"
  kMistral,  // "[INST] ... [/INST]" without <<SYS>> (llama.cpp "llama2")
  kZephyr,   // "<|role|>\n...<|endoftext|>\n"
  kPlain,    // no template: a plain "User: / Assistant:" transcript
};

// A call the assistant made, as an agent's history carries it back.
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object, as compact JSON text
  bool operator==(const ChatToolCall&) const = default;
};

struct ChatMessage {
  // "system", "user", "assistant", or "tool" (a tool's result; only chat
  // templates with tool support render it, the built-in formats refuse it).
  std::string role;
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // assistant only; built-in formats refuse them
  std::string tool_call_id = {};              // tool only: the call this answers
};

// Picks the format of a Jinja chat template by its distinctive markers, checked
// in this order: "<|start_header_id|>" -> kLlama3, "<|im_start|>" -> kChatML,
// "[INST]" with "<<SYS>>" -> kLlama2, "[INST]" alone -> kMistral, "<|user|>" ->
// kZephyr. Anything else (including an empty template) is kPlain.
ChatFormat DetectChatFormat(std::string_view jinja_template);

// "llama2", "llama3", "chatml", "mistral", "zephyr" or "plain".
std::string FormatName(ChatFormat format);
// The format FormatName calls `name`; InvalidArgument listing the names.
absl::StatusOr<ChatFormat> ParseFormatName(std::string_view name);

// Renders `messages` in `format`. With `add_generation_prompt`, appends the
// opening of an assistant turn so the model continues with the reply (formats
// whose user turn already ends in the assistant's cue, llama2 and mistral,
// append nothing).
//
// kPlain renders
//   <system content>\n\n                (each system message)
//   User: <content>\n                   (each user message)
//   Assistant: <content>\n              (each assistant message)
//   Assistant:                          (the generation prompt)
// The assistant line is "Assistant:" + content when content starts with
// whitespace (as a model's reply to "Assistant:" usually does), else
// "Assistant: " + content. So the prompt of turn N+1 starts with the exact text
// of turn N's prompt, and with its reply too when the client sends the reply
// back verbatim: appending a turn only appends text, which keeps the token
// prefix cache effective.
//
// Errors: InvalidArgument for a role other than system/user/assistant or a
// message with tool calls (the message names the index; only a model's own
// template can render tools), or an empty message list.
absl::StatusOr<std::string> RenderChat(ChatFormat format, const std::vector<ChatMessage>& messages,
                                       bool add_generation_prompt);

// The same rendering as runs: template text with is_control = true, each
// message's content (trimmed where the format trims it) with is_control =
// false. Adjacent runs of one kind are merged and empty runs dropped, so the
// segments alternate; their texts joined equal RenderChat's result. Role
// names are part of the template text (they are checked against the three
// known roles first). Same errors as RenderChat.
absl::StatusOr<std::vector<PromptSegment>> RenderChatSegments(
    ChatFormat format, const std::vector<ChatMessage>& messages, bool add_generation_prompt);

// The segments' texts, concatenated.
std::string JoinSegments(const std::vector<PromptSegment>& segments);

}  // namespace ringlm

#endif  // RINGLM_CHAT_CHAT_TEMPLATE_H_
