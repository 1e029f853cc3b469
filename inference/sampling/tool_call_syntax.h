// How each model family writes a tool call: defined once, here, and read by
// both the output constraint that makes the model write a call
// (output_constraint.h, on the last stage) and the scanner that finds calls
// in the reply (chat/tool_call_parser.h, at the head).
#ifndef RINGLM_INFERENCE_SAMPLING_TOOL_CALL_SYNTAX_H_
#define RINGLM_INFERENCE_SAMPLING_TOOL_CALL_SYNTAX_H_

#include <span>
#include <string_view>

namespace ringlm {

enum class ToolCallFamily { kNone, kHermes, kLlama3, kMistral, kDeepSeekV3 };

// DeepSeek V3's markers inside a block of calls (the block itself is
// marker_open ... marker_close), each one control token of its vocabulary:
//   <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>
inline constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kDeepSeekCallSep = "<｜tool▁sep｜>";
inline constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";

// One family's syntax. A constrained call is written as
//   call_open NAME name_close ARGUMENTS call_close
// Hermes and DeepSeek V3 calls stand between marker_open and marker_close
// anywhere in the reply; Llama 3 and Mistral calls are the whole reply, after
// marker_open (a control token, which may decode to nothing), and
// marker_close is empty.
struct ToolCallSyntax {
  ToolCallFamily family;
  std::string_view name;  // in output-constraint specs and logs
  std::string_view marker_open;
  std::string_view marker_close;
  std::string_view call_open;
  std::string_view name_close;  // between the name and the arguments
  std::string_view call_close;
  // Control tokens whose text the scanner must see (llama.cpp's "preserved
  // tokens"): the reply's decoder shows them as text while this family's
  // calls are scanned, and constrained sampling may write them where the
  // grammar wants their text. Empty for families whose scanner does without.
  std::span<const std::string_view> shown_tokens;
};

// The syntax of `family`; nullptr for kNone.
const ToolCallSyntax* FindToolCallSyntax(ToolCallFamily family);
// The syntax named `name` ("hermes", "llama3-json", "mistral",
// "deepseek-v3"); nullptr for any other name.
const ToolCallSyntax* FindToolCallSyntax(std::string_view name);
// The family's name; "none" for kNone.
std::string_view ToolCallFamilyName(ToolCallFamily family);
// Whether `text` is one of the shown_tokens of any family.
bool IsShownToolCallToken(std::string_view text);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_SAMPLING_TOOL_CALL_SYNTAX_H_
