#include "chat/tool_definition.h"

namespace ringlm {

nlohmann::ordered_json ToolsJson(const std::vector<ToolDefinition>& tools) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const ToolDefinition& t : tools) out.push_back(t.raw);
  return out;
}

}  // namespace ringlm
