#include "api/tool_request.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "api/api_error.h"
#include "api/json_limits.h"

namespace ringlm {
namespace {

using Json = nlohmann::ordered_json;

bool IsFunctionName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<std::string> FunctionName(const Json& function, const std::string& param) {
  const Json* name = JsonField(function, "name");
  if (name == nullptr || !name->is_string() || !IsFunctionName(name->get<std::string>())) {
    return InvalidFieldError(param + ".name",
                             "a function name must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-'");
  }
  return name->get<std::string>();
}

// {"type":"function","function":{...}}: the inner object.
absl::StatusOr<const Json*> FunctionOf(const Json& item, const std::string& param) {
  if (!item.is_object()) return InvalidFieldError(param, "must be an object");
  const Json* type = JsonField(item, "type");
  if (type == nullptr || *type != "function") {
    return InvalidFieldError(param + ".type", "only 'function' is supported");
  }
  const Json* function = JsonField(item, "function");
  if (function == nullptr || !function->is_object()) {
    return InvalidFieldError(param + ".function", "'function' must be an object");
  }
  return function;
}

}  // namespace

absl::StatusOr<std::vector<ToolDefinition>> ParseTools(const Json& tools) {
  if (!tools.is_array()) return InvalidFieldError("tools", "'tools' must be an array");
  if (tools.size() > kMaxTools) {
    return InvalidFieldError("tools", absl::StrCat("at most ", kMaxTools, " tools"));
  }
  std::vector<ToolDefinition> out;
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string param = absl::StrCat("tools[", i, "]");
    absl::StatusOr<const Json*> function = FunctionOf(tools[i], param);
    if (!function.ok()) return function.status();
    ToolDefinition tool;
    absl::StatusOr<std::string> name = FunctionName(**function, param + ".function");
    if (!name.ok()) return name.status();
    tool.name = *std::move(name);
    if (!names.insert(tool.name).second) {
      return InvalidFieldError(param + ".function.name",
                               absl::StrCat("the function name '", tool.name, "' is used twice"));
    }
    if (const Json* d = JsonField(**function, "description")) {
      if (!d->is_string()) {
        return InvalidFieldError(param + ".function.description", "must be a string");
      }
      tool.description = d->get<std::string>();
    }
    if (const Json* p = JsonField(**function, "parameters")) {
      if (!p->is_object()) {
        return InvalidFieldError(param + ".function.parameters", "must be a JSON schema object");
      }
      tool.parameters = *p;
    }
    if (const Json* strict = JsonField(**function, "strict"); strict && !strict->is_boolean()) {
      return InvalidFieldError(param + ".function.strict", "must be a boolean");
    }
    tool.raw = tools[i];
    out.push_back(std::move(tool));
  }
  return out;
}

absl::StatusOr<ToolChoice> ParseToolChoice(const Json* choice,
                                           const std::vector<ToolDefinition>& tools) {
  ToolChoice out;
  if (choice == nullptr) {
    out.mode = tools.empty() ? ToolChoice::Mode::kNone : ToolChoice::Mode::kAuto;
    return out;
  }
  if (choice->is_string()) {
    const std::string mode = choice->get<std::string>();
    if (mode == "none") {
      out.mode = ToolChoice::Mode::kNone;
      return out;
    }
    if (mode == "auto") {
      out.mode = ToolChoice::Mode::kAuto;
    } else if (mode == "required") {
      out.mode = ToolChoice::Mode::kRequired;
    } else {
      return InvalidFieldError("tool_choice",
                               "'tool_choice' must be none, auto, required or a function");
    }
  } else {
    absl::StatusOr<const Json*> function = FunctionOf(*choice, "tool_choice");
    if (!function.ok()) return function.status();
    absl::StatusOr<std::string> name = FunctionName(**function, "tool_choice.function");
    if (!name.ok()) return name.status();
    out.mode = ToolChoice::Mode::kNamed;
    out.name = *std::move(name);
    bool found = false;
    for (const ToolDefinition& t : tools) found |= t.name == out.name;
    if (!found) {
      return InvalidFieldError("tool_choice.function.name",
                               absl::StrCat("no tool is named '", out.name, "'"));
    }
  }
  if (tools.empty()) {
    return InvalidFieldError("tool_choice", "a tool_choice other than 'none' needs 'tools'");
  }
  return out;
}

