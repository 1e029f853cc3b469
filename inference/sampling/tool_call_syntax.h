// How each model family writes a tool call: defined once, here, and read by
// both the output constraint that makes the model write a call
// (output_constraint.h, on the last stage) and the scanner that finds calls
// in the reply (chat/tool_call_parser.h, at the head).
#ifndef RINGLM_INFERENCE_SAMPLING_TOOL_CALL_SYNTAX_H_
#define RINGLM_INFERENCE_SAMPLING_TOOL_CALL_SYNTAX_H_

#include <string_view>

namespace ringlm {

enum class ToolCallFamily { kNone, kHermes, kLlama3, kMistral };

// One family's syntax. A constrained call is written as
//   call_open NAME "\", \"" args_key "\": " ARGUMENTS call_close
// Hermes calls stand between marker_open and marker_close anywhere in the
// reply; Llama 3 and Mistral calls are the whole reply, after marker_open (a
// control token, which may decode to nothing), and marker_close is empty.
struct ToolCallSyntax {
  ToolCallFamily family;
  std::string_view name;  // in output-constraint specs and logs
  std::string_view marker_open;
  std::string_view marker_close;
  std::string_view call_open;
  std::string_view args_key;
  std::string_view call_close;
};

// The syntax of `family`; nullptr for kNone.
const ToolCallSyntax* FindToolCallSyntax(ToolCallFamily family);
// The syntax named `name` ("hermes", "llama3-json", "mistral"); nullptr for
// any other name.
const ToolCallSyntax* FindToolCallSyntax(std::string_view name);
// The family's name; "none" for kNone.
std::string_view ToolCallFamilyName(ToolCallFamily family);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_SAMPLING_TOOL_CALL_SYNTAX_H_
