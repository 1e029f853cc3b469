#include "chat/tool_call_parser.h"

#include <utility>

#include "nlohmann/json.hpp"
#include "security/crypto.h"

namespace ringlm {
namespace {

using Json = nlohmann::json;

// The markers, from the one definition of each family's syntax.
const std::string_view kHermesOpen = FindToolCallSyntax(ToolCallFamily::kHermes)->marker_open;
const std::string_view kPythonTag = FindToolCallSyntax(ToolCallFamily::kLlama3)->marker_open;
const std::string_view kMistralMarker = FindToolCallSyntax(ToolCallFamily::kMistral)->marker_open;
const std::string_view kDeepSeekOpen = FindToolCallSyntax(ToolCallFamily::kDeepSeekV3)->marker_open;

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}
bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}
bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
std::string_view StripLeading(std::string_view text) {
  while (!text.empty() && IsBlank(text.front())) text.remove_prefix(1);
  return text;
}
std::string_view Strip(std::string_view text) {
  text = StripLeading(text);
  while (!text.empty() && IsBlank(text.back())) text.remove_suffix(1);
  return text;
}

// The length of the longest suffix of `text` that is a proper prefix of
// `marker`: text that may still turn out to be the marker.
size_t HeldBack(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (marker.substr(0, n) == text.substr(text.size() - n)) return n;
  }
  return 0;
}

// A call with a fresh id and its arguments (an object) as compact JSON.
void AddCall(std::string name, const Json& arguments, std::vector<ParsedToolCall>& out) {
  out.push_back(ParsedToolCall{RandomId("call_").substr(0, 29), std::move(name),
                               arguments.dump(-1, ' ', false, Json::error_handler_t::replace)});
}

// {"name": string, <args_key>: object} -> a call; false otherwise.
bool CallFromJson(const Json& j, std::vector<ParsedToolCall>& out) {
  if (!j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return false;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  Json arguments = Json::object();
  if (args != j.end()) {
    arguments = args->is_string() ? Json::parse(args->get<std::string>(), nullptr, false) : *args;
  }
  if (!arguments.is_object()) return false;
  AddCall(name->get<std::string>(), arguments, out);
  return true;
}

// The calls of a JSON family: one {"name", "arguments"/"parameters"} object,
// an array of them, or (Llama 3) several chained with ';'.
bool JsonCalls(std::string_view body, ToolCallFamily family, std::vector<ParsedToolCall>& found) {
  const Json j = Json::parse(Strip(body), nullptr, false);
  if (j.is_array() && !j.empty()) {
    for (const Json& item : j) {
      if (!CallFromJson(item, found)) return false;
    }
    return true;
  }
  if (CallFromJson(j, found)) return true;
  // Llama 3 may chain calls with ';'.
  if (family != ToolCallFamily::kLlama3 || !Contains(body, ";")) return false;
  for (size_t start = 0; start <= body.size();) {
    size_t end = body.find(';', start);
    if (end == std::string_view::npos) end = body.size();
    const std::string_view part = Strip(body.substr(start, end - start));
    if (!part.empty() && !CallFromJson(Json::parse(part, nullptr, false), found)) return false;
    start = end + 1;
  }
  return true;
}

// DeepSeek V3's call, between <｜tool▁call▁begin｜> and <｜tool▁call▁end｜>:
//   function<｜tool▁sep｜>NAME\n```json\nARGS\n```
// The fence is optional (a model may leave it out); ARGS is a JSON object.
bool DeepSeekCall(std::string_view call, std::vector<ParsedToolCall>& out) {
  const size_t sep = call.find(kDeepSeekCallSep);
  if (sep == std::string_view::npos || Strip(call.substr(0, sep)) != "function") return false;
  call.remove_prefix(sep + kDeepSeekCallSep.size());
  const size_t newline = call.find('\n');
  if (newline == std::string_view::npos) return false;
  const std::string_view name = Strip(call.substr(0, newline));
  std::string_view args = Strip(call.substr(newline + 1));
  if (StartsWith(args, "```json")) {
    args.remove_prefix(7);
  } else if (StartsWith(args, "```")) {
    args.remove_prefix(3);
  }
  if (args.ends_with("```")) args.remove_suffix(3);
  if (name.empty() || name.find_first_of(" \t\r\n") != std::string_view::npos) return false;
  const Json j = Json::parse(Strip(args), nullptr, false);
  if (!j.is_object()) return false;
  AddCall(std::string(name), j, out);
  return true;
}

// The calls of a DeepSeek V3 block (between its begin and end markers): one
// or more, blanks between them and nothing else. The last may lack its
// <｜tool▁call▁end｜> (a model that stopped right after the arguments).
bool DeepSeekCalls(std::string_view body, std::vector<ParsedToolCall>& out) {
  body = StripLeading(body);
  if (body.empty()) return false;
  while (!body.empty()) {
    if (!StartsWith(body, kDeepSeekCallBegin)) return false;
    body.remove_prefix(kDeepSeekCallBegin.size());
    const size_t end = body.find(kDeepSeekCallEnd);
    if (!DeepSeekCall(body.substr(0, end), out)) return false;
    if (end == std::string_view::npos) break;
    body = StripLeading(body.substr(end + kDeepSeekCallEnd.size()));
  }
  return true;
}

}  // namespace

