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

// The messages as transformers passes them to a template: content a string,
// tool calls with their arguments as an object (as vLLM and llama.cpp give
// them, so that templates' `arguments | tojson` writes JSON, not a quoted
// string), unless the template's `shape` wants none and a string.
Json MessagesJson(const std::vector<ChatMessage>& messages, const TemplateShape& shape) {
  Json out = Json::array();
  for (const ChatMessage& m : messages) {
    Json message = {{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
      if (shape.null_content_with_calls && m.content.empty()) message["content"] = nullptr;
      Json calls = Json::array();
      for (const ChatToolCall& c : m.tool_calls) {
        calls.push_back(
            {{"id", c.id},
             {"type", "function"},
             {"function",
              {{"name", c.name},
               {"arguments", shape.string_arguments ? Json(c.arguments)
                                                    : Json::parse(c.arguments, nullptr, false)}}}});
      }
      message["tool_calls"] = std::move(calls);
    }
    if (m.role == "tool") message["tool_call_id"] = m.tool_call_id;
    out.push_back(std::move(message));
  }
  return out;
}

// For a template that does not show `tools`: the system text that tells
// the model of them, and of how its family writes a call (as llama.cpp's
// minja does for such templates). It is a message, so content: the client's
// tool definitions in it stay plain text, and so do the markers of the example.
std::string ToolsPreamble(const std::vector<ToolDefinition>& tools, ToolCallFamily family) {
  std::string out = "You can call these tools (functions) to answer the user's requests:\n";
  for (const Json& tool : ToolsJson(tools)) {
    out += tool.dump(-1, ' ', false, Json::error_handler_t::replace);
    out += "\n";
  }
  if (const ToolCallSyntax* syntax = FindToolCallSyntax(family)) {
    absl::StrAppend(&out, "\nTo call a tool, write:\n", std::string(syntax->call_open), "NAME",
                    std::string(syntax->name_close), "ARGUMENTS", std::string(syntax->call_close),
                    "\nwhere NAME is the function's name and ARGUMENTS a JSON object of its "
                    "parameters.");
  }
  return out;
}

// `messages` with the preamble as (the end of) the first system message.
void AddToolsPreamble(Json& messages, const std::string& preamble) {
  if (!messages.empty() && messages[0].value("role", "") == "system" &&
      messages[0]["content"].is_string()) {
    const std::string system = messages[0]["content"].get<std::string>();
    messages[0]["content"] = system.empty() ? preamble : system + "\n\n" + preamble;
    return;
  }
  messages.insert(messages.begin(), Json{{"role", "system"}, {"content", preamble}});
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
    if (r.family_ != ToolCallFamily::kNone) r.shape_ = ProbeTemplateShape(*r.jinja_, r.Trusted());
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
  Json messages_json = MessagesJson(messages, shape_);
  if (!tools.empty() && !shape_.renders_tools) {
    AddToolsPreamble(messages_json, ToolsPreamble(tools, family_));
  }
  // transformers always passes `tools` (None when there are none): templates
  // test `tools is not none`.
  const Json untrusted = {{"messages", std::move(messages_json)},
                          {"tools", tools.empty() ? Json(nullptr) : ToolsJson(tools)}};
  absl::StatusOr<jinja::Value> context = jinja::MakeContext(Trusted(), untrusted);
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

nlohmann::ordered_json ChatRenderer::Trusted() const {
  return {{"bos_token", bos_text_}, {"eos_token", eos_text_}, {"add_generation_prompt", true}};
}

std::string ChatRenderer::Describe() const {
  return absl::StrCat(
      jinja_ ? "jinja" : FormatName(format_), " (", source_,
      family_ != ToolCallFamily::kNone
          ? absl::StrCat("; tool calls: ", std::string(ToolCallFamilyName(family_)),
                         shape_.renders_tools ? "" : ", tools told in a system message")
          : "",
      ")");
}

}  // namespace ringlm
