// Finding the tool calls in what a model writes. Each model family writes
// them its own way, as its chat template teaches it (the markers are
// defined once, in inference/sampling/tool_call_syntax.h):
//   kHermes  (Qwen 2.5/3, Hermes):  <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//   kLlama3  (Llama 3.1/3.2):       {"name": ..., "parameters": {...}}   as the whole reply
//                                   (after <|python_tag|>, a control token that decodes to "")
//   kMistral (Mistral Nemo):        [TOOL_CALLS][{"name": ..., "arguments": {...}}]   as the
//                                   whole reply ([TOOL_CALLS] is a control token, too)
//   kDeepSeekV3 (DeepSeek V3, R1), anywhere in the reply:
//     <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}
//     \n```<｜tool▁call▁end｜> (more calls, each after "\n") <｜tool▁calls▁end｜>
//     (the markers are control tokens, shown as text while calls are
//     scanned: ToolCallSyntax::shown_tokens)
// ToolCallScanner reads the reply as it streams and splits it into content
// (shown to the client as it comes, minus any tail that may still become a
// call) and calls (handed over whole, once their JSON is complete). Text that
// looks like a call but does not parse as one stays content: nothing the
// model wrote is lost.
#ifndef RINGLM_CHAT_TOOL_CALL_PARSER_H_
#define RINGLM_CHAT_TOOL_CALL_PARSER_H_

#include <string>
#include <string_view>
#include <vector>

#include "inference/sampling/tool_call_syntax.h"

namespace ringlm {

// The family a Jinja chat template writes tool calls in, by its markers:
// "<tool_call>" -> kHermes, "[TOOL_CALLS]" -> kMistral,
// "<｜tool▁calls▁begin｜>" -> kDeepSeekV3, "<|python_tag|>" or a Llama 3
// header template that mentions tools -> kLlama3; otherwise kNone (the
// template cannot take tools).
ToolCallFamily DetectToolCallFamily(std::string_view jinja_template);

struct ParsedToolCall {
  std::string id;  // "call_" + 24 hex digits from the CSPRNG
  std::string name;
  std::string arguments;  // a JSON object, compact (OpenAI sends it as a string)
};

// One per reply. Not thread-safe. Precondition: family != kNone.
class ToolCallScanner {
 public:
  explicit ToolCallScanner(ToolCallFamily family);

  // Feeds the next piece of the reply's text; returns the content that may
  // be shown now (often "").
  std::string Push(std::string_view text);
  // The reply ended: the rest of the content. Calls still open are parsed
  // now (a model may stop right after the JSON, before "</tool_call>").
  // A Hermes or DeepSeek block is taken whole: all its calls, or (when any
  // part of it does not parse) its text, markers and all, as content.
  std::string Finish();
  // The calls completed since the last TakeCalls, in order.
  std::vector<ParsedToolCall> TakeCalls();
  // Whether any call was found so far (the finish reason is then "tool_calls").
  bool found_calls() const { return found_; }

 private:
  enum class State { kUndecided, kText, kCall };
  // Parses `body` into calls_; false (and nothing added) when it is not one.
  bool ParseCalls(std::string_view body);
  // Hermes and DeepSeek V3: blocks between marker_open and marker_close.
  std::string PushBlocks();

  const ToolCallFamily family_;
  const ToolCallSyntax& syntax_;
  State state_;
  std::string pending_;  // text not yet shown or parsed
  std::vector<ParsedToolCall> calls_;
  bool found_ = false;
};

}  // namespace ringlm

#endif  // RINGLM_CHAT_TOOL_CALL_PARSER_H_
