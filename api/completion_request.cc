#include "api/completion_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "api/api_error.h"
#include "api/json_limits.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace ringlm {
namespace {

using Json = nlohmann::ordered_json;

const Json* Field(const Json& body, const char* name) { return JsonField(body, name); }

// Field, for moving a value out of it: a prompt may be megabytes, and a copy
// would hold it twice while the body and the parsed JSON are still alive.
Json* MutableField(Json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

// The string `v` holds, moved out of it (`v` is left an empty string).
std::string TakeString(Json& v) { return std::move(v.get_ref<std::string&>()); }

absl::StatusOr<double> NumberIn(const Json& body, const char* name, double lo, double hi,
                                double fallback) {
  const Json* v = Field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number()) {
    return InvalidFieldError(name, absl::StrCat("'", name, "' must be a number"));
  }
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) {  // also rejects NaN
    return InvalidFieldError(name, absl::StrCat("'", name, "' must be in [", lo, ", ", hi, "]"));
  }
  return d;
}

absl::StatusOr<bool> Bool(const Json& body, const char* name, bool fallback = false) {
  const Json* v = Field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) {
    return InvalidFieldError(name, absl::StrCat("'", name, "' must be a boolean"));
  }
  return v->get<bool>();
}

// The fields shared by both endpoints.
absl::Status ParseCommon(const Json& body, CompletionRequest& out) {
  if (const Json* model = Field(body, "model")) {
    if (!model->is_string()) return InvalidFieldError("model", "'model' must be a string");
    out.model = model->get<std::string>();
  }
  RINGLM_ASSIGN_OR_RETURN(out.stream, Bool(body, "stream"));
  if (const Json* options = Field(body, "stream_options")) {
    if (!options->is_object()) {
      return InvalidFieldError("stream_options", "'stream_options' must be an object");
    }
    if (const Json* usage = Field(*options, "include_usage")) {
      if (!usage->is_boolean()) {
        return InvalidFieldError("stream_options.include_usage",
                                 "'stream_options.include_usage' must be a boolean");
      }
      out.include_usage = usage->get<bool>();
    }
  }
  if (const Json* n = Field(body, "n")) {
    if (!n->is_number_integer() || n->get<int64_t>() != 1) {
      return InvalidFieldError("n", "only n = 1 is supported");
    }
  }
  // max_output_tokens is the Responses API's name; each endpoint admits its own.
  for (const char* name : {"max_tokens", "max_completion_tokens", "max_output_tokens"}) {
    const Json* v = Field(body, name);
    if (v == nullptr) continue;
    if (!v->is_number_integer()) {
      return InvalidFieldError(name, absl::StrCat("'", name, "' must be an integer"));
    }
    const int64_t value = v->get<int64_t>();
    if (value <= 0 || value > INT32_MAX) {
      return InvalidFieldError(name, absl::StrCat("'", name, "' must be at least 1"));
    }
    out.max_tokens = static_cast<int32_t>(value);  // max_completion_tokens, checked last, wins
  }
  SamplingParams& s = out.sampling;
  // OpenAI's range; the engine takes more (the CLI's --temp), clients never need it.
  RINGLM_ASSIGN_OR_RETURN(double temperature, NumberIn(body, "temperature", 0, 2, 1));
  RINGLM_ASSIGN_OR_RETURN(double top_p, NumberIn(body, "top_p", 0, 1, 1));
  if (top_p <= 0) return InvalidFieldError("top_p", "'top_p' must be in (0, 1]");
  RINGLM_ASSIGN_OR_RETURN(double min_p, NumberIn(body, "min_p", 0, 1, 0));
  RINGLM_ASSIGN_OR_RETURN(double top_k, NumberIn(body, "top_k", 0, 1e9, 0));
  constexpr double kPenalty = SamplingParams::kMaxAbsPenalty;
  RINGLM_ASSIGN_OR_RETURN(double presence,
                          NumberIn(body, "presence_penalty", -kPenalty, kPenalty, 0));
  RINGLM_ASSIGN_OR_RETURN(double frequency,
                          NumberIn(body, "frequency_penalty", -kPenalty, kPenalty, 0));
  s.temperature = static_cast<float>(temperature);
  s.top_p = static_cast<float>(top_p);
  s.min_p = static_cast<float>(min_p);
  s.top_k = static_cast<int32_t>(top_k);
  s.presence_penalty = static_cast<float>(presence);
  s.frequency_penalty = static_cast<float>(frequency);
  if (const Json* seed = Field(body, "seed")) {
    if (!seed->is_number_integer()) return InvalidFieldError("seed", "'seed' must be an integer");
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                        : static_cast<uint64_t>(seed->get<int64_t>());
  } else {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    s.seed = rng();
  }
  if (absl::Status valid = s.Validate(); !valid.ok()) {
    return InvalidFieldError("", std::string(valid.message()));
  }
  if (const Json* stop = Field(body, "stop")) {
    std::vector<std::string> stops;
    if (stop->is_string()) {
      stops.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const Json& item : *stop) {
        if (!item.is_string()) {
          return InvalidFieldError("stop", "'stop' must be a string or an array of strings");
        }
        stops.push_back(item.get<std::string>());
      }
    } else {
      return InvalidFieldError("stop", "'stop' must be a string or an array of strings");
    }
    if (stops.size() > 4) return InvalidFieldError("stop", "at most 4 stop sequences");
    for (std::string& text : stops) {
      if (!text.empty()) out.stop.push_back(std::move(text));
    }
  }
  return absl::OkStatus();
}

