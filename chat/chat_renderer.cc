#include "chat/chat_renderer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ringlm {
namespace {

using Json = nlohmann::ordered_json;

// A control token's own text ("<|begin_of_text|>"), "" when there is none.
std::string SpecialText(const Tokenizer& tokenizer, int32_t id) {
  if (!tokenizer.IsValid(id)) return "";
  return tokenizer.vocabulary().pieces[static_cast<size_t>(id)];
}

// The messages as transformers passes them to a template: content always a
// string, tool calls with their arguments as an object (as vLLM and llama.cpp
// give them, so that templates' `arguments | tojson` writes JSON, not a
// quoted string).
Json MessagesJson(const std::vector<ChatMessage>& messages) {
  Json out = Json::array();
  for (const ChatMessage& m : messages) {
    Json message = {{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ChatToolCall& c : m.tool_calls) {
        calls.push_back(
            {{"id", c.id},
             {"type", "function"},
             {"function",
              {{"name", c.name}, {"arguments", Json::parse(c.arguments, nullptr, false)}}}});
      }
      message["tool_calls"] = std::move(calls);
    }
    if (m.role == "tool") message["tool_call_id"] = m.tool_call_id;
    out.push_back(std::move(message));
  }
  return out;
}

}  // namespace

absl::StatusOr<ChatRenderer> ChatRenderer::Create(const std::string& gguf_template,
                                                  const ChatTemplateChoice& choice,
                                                  const Tokenizer& tokenizer) {
  ChatRenderer r(tokenizer);
  r.bos_text_ = SpecialText(tokenizer, tokenizer.bos_id());
  r.eos_text_ = SpecialText(tokenizer, tokenizer.eos_id());
  if (!choice.builtin.empty()) {
    absl::StatusOr<ChatFormat> format = ParseFormatName(choice.builtin);
    if (!format.ok()) return format.status();
    r.format_ = *format;
    r.source_ = "--chat-template";
    return r;
  }
  const bool overridden = !choice.jinja.empty();
  const std::string& source = overridden ? choice.jinja : gguf_template;
  r.source_ = overridden ? "--chat-template" : "the model's tokenizer.chat_template";
  if (source.empty()) {
    r.format_ = ChatFormat::kPlain;
    r.source_ = "no template in the model";
    return r;
  }
  absl::StatusOr<jinja::Template> parsed = jinja::Template::Parse(source);
  if (parsed.ok()) {
    r.jinja_ = *std::move(parsed);
    r.family_ = DetectToolCallFamily(source);
    return r;
  }
  if (overridden) {
    return absl::InvalidArgumentError(absl::StrCat("--chat-template: ", parsed.status().message()));
  }
  r.format_ = DetectChatFormat(source);
  r.warning_ =
      absl::StrCat("the model's chat template cannot run here (", parsed.status().message(),
                   "); using the built-in ", FormatName(r.format_), " format instead");
  r.source_ = "built-in fallback";
  return r;
}

absl::StatusOr<std::vector<PromptSegment>> ChatRenderer::Render(
    const std::vector<ChatMessage>& messages, const std::vector<ToolDefinition>& tools) const {
  if (!jinja_) {
    if (!tools.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tools need the model's own chat template; this server renders the built-in ",
          FormatName(format_), " format"));
    }
    return RenderChatSegments(format_, messages, /*add_generation_prompt=*/true);
  }
  // transformers always passes `tools` (None when there are none): templates
  // test `tools is not none`.
  const Json untrusted = {{"messages", MessagesJson(messages)},
                          {"tools", tools.empty() ? Json(nullptr) : ToolsJson(tools)}};
  const Json trusted = {
      {"bos_token", bos_text_}, {"eos_token", eos_text_}, {"add_generation_prompt", true}};
  absl::StatusOr<jinja::Value> context = jinja::MakeContext(trusted, untrusted);
  if (!context.ok()) return context.status();
  absl::StatusOr<std::vector<jinja::Segment>> rendered = jinja_->Render(*context);
  if (!rendered.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the chat template refused the messages: ", rendered.status().message()));
  }
  std::vector<PromptSegment> out;
  out.reserve(rendered->size());
  for (jinja::Segment& s : *rendered) out.push_back({std::move(s.text), s.is_control});
  // The tokenizer adds BOS itself (add_bos): drop the template's copy.
  if (tokenizer_->vocabulary().add_bos && !bos_text_.empty() && !out.empty() &&
      out.front().is_control && out.front().text.rfind(bos_text_, 0) == 0) {
    out.front().text.erase(0, bos_text_.size());
    if (out.front().text.empty()) out.erase(out.begin());
  }
  if (out.empty()) return absl::InvalidArgumentError("the chat template rendered nothing");
  return out;
}

std::string ChatRenderer::Describe() const {
  return absl::StrCat(jinja_ ? "jinja" : FormatName(format_), " (", source_,
                      family_ != ToolCallFamily::kNone
                          ? absl::StrCat("; tool calls: ", std::string(ToolCallFamilyName(family_)))
                          : "",
                      ")");
}

}  // namespace ringlm
