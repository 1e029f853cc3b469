#include "inference/sampling/tool_call_syntax.h"

namespace ringlm {
namespace {

constexpr ToolCallSyntax kSyntaxes[] = {
    // Qwen 2.5/3, Hermes: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
    {ToolCallFamily::kHermes, "hermes", "<tool_call>", "</tool_call>", "<tool_call>\n{\"name\": \"",
     "arguments", "}\n</tool_call>"},
    // Llama 3.1/3.2: {"name": ..., "parameters": {...}} as the whole reply.
    {ToolCallFamily::kLlama3, "llama3-json", "<|python_tag|>", "", "{\"name\": \"", "parameters",
     "}"},
    // Mistral Nemo: [TOOL_CALLS][{"name": ..., "arguments": {...}}] as the whole reply.
    {ToolCallFamily::kMistral, "mistral", "[TOOL_CALLS]", "", "[{\"name\": \"", "arguments", "}]"},
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

}  // namespace ringlm
