#include "inference/sampling/tool_call_syntax.h"

namespace ringlm {
namespace {

constexpr std::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDeepSeekShown[] = {
    kDeepSeekCallsBegin, kDeepSeekCallBegin, kDeepSeekCallSep, kDeepSeekCallEnd, kDeepSeekCallsEnd};

constexpr ToolCallSyntax kSyntaxes[] = {
    // Qwen 2.5/3, Hermes: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
    {ToolCallFamily::kHermes,
     "hermes",
     "<tool_call>",
     "</tool_call>",
     "<tool_call>\n{\"name\": \"",
     "\", \"arguments\": ",
     "}\n</tool_call>",
     {}},
    // Llama 3.1/3.2: {"name": ..., "parameters": {...}} as the whole reply.
    {ToolCallFamily::kLlama3,
     "llama3-json",
     "<|python_tag|>",
     "",
     "{\"name\": \"",
     "\", \"parameters\": ",
     "}",
     {}},
    // Mistral Nemo: [TOOL_CALLS][{"name": ..., "arguments": {...}}] as the whole reply.
    {ToolCallFamily::kMistral,
     "mistral",
     "[TOOL_CALLS]",
     "",
     "[{\"name\": \"",
     "\", \"arguments\": ",
     "}]",
     {}},
    // DeepSeek V3 (and R1), as its template writes a call in history:
    // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```
    // <｜tool▁call▁end｜> (more calls after "\n") <｜tool▁calls▁end｜>
    {ToolCallFamily::kDeepSeekV3, "deepseek-v3", kDeepSeekCallsBegin, kDeepSeekCallsEnd,
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>", "\n```json\n",
     "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", kDeepSeekShown},
};

}  // namespace

const ToolCallSyntax* FindToolCallSyntax(ToolCallFamily family) {
  for (const ToolCallSyntax& s : kSyntaxes) {
    if (s.family == family) return &s;
  }
  return nullptr;
}

const ToolCallSyntax* FindToolCallSyntax(std::string_view name) {
  for (const ToolCallSyntax& s : kSyntaxes) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string_view ToolCallFamilyName(ToolCallFamily family) {
  const ToolCallSyntax* s = FindToolCallSyntax(family);
  return s != nullptr ? s->name : "none";
}

bool IsShownToolCallToken(std::string_view text) {
  for (const ToolCallSyntax& s : kSyntaxes) {
    for (std::string_view token : s.shown_tokens) {
      if (token == text) return true;
    }
  }
  return false;
}

}  // namespace ringlm
