#include "api/response_writer.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "security/crypto.h"

namespace ringlm {
namespace {

using Json = nlohmann::json;

// OpenAI's tool_calls array; with `first_index`, as stream deltas (each
// with its index).
Json ToolCallsJson(const std::vector<ParsedToolCall>& calls, std::optional<size_t> first_index) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    Json call = {{"id", calls[i].id},
                 {"type", "function"},
                 {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (first_index) call["index"] = *first_index + i;
    out.push_back(std::move(call));
  }
  return out;
}

// chat.completion(.chunk) and text_completion, with "data: ...\n\n" frames
// and a final [DONE].
class CompletionsWriter : public ResponseWriter {
 public:
  CompletionsWriter(const CompletionRequest& request, int64_t created)
      : chat_(request.kind == CompletionRequest::Kind::kChat),
        meta_{chat_, NewCompletionId(chat_), created, request.model},
        include_usage_(request.include_usage) {}

  const std::string& id() const override { return meta_.id; }

  Json Whole(const Answer& answer) const override {
    Json out =
        CompletionJson(meta_, answer.text, answer.finish_reason, answer.usage, answer.logprobs);
    if (!answer.tool_calls.empty()) {
      Json& message = out["choices"][0]["message"];
      message["tool_calls"] = ToolCallsJson(answer.tool_calls, std::nullopt);
      // Only calls, no words: OpenAI sends null content.
      if (answer.text.find_first_not_of(" \t\r\n") == std::string::npos) {
        message["content"] = nullptr;
      }
    }
    return out;
  }
  std::string StreamStart() override {
    // Chat streams open with the role; text streams have no such chunk.
    return chat_ ? SseFrame(ChunkJson(meta_, true, "", std::nullopt)) : "";
  }
  std::string StreamText(std::string_view text, const Json& logprobs) override {
    return SseFrame(ChunkJson(meta_, false, text, std::nullopt, logprobs));
  }
  std::string StreamToolCalls(const std::vector<ParsedToolCall>& calls,
                              size_t first_index) override {
    Json chunk = ChunkJson(meta_, false, "", std::nullopt);
    chunk["choices"][0]["delta"]["tool_calls"] = ToolCallsJson(calls, first_index);
    return SseFrame(chunk);
  }
  std::string StreamEnd(std::string_view finish_reason, const Usage& usage,
                        const Json& logprobs) override {
    std::string out = SseFrame(ChunkJson(meta_, false, "", finish_reason, logprobs));
    if (include_usage_) out += SseFrame(UsageChunkJson(meta_, usage));
    return out + std::string(kSseDone);
  }
  std::string StreamError(const HttpError& error) override {
    // As OpenAI does: the error object in-band, then [DONE].
    return "data: " + error.body + "\n\n" + std::string(kSseDone);
  }

