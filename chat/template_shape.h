// How a model's Jinja chat template wants the data the API gives it, found
// once, when the template is loaded, by rendering small probe conversations
// (as llama.cpp's minja probes a template's capabilities). Templates differ:
// Qwen's writes `arguments | tojson`, so it needs them as an object; DeepSeek
// V3's concatenates them as a string, shows an assistant turn's calls only
// when its content is none, and never shows the `tools` list at all.
#ifndef RINGLM_CHAT_TEMPLATE_SHAPE_H_
#define RINGLM_CHAT_TEMPLATE_SHAPE_H_

#include "chat/jinja/template.h"
#include "nlohmann/json.hpp"

namespace ringlm {

struct TemplateShape {
  // The template shows a `tools` list it is given (a probe tool's name
  // appears in the prompt). When it does not, the model learns of the tools
  // only if the renderer tells it (ChatRenderer adds a system message).
  bool renders_tools = true;
  // An assistant turn's tool calls appear only when its content is none, not
  // "" (DeepSeek V3 renders a turn with content as that text alone).
  bool null_content_with_calls = false;
  // Tool-call arguments must be a JSON string (the template concatenates
  // them); otherwise they are an object, so that `| tojson` writes JSON.
  bool string_arguments = false;
};

// Probes `t` with `trusted` as its control variables (bos_token, ...). The
// defaults stand for what a probe cannot tell (a template that refuses every
// probe, say): the shape ringlm passed before it probed. Pure; costs a few
// renders of tiny conversations.
TemplateShape ProbeTemplateShape(const jinja::Template& t, const nlohmann::ordered_json& trusted);

}  // namespace ringlm

#endif  // RINGLM_CHAT_TEMPLATE_SHAPE_H_