// Every top-level field a request may carry: the one it names (messages or
// prompt) and these. Anything else, OpenAI's tools, response_format or
// logprobs included, is refused by name, so that no client believes it got
// what it asked for.
constexpr std::string_view kCommonFields[] = {"model",
                                              "stream",
                                              "stream_options",
                                              "max_tokens",
                                              "max_completion_tokens",
                                              "temperature",
                                              "top_p",
                                              "top_k",
                                              "min_p",
                                              "presence_penalty",
                                              "frequency_penalty",
                                              "seed",
                                              "stop",
                                              "n",
                                              "user"};

// True for the values of unimplemented fields that ask for nothing, as
// clients send them by default: an empty logit_bias.
bool AsksNothing(const std::string& name, const Json& value) {
  if (name == "logit_bias") return value.empty();
  return false;
}

// `own_fields`: what this endpoint adds to kCommonFields.
absl::Status CheckFieldsKnown(const Json& body,
                              std::initializer_list<std::string_view> own_fields) {
  for (const auto& [name, value] : body.items()) {
    if (std::find(own_fields.begin(), own_fields.end(), name) != own_fields.end()) continue;
    bool known = AsksNothing(name, value);
    for (std::string_view field : kCommonFields) known |= name == field;
    if (!known) {
      return InvalidFieldError(name, absl::StrCat("'", name, "' is not supported by this server"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Json> ParseObject(std::string_view body, const JsonLimits& limits) {
  RINGLM_ASSIGN_OR_RETURN(Json json, ParseOrderedJsonWithLimits(body, limits));
  if (!json.is_object()) return InvalidFieldError("", "the request body must be a JSON object");
  return json;
}

// `part_types`: the content-part types that carry text ("text" on chat;
// "input_text" and "output_text" on the Responses API).
// A string content is moved out of `message`.
absl::StatusOr<std::string> MessageContent(Json& message, const std::string& param,
                                           const std::string& role,
                                           std::initializer_list<std::string_view> part_types) {
  Json* content = MutableField(message, "content");
  if (content == nullptr) {
    if (role == "assistant") return std::string();
    return InvalidFieldError(param + ".content", "'content' is required");
  }
  if (content->is_string()) return TakeString(*content);
  if (!content->is_array()) {
    return InvalidFieldError(param + ".content", "'content' must be a string or an array of parts");
  }
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string part_param = absl::StrCat(param, ".content[", i, "]");
    if (!part.is_object()) return InvalidFieldError(part_param, "a content part must be an object");
    const Json* type = Field(part, "type");
    const Json* part_text = Field(part, "text");
    if (type == nullptr || !type->is_string() ||
        std::find(part_types.begin(), part_types.end(), type->get<std::string>()) ==
            part_types.end()) {
      return InvalidFieldError(part_param + ".type",
                               absl::StrCat("only '", std::string(*part_types.begin()),
                                            "' content parts are supported"));
    }
    if (part_text == nullptr || !part_text->is_string()) {
      return InvalidFieldError(part_param + ".text", "'text' must be a string");
    }
    // Parts are separate pieces of text: joined by a newline, as llama.cpp
    // does, so "What is" + "the best book" do not run together.
    if (i > 0) text += '\n';
    text += part_text->get<std::string>();
  }
  return text;
}

// The roles a message may have; "developer" means "system". "tool" only
// where `allow_tool` (chat).
absl::StatusOr<std::string> MessageRole(const Json& m, const std::string& param, bool allow_tool) {
  const Json* role = Field(m, "role");
  if (role == nullptr || !role->is_string()) {
    return InvalidFieldError(param + ".role", "'role' must be a string");
  }
  std::string role_name = role->get<std::string>();
  if (role_name == "developer") role_name = "system";
  if (role_name != "system" && role_name != "user" && role_name != "assistant" &&
      !(allow_tool && role_name == "tool")) {
    return InvalidFieldError(
        param + ".role", absl::StrCat("unsupported role '", role_name, "' (use system, developer, ",
                                      "user, assistant", allow_tool ? " or tool)" : " or user)"));
  }
  return role_name;
}

// Chat: "logprobs": bool, "top_logprobs": 0..20 (only with logprobs).
absl::Status ParseChatLogprobs(const Json& body, CompletionRequest& out) {
  if (const Json* logprobs = Field(body, "logprobs")) {
    if (!logprobs->is_boolean()) {
      return InvalidFieldError("logprobs", "'logprobs' must be a boolean");
    }
    out.logprobs = logprobs->get<bool>();
  }
  if (const Json* top = Field(body, "top_logprobs")) {
    if (!top->is_number_integer() || top->get<int64_t>() < 0 ||
        top->get<int64_t>() > kMaxTopLogprobs) {
      return InvalidFieldError("top_logprobs", absl::StrCat("'top_logprobs' must be an integer "
                                                            "from 0 to ",
                                                            kMaxTopLogprobs));
    }
    out.top_logprobs = static_cast<int32_t>(top->get<int64_t>());
    if (out.top_logprobs > 0 && !out.logprobs) {
      return InvalidFieldError("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    }
  }
  return absl::OkStatus();
}

// Completions: "logprobs": 0..5, the number of alternatives per token.
absl::Status ParseTextLogprobs(const Json& body, CompletionRequest& out) {
  const Json* logprobs = Field(body, "logprobs");
  if (logprobs == nullptr) return absl::OkStatus();
  if (!logprobs->is_number_integer() || logprobs->get<int64_t>() < 0 ||
      logprobs->get<int64_t>() > kMaxTextLogprobs) {
    return InvalidFieldError(
        "logprobs", absl::StrCat("'logprobs' must be an integer from 0 to ", kMaxTextLogprobs));
  }
  out.logprobs = true;
  out.top_logprobs = static_cast<int32_t>(logprobs->get<int64_t>());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CompletionRequest> ParseChatCompletionRequest(std::string_view body,
                                                             const JsonLimits& limits) {
  RINGLM_ASSIGN_OR_RETURN(Json json, ParseObject(body, limits));
  RINGLM_RETURN_IF_ERROR(
      CheckFieldsKnown(json, {"messages", "logprobs", "top_logprobs", "tools", "tool_choice",
                              "parallel_tool_calls", "response_format"}));
  CompletionRequest out;
  out.kind = CompletionRequest::Kind::kChat;
  Json* messages = MutableField(json, "messages");
  if (messages == nullptr) return InvalidFieldError("messages", "'messages' is required");
  if (!messages->is_array()) return InvalidFieldError("messages", "'messages' must be an array");
  if (messages->empty()) return InvalidFieldError("messages", "'messages' must not be empty");
  for (size_t i = 0; i < messages->size(); ++i) {
    Json& m = (*messages)[i];
    const std::string param = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return InvalidFieldError(param, "a message must be an object");
    RINGLM_ASSIGN_OR_RETURN(std::string role_name, MessageRole(m, param, /*allow_tool=*/true));
    RINGLM_ASSIGN_OR_RETURN(std::string content, MessageContent(m, param, role_name, {"text"}));
    ChatMessage message{std::move(role_name), std::move(content)};
    if (const Json* calls = Field(m, "tool_calls")) {
      if (message.role != "assistant") {
        return InvalidFieldError(param + ".tool_calls", "only assistant messages carry tool calls");
      }
      RINGLM_ASSIGN_OR_RETURN(message.tool_calls, ParseToolCalls(*calls, param));
    }
    if (message.role == "tool") {
      const Json* id = Field(m, "tool_call_id");
      if (id == nullptr || !id->is_string()) {
        return InvalidFieldError(param + ".tool_call_id",
                                 "a tool message needs 'tool_call_id', a string");
      }
      message.tool_call_id = id->get<std::string>();
    }
    out.messages.push_back(std::move(message));
  }
  if (const Json* tools = Field(json, "tools")) {
    RINGLM_ASSIGN_OR_RETURN(out.tools, ParseTools(*tools));
  }
  RINGLM_ASSIGN_OR_RETURN(out.tool_choice, ParseToolChoice(Field(json, "tool_choice"), out.tools));
  RINGLM_ASSIGN_OR_RETURN(out.parallel_tool_calls, Bool(json, "parallel_tool_calls", true));
  if (const Json* format = Field(json, "response_format")) {
    RINGLM_ASSIGN_OR_RETURN(out.response_format, ParseResponseFormat(*format, "response_format"));
  }
  RINGLM_RETURN_IF_ERROR(ParseCommon(json, out));
  RINGLM_RETURN_IF_ERROR(ParseChatLogprobs(json, out));
  return out;
}

absl::StatusOr<CompletionRequest> ParseTextCompletionRequest(std::string_view body,
                                                             const JsonLimits& limits) {
  RINGLM_ASSIGN_OR_RETURN(Json json, ParseObject(body, limits));
  RINGLM_RETURN_IF_ERROR(CheckFieldsKnown(json, {"prompt", "logprobs"}));
  CompletionRequest out;
  out.kind = CompletionRequest::Kind::kText;
  Json* prompt = MutableField(json, "prompt");
  if (prompt == nullptr) return InvalidFieldError("prompt", "'prompt' is required");
  if (prompt->is_array() && prompt->size() == 1 &&
      ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    prompt = &(*prompt)[0];  // one prompt (n > 1 is not supported)
  }
  if (prompt->is_array() && !prompt->empty() &&
      ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    return InvalidFieldError("prompt",
                             absl::StrCat("'prompt' holds ", prompt->size(),
                                          " prompts; only one prompt per request is supported"));
  }
  if (prompt->is_array() && !prompt->empty()) {
    for (const Json& id : *prompt) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return InvalidFieldError("prompt", "token ids in 'prompt' must be integers >= 0");
      }
      out.prompt_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  } else if (prompt->is_string()) {
    out.prompt = TakeString(*prompt);
  } else {
    return InvalidFieldError("prompt",
                             "'prompt' must be a string or an array of token ids (or an array "
                             "of one of those)");
  }
  RINGLM_RETURN_IF_ERROR(ParseCommon(json, out));
  RINGLM_RETURN_IF_ERROR(ParseTextLogprobs(json, out));
  return out;
}

absl::StatusOr<CompletionRequest> ParseResponsesRequest(std::string_view body,
                                                        const JsonLimits& limits) {
  RINGLM_ASSIGN_OR_RETURN(Json json, ParseObject(body, limits));
  RINGLM_RETURN_IF_ERROR(
      CheckFieldsKnown(json, {"input", "instructions", "max_output_tokens", "store", "metadata",
                              "text", "truncation", "parallel_tool_calls"}));
  CompletionRequest out;
  out.kind = CompletionRequest::Kind::kResponses;
  if (const Json* instructions = Field(json, "instructions")) {
    if (!instructions->is_string()) {
      return InvalidFieldError("instructions", "'instructions' must be a string");
    }
    out.messages.push_back(ChatMessage{"system", instructions->get<std::string>()});
  }
  Json* input = MutableField(json, "input");
  if (input == nullptr) return InvalidFieldError("input", "'input' is required");
  if (input->is_string()) {
    out.messages.push_back(ChatMessage{"user", TakeString(*input)});
  } else if (input->is_array() && !input->empty()) {
    for (size_t i = 0; i < input->size(); ++i) {
      Json& item = (*input)[i];
      const std::string param = absl::StrCat("input[", i, "]");
      if (!item.is_object()) return InvalidFieldError(param, "an input item must be an object");
      if (const Json* type = Field(item, "type");
          type != nullptr && (!type->is_string() || type->get<std::string>() != "message")) {
        return InvalidFieldError(param + ".type", "only 'message' input items are supported");
      }
      RINGLM_ASSIGN_OR_RETURN(std::string role, MessageRole(item, param, /*allow_tool=*/false));
      RINGLM_ASSIGN_OR_RETURN(std::string content,
                              MessageContent(item, param, role, {"input_text", "output_text"}));
      out.messages.push_back(ChatMessage{std::move(role), std::move(content)});
    }
  } else {
    return InvalidFieldError("input", "'input' must be a string or a non-empty array of messages");
  }
  // Nothing is stored (there is no previous_response_id to refer to one), so
  // store: true asks for nothing this server could honour later either way.
  if (const Json* store = Field(json, "store"); store != nullptr && !store->is_boolean()) {
    return InvalidFieldError("store", "'store' must be a boolean");
  }
  if (const Json* metadata = Field(json, "metadata")) {
    if (!metadata->is_object())
      return InvalidFieldError("metadata", "'metadata' must be an object");
    out.metadata = *metadata;
  }
  if (const Json* truncation = Field(json, "truncation");
      truncation != nullptr && *truncation != "disabled") {
    return InvalidFieldError("truncation", "only 'disabled' truncation is supported");
  }
  if (const Json* text = Field(json, "text")) {
    if (!text->is_object()) return InvalidFieldError("text", "'text' must be an object");
    if (const Json* format = Field(*text, "format")) {
      RINGLM_ASSIGN_OR_RETURN(out.response_format, ParseResponseFormat(*format, "text.format"));
    }
  }
  RINGLM_RETURN_IF_ERROR(ParseCommon(json, out));
  return out;
}

}  // namespace ringlm
