// The chat template a server renders prompts with. A model's own Jinja
// template (tokenizer.chat_template) runs in ringlm's Jinja engine
// (inference/jinja), byte-identical to transformers' apply_chat_template, with
// tools and agent histories; when the engine cannot run it, or the model has
// none, one of the built-in formats (chat/chat_template.h) stands in.
#ifndef RINGLM_CHAT_CHAT_RENDERER_H_
#define RINGLM_CHAT_CHAT_RENDERER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/chat_template.h"
#include "chat/jinja/template.h"
#include "chat/template_shape.h"
#include "chat/tool_call_parser.h"
#include "chat/tool_definition.h"
#include "inference/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace ringlm {

// What --chat-template asked for: nothing (the model's template), a built-in
// format's name, or Jinja source (a file's contents).
struct ChatTemplateChoice {
  std::string builtin;  // "llama2", "llama3", "chatml", "mistral", "zephyr", "plain"
  std::string jinja;    // template source
};

// Immutable after Create; thread-safe (Render is const).
class ChatRenderer {
 public:
  // Picks, in order: `choice` (an unknown built-in name, or Jinja the engine
  // cannot parse, is an InvalidArgument error: the operator asked for it);
  // the model's template `gguf_template` parsed as Jinja; if that fails
  // (a construct the engine does not support), the built-in format
  // DetectChatFormat finds, with the reason in `warning()`; no template at
  // all: kPlain. The tokenizer gives bos_token and eos_token and must outlive
  // the renderer.
  static absl::StatusOr<ChatRenderer> Create(const std::string& gguf_template,
                                             const ChatTemplateChoice& choice,
                                             const Tokenizer& tokenizer);

  // The prompt for `messages` (and `tools`, when not empty), ending in the
  // opening of the assistant's turn. Template text is control; messages and
  // tools are content (see PromptSegment). Messages and calls are passed in
  // the shape the template wants (template_shape.h); when a template with a
  // tool-call family does not show `tools`, they are described (with how
  // the family writes a call) at the end of the first system message, or in
  // a system message of their own put first. A leading bos_token the template
  // writes is dropped when the tokenizer adds BOS itself, so a prompt never
  // starts with two. Errors: InvalidArgument for what the template refuses
  // (raise_exception's message), tools or tool messages on a built-in format,
  // or a render past the engine's limits.
  absl::StatusOr<std::vector<PromptSegment>> Render(const std::vector<ChatMessage>& messages,
                                                    const std::vector<ToolDefinition>& tools) const;

  // "jinja" or the built-in format's name, and where it came from.
  std::string Describe() const;
  // Set when the model's template could not be used: why.
  const std::string& warning() const { return warning_; }
  // How the model writes tool calls; kNone for the built-in formats.
  ToolCallFamily tool_family() const { return family_; }
  bool is_jinja() const { return jinja_.has_value(); }

 private:
  ChatRenderer(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}
  // The template's control variables: bos_token, eos_token, add_generation_prompt.
  nlohmann::ordered_json Trusted() const;

  const Tokenizer* tokenizer_;
  std::optional<jinja::Template> jinja_;
  ChatFormat format_ = ChatFormat::kPlain;  // when !jinja_
  std::string source_;                      // "model" or "--chat-template"
  std::string warning_;
  ToolCallFamily family_ = ToolCallFamily::kNone;
  TemplateShape shape_;  // probed when family_ is not kNone
  std::string bos_text_, eos_text_;
};

}  // namespace ringlm

#endif  // RINGLM_CHAT_CHAT_RENDERER_H_
