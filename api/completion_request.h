// Parsing and validating the bodies of POST /v1/chat/completions and
// POST /v1/completions into one plain struct. No model state is touched here;
// the only model facts needed (the model id) are checked by the server.
#ifndef RINGLM_API_COMPLETION_REQUEST_H_
#define RINGLM_API_COMPLETION_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/json_limits.h"
#include "api/tool_request.h"
#include "chat/chat_template.h"
#include "inference/sampling/logprobs.h"
#include "inference/sampling/sampling_params.h"
#include "nlohmann/json.hpp"

namespace ringlm {

struct CompletionRequest {
  // kResponses: POST /v1/responses, a chat whose answer has that API's shape.
  enum class Kind { kChat, kText, kResponses };
  Kind kind = Kind::kChat;
  // Empty when the client sent none (the server then uses its only model).
  std::string model;
  std::vector<ChatMessage> messages;  // kChat: at least one
  std::string prompt;                 // kText, as text
  // kText, as token ids instead of text: used exactly as given (no BOS is
  // added); checked against the vocabulary once the model is known.
  std::vector<int32_t> prompt_ids;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // max_completion_tokens, else max_tokens; absent = the rest of the context.
  std::optional<int32_t> max_tokens;
  // OpenAI defaults (temperature 1, top_p 1, no penalties). The seed is random
  // when the client sent none.
  SamplingParams sampling;
  std::vector<std::string> stop;  // at most 4, none empty
  // Chat: logprobs + top_logprobs (0..20). Completions: logprobs N (0..5)
  // sets logprobs and top_logprobs = N.
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // kChat: functions the model may call, and whether it must.
  std::vector<ToolDefinition> tools;
  ToolChoice tool_choice;  // kNone when there are no tools
  bool parallel_tool_calls = true;
  // kChat: response_format. kResponses: text.format.
  ResponseFormat response_format;
  // kResponses: the request's metadata, echoed in the response (never stored).
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
};

inline constexpr int32_t kMaxTextLogprobs = 5;  // OpenAI's cap on /v1/completions

// Both parsers are pure functions of their input (thread-safe, no model
// state), meant to be fed untrusted bytes, and are the entry points of the
// request fuzz target (api/completion_request_fuzzer.cc). The JSON is parsed
// within `limits` (json_limits.h) before any field is looked at.
//
// Errors: InvalidArgument with the offending field as the error's param
// (see api_error.h) for malformed JSON, JSON past `limits`, a non-object
// body, a field of the wrong type or out of range, n != 1, max_tokens <= 0,
// more than 4 stop strings, and for any field the endpoint does not support
// (named as the error's param; a few "ask for nothing" values such as
// "tools": [] are let through). JSON null counts as absent.
//
// Chat: `messages` must be a non-empty array of {role, content}; roles
// system, developer (treated as system), user, assistant, tool; content a
// string, null (assistant only) or an array of {"type":"text","text":...}
// parts, joined by "\n". An assistant message may carry tool_calls, a tool
// message needs tool_call_id. tools, tool_choice, parallel_tool_calls and
// response_format are parsed as tool_request.h says.
absl::StatusOr<CompletionRequest> ParseChatCompletionRequest(std::string_view body,
                                                             const JsonLimits& limits = {});
// Completions: `prompt` is a string, an array holding one string, an array
// of token ids, or an array holding one array of token ids.
absl::StatusOr<CompletionRequest> ParseTextCompletionRequest(std::string_view body,
                                                             const JsonLimits& limits = {});
// Responses (the basic text subset): `input` is a string (one user message)
// or an array of message items ({"type":"message"} optional, a role, content
// as a string or input_text/output_text parts); `instructions` becomes a
// leading system message; max_output_tokens, temperature, top_p, stream,
// metadata (echoed), store (nothing is ever stored), truncation "disabled"
// and text.format "text" are accepted. Other fields (previous_response_id,
// tools, reasoning, ...) are refused by name.
absl::StatusOr<CompletionRequest> ParseResponsesRequest(std::string_view body,
                                                        const JsonLimits& limits = {});

}  // namespace ringlm

#endif  // RINGLM_API_COMPLETION_REQUEST_H_
