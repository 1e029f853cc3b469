// A function the model may call, as a chat request defines it: the domain
// type that the API's request parser (api/tool_request.h) produces and the
// chat renderer, the reply splicer and the output constraint read.
#ifndef RINGLM_CHAT_TOOL_DEFINITION_H_
#define RINGLM_CHAT_TOOL_DEFINITION_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace ringlm {

// One function the model may call, as OpenAI defines it.
struct ToolDefinition {
  std::string name;  // [A-Za-z0-9_-]{1,64}
  std::string description;
  nlohmann::ordered_json parameters = nlohmann::ordered_json::object();  // a JSON schema
  // The tool object exactly as the client sent it (fields this server does
  // not read included), for the chat template.
  nlohmann::ordered_json raw = nlohmann::ordered_json::object();
};

// The tools as the client sent them, for the chat templates' `tools`
// variable (transformers passes the client's dicts unchanged, too).
nlohmann::ordered_json ToolsJson(const std::vector<ToolDefinition>& tools);

}  // namespace ringlm

#endif  // RINGLM_CHAT_TOOL_DEFINITION_H_