 private:
  const bool chat_;
  const ResponseMeta meta_;
  const bool include_usage_;
};

// The Responses API: a response object holding one assistant message item,
// and when streamed the typed events "response.created" ... "response.completed".
class ResponsesWriter : public ResponseWriter {
 public:
  ResponsesWriter(const CompletionRequest& request, int64_t created)
      : id_(RandomId("resp_")), message_id_(RandomId("msg_")), created_(created) {
    echo_ = {{"model", request.model},
             {"instructions", nullptr},
             {"max_output_tokens", request.max_tokens ? Json(*request.max_tokens) : Json(nullptr)},
             {"metadata", request.metadata},
             {"parallel_tool_calls", true},
             {"previous_response_id", nullptr},
             {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
             {"store", false},
             {"temperature", request.sampling.temperature},
             {"text", {{"format", {{"type", "text"}}}}},
             {"tool_choice", "auto"},
             {"tools", Json::array()},
             {"top_p", request.sampling.top_p},
             {"truncation", "disabled"},
             {"user", nullptr}};
  }

  const std::string& id() const override { return id_; }

  Json Whole(const Answer& answer) const override {
    const bool complete = answer.finish_reason != "length";
    Json out = Response(complete ? "completed" : "incomplete");
    out["output"] =
        Json::array({Message(complete ? "completed" : "incomplete", Part(answer.text))});
    if (!complete) out["incomplete_details"] = {{"reason", "max_output_tokens"}};
    out["usage"] = UsageOf(answer.usage);
    return out;
  }

  std::string StreamStart() override {
    Json response = Response("in_progress");
    std::string out = Event("response.created", {{"response", response}});
    out += Event("response.in_progress", {{"response", response}});
    out += Event("response.output_item.added",
                 {{"output_index", 0}, {"item", Message("in_progress", std::nullopt)}});
    out += Event("response.content_part.added", PartEvent(Part("")));
    return out;
  }
  std::string StreamToolCalls(const std::vector<ParsedToolCall>&, size_t) override {
    return "";  // the Responses API takes no tools here (refused at parse)
  }
  std::string StreamText(std::string_view text, const Json& /*logprobs*/) override {
    text_ += text;
    Json delta = PartEvent(std::nullopt);
    delta["delta"] = std::string(text);
    delta["logprobs"] = Json::array();
    return Event("response.output_text.delta", std::move(delta));
  }
  std::string StreamEnd(std::string_view finish_reason, const Usage& usage,
                        const Json& logprobs) override {
    Json done = PartEvent(std::nullopt);
    done["text"] = text_;
    done["logprobs"] = Json::array();
    std::string out = Event("response.output_text.done", std::move(done));
    out += Event("response.content_part.done", PartEvent(Part(text_)));
    Json whole = Whole(Answer{text_, std::string(finish_reason), usage, logprobs, {}});
    out += Event("response.output_item.done", {{"output_index", 0}, {"item", whole["output"][0]}});
    const bool complete = whole["status"] == "completed";
    out += Event(complete ? "response.completed" : "response.incomplete", {{"response", whole}});
    return out;
  }
  std::string StreamError(const HttpError& error) override {
    Json body = Json::parse(error.body, nullptr, false);
    const Json e = body.is_object() ? body["error"] : Json::object();
    std::string out = Event("error", {{"code", e.value("code", Json(nullptr))},
                                      {"message", e.value("message", Json("error"))},
                                      {"param", e.value("param", Json(nullptr))}});
    Json failed = Response("failed");
    failed["error"] = {{"code", "server_error"}, {"message", e.value("message", Json("error"))}};
    return out + Event("response.failed", {{"response", failed}});
  }

 private:
  Json Response(std::string_view status) const {
    Json out = {{"id", id_},
                {"object", "response"},
                {"created_at", created_},
                {"status", std::string(status)},
                {"error", nullptr},
                {"incomplete_details", nullptr},
                {"output", Json::array()},
                {"usage", nullptr}};
    out.update(echo_);
    return out;
  }
  static Json Part(std::string_view text) {
    return {{"type", "output_text"},
            {"text", std::string(text)},
            {"annotations", Json::array()},
            {"logprobs", Json::array()}};
  }
  Json Message(std::string_view status, std::optional<Json> part) const {
    return {{"id", message_id_},
            {"type", "message"},
            {"status", std::string(status)},
            {"role", "assistant"},
            {"content", part ? Json::array({*std::move(part)}) : Json::array()}};
  }
  Json PartEvent(std::optional<Json> part) const {
    Json out = {{"item_id", message_id_}, {"output_index", 0}, {"content_index", 0}};
    if (part) out["part"] = *std::move(part);
    return out;
  }
  static Json UsageOf(const Usage& usage) {
    return {{"input_tokens", usage.prompt_tokens},
            {"input_tokens_details", {{"cached_tokens", usage.cached_tokens}}},
            {"output_tokens", usage.completion_tokens},
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
  }
  // "event: <type>\ndata: <json with type and sequence_number>\n\n".
  std::string Event(std::string_view type, Json data) {
    data["type"] = std::string(type);
    data["sequence_number"] = sequence_++;
    return "event: " + std::string(type) + "\n" + SseFrame(data);
  }

  const std::string id_;
  const std::string message_id_;
  const int64_t created_;
  Json echo_;
  std::string text_;  // streamed so far
  int64_t sequence_ = 0;
};

}  // namespace

std::unique_ptr<ResponseWriter> MakeResponseWriter(const CompletionRequest& request,
                                                   int64_t created) {
  if (request.kind == CompletionRequest::Kind::kResponses) {
    return std::make_unique<ResponsesWriter>(request, created);
  }
  return std::make_unique<CompletionsWriter>(request, created);
}

}  // namespace ringlm