absl::StatusOr<ResponseFormat> ParseResponseFormat(const Json& format, const std::string& param) {
  const Json* type = format.is_object() ? JsonField(format, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return InvalidFieldError(param, "must be an object with a 'type'");
  }
  ResponseFormat out;
  const std::string name = type->get<std::string>();
  if (name == "text") return out;
  if (name == "json_object") {
    out.type = ResponseFormat::Type::kJsonObject;
    return out;
  }
  if (name != "json_schema") {
    return InvalidFieldError(param + ".type", absl::StrCat("unsupported type '", name,
                                                           "' (use text, json_object or "
                                                           "json_schema)"));
  }
  out.type = ResponseFormat::Type::kJsonSchema;
  // Chat nests the schema in "json_schema"; the Responses API flattens it.
  const Json* holder = JsonField(format, "json_schema");
  const std::string holder_param = holder != nullptr ? param + ".json_schema" : param;
  if (holder == nullptr) holder = &format;
  if (!holder->is_object()) return InvalidFieldError(holder_param, "must be an object");
  const Json* schema_name = JsonField(*holder, "name");
  if (schema_name == nullptr || !schema_name->is_string() ||
      !IsFunctionName(schema_name->get<std::string>())) {
    return InvalidFieldError(holder_param + ".name",
                             "a schema name must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-'");
  }
  const Json* schema = JsonField(*holder, "schema");
  if (schema != nullptr && !schema->is_object()) {
    return InvalidFieldError(holder_param + ".schema", "must be a JSON schema object");
  }
  out.schema = schema != nullptr ? *schema : Json::object();
  if (const Json* strict = JsonField(*holder, "strict"); strict && !strict->is_boolean()) {
    return InvalidFieldError(holder_param + ".strict", "must be a boolean");
  }
  return out;
}

absl::StatusOr<std::vector<ChatToolCall>> ParseToolCalls(const Json& calls,
                                                         const std::string& param) {
  const std::string calls_param = param + ".tool_calls";
  if (!calls.is_array()) return InvalidFieldError(calls_param, "'tool_calls' must be an array");
  if (calls.size() > kMaxToolCallsPerMessage) {
    return InvalidFieldError(calls_param,
                             absl::StrCat("at most ", kMaxToolCallsPerMessage, " tool calls"));
  }
  std::vector<ChatToolCall> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string p = absl::StrCat(calls_param, "[", i, "]");
    absl::StatusOr<const Json*> function = FunctionOf(calls[i], p);
    if (!function.ok()) return function.status();
    ChatToolCall call;
    if (const Json* id = JsonField(calls[i], "id")) {
      if (!id->is_string()) return InvalidFieldError(p + ".id", "must be a string");
      call.id = id->get<std::string>();
    }
    absl::StatusOr<std::string> name = FunctionName(**function, p + ".function");
    if (!name.ok()) return name.status();
    call.name = *std::move(name);
    const Json* arguments = JsonField(**function, "arguments");
    Json parsed = Json::object();
    if (arguments != nullptr && arguments->is_string()) {
      parsed = Json::parse(arguments->get<std::string>(), nullptr, /*allow_exceptions=*/false);
    } else if (arguments != nullptr) {
      parsed = *arguments;
    }
    if (!parsed.is_object()) {
      return InvalidFieldError(p + ".function.arguments",
                               "'arguments' must be a JSON object (or a string holding one)");
    }
    call.arguments = parsed.dump(-1, ' ', false, Json::error_handler_t::replace);
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace ringlm