ToolCallFamily DetectToolCallFamily(std::string_view t) {
  if (Contains(t, kHermesOpen)) return ToolCallFamily::kHermes;
  if (Contains(t, kMistralMarker)) return ToolCallFamily::kMistral;
  if (Contains(t, kDeepSeekOpen)) return ToolCallFamily::kDeepSeekV3;
  if (Contains(t, kPythonTag) || (Contains(t, "<|start_header_id|>") && Contains(t, "tools"))) {
    return ToolCallFamily::kLlama3;
  }
  return ToolCallFamily::kNone;
}

ToolCallScanner::ToolCallScanner(ToolCallFamily family)
    : family_(family),
      syntax_(*FindToolCallSyntax(family)),
      state_(!syntax_.marker_close.empty() ? State::kText : State::kUndecided) {}

std::string ToolCallScanner::Push(std::string_view text) {
  pending_.append(text);
  if (!syntax_.marker_close.empty()) return PushBlocks();
  if (state_ == State::kUndecided) {
    // Llama 3 and Mistral write a call as the whole reply: its first
    // non-blank character decides.
    const std::string_view rest = StripLeading(pending_);
    if (rest.empty()) return "";
    const bool call = family_ == ToolCallFamily::kLlama3
                          ? rest.front() == '{' || StartsWith(rest, kPythonTag)
                          : rest.front() == '[';
    if (!call && (kMistralMarker.substr(0, rest.size()) == rest.substr(0, kMistralMarker.size()) &&
                  family_ == ToolCallFamily::kMistral)) {
      return "";  // may be the start of "[TOOL_CALLS]" (when it decodes to text)
    }
    state_ = call ? State::kCall : State::kText;
  }
  if (state_ == State::kCall) return "";  // parsed whole at Finish
  return std::exchange(pending_, "");
}

std::string ToolCallScanner::PushBlocks() {
  const std::string_view marker_open = syntax_.marker_open;
  const std::string_view marker_close = syntax_.marker_close;
  std::string out;
  while (true) {
    if (state_ == State::kText) {
      const size_t open = pending_.find(marker_open);
      if (open == std::string::npos) {
        const size_t keep = HeldBack(pending_, marker_open);
        out += pending_.substr(0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return out;
      }
      out += pending_.substr(0, open);
      pending_.erase(0, open);  // pending_ now starts with the marker
      state_ = State::kCall;
    }
    const size_t close = pending_.find(marker_close);
    if (close == std::string::npos) return out;
    const std::string call = pending_.substr(0, close + marker_close.size());
    pending_.erase(0, call.size());
    state_ = State::kText;
    const std::string_view body = std::string_view(call).substr(
        marker_open.size(), call.size() - marker_open.size() - marker_close.size());
    if (!ParseCalls(body)) out += call;  // not a call after all: it is content
  }
}

std::string ToolCallScanner::Finish() {
  std::string rest = std::exchange(pending_, "");
  if (state_ != State::kCall) return rest;
  std::string_view body = rest;
  if (!syntax_.marker_close.empty()) {
    body.remove_prefix(syntax_.marker_open.size());
  } else {
    body = StripLeading(body);
    if (StartsWith(body, kPythonTag)) body.remove_prefix(kPythonTag.size());
    if (StartsWith(body, kMistralMarker)) body.remove_prefix(kMistralMarker.size());
  }
  return ParseCalls(body) ? "" : rest;
}

bool ToolCallScanner::ParseCalls(std::string_view body) {
  std::vector<ParsedToolCall> found;
  const bool parsed = family_ == ToolCallFamily::kDeepSeekV3 ? DeepSeekCalls(body, found)
                                                             : JsonCalls(body, family_, found);
  if (!parsed) return false;
  for (ParsedToolCall& call : found) calls_.push_back(std::move(call));
  found_ = true;
  return true;
}

std::vector<ParsedToolCall> ToolCallScanner::TakeCalls() { return std::exchange(calls_, {}); }

}  // namespace ringlm
