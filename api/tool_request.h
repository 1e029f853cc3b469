// The parts of a chat request that ask for structure rather than text: tool
// definitions and the tool choice, the response format, and the tool calls
// and results that agent histories carry. Parsed and checked here, once, at
// the HTTP edge; what they mean for the prompt and the sampler is decided
// by the handler (the chat template renders tools, the grammar enforces).
//
// Everything here is ordered_json: the order of a schema's properties is the
// order a constrained reply writes them in, and templates render tools as
// the client wrote them.
#ifndef RINGLM_API_TOOL_REQUEST_H_
#define RINGLM_API_TOOL_REQUEST_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chat/chat_template.h"
#include "chat/tool_definition.h"
#include "nlohmann/json.hpp"

namespace ringlm {

struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kNamed };
  Mode mode = Mode::kAuto;
  std::string name;  // kNamed: one of the tools
};

struct ResponseFormat {
  enum class Type { kText, kJsonObject, kJsonSchema };
  Type type = Type::kText;
  nlohmann::ordered_json schema;  // kJsonSchema: json_schema.schema (an object)
};

// Hard bounds on what a request may define (each past them is a 400).
inline constexpr size_t kMaxTools = 128;
inline constexpr size_t kMaxToolCallsPerMessage = 64;

// "tools": an array of {"type":"function","function":{"name","description"?,
// "parameters"?,"strict"?}}. Errors name the field: InvalidArgument for a
// missing or malformed name, a duplicate name, parameters that are not an
// object, more than kMaxTools tools.
absl::StatusOr<std::vector<ToolDefinition>> ParseTools(const nlohmann::ordered_json& tools);

// "tool_choice": "none", "auto", "required", or
// {"type":"function","function":{"name"}} naming one of `tools`. Absent means
// auto (none when there are no tools). A choice other than none needs tools.
absl::StatusOr<ToolChoice> ParseToolChoice(const nlohmann::ordered_json* choice,
                                           const std::vector<ToolDefinition>& tools);

// "response_format": {"type":"text"}, {"type":"json_object"} or
// {"type":"json_schema","json_schema":{"name","schema"?,"strict"?,
// "description"?}}. Only the shape is checked here; whether the schema can be
// enforced is the grammar compiler's call. `param` prefixes error fields
// ("response_format" on chat, "text.format" on the Responses API).
absl::StatusOr<ResponseFormat> ParseResponseFormat(const nlohmann::ordered_json& format,
                                                   const std::string& param);

// An assistant message's "tool_calls": [{"id","type":"function",
// "function":{"name","arguments"}}]. `arguments` must be a string holding a
// JSON object (as OpenAI sends it) or an object; either way it is kept as
// compact JSON text. `param` names the message ("messages[3]").
absl::StatusOr<std::vector<ChatToolCall>> ParseToolCalls(const nlohmann::ordered_json& calls,
                                                         const std::string& param);

}  // namespace ringlm

#endif  // RINGLM_API_TOOL_REQUEST_H_
