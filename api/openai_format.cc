#include "api/openai_format.h"

#include <random>

#include "absl/synchronization/mutex.h"

namespace ringlm {

using Json = nlohmann::json;

std::string NewCompletionId(bool chat) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static absl::Mutex mu(absl::kConstInit);
  static std::mt19937_64* rng = nullptr;
  std::string id = chat ? "chatcmpl-" : "cmpl-";
  absl::MutexLock lock(&mu);
  if (rng == nullptr) rng = new std::mt19937_64(std::random_device{}());
  for (int i = 0; i < 24; ++i) id += kAlphabet[(*rng)() % (sizeof(kAlphabet) - 1)];
  return id;
}

Json UsageJson(const Usage& usage) {
  return Json{{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

namespace {

Json Envelope(const ResponseMeta& meta, const char* chat_object, const char* text_object) {
  return Json{{"id", meta.id},
              {"object", meta.chat ? chat_object : text_object},
              {"created", meta.created},
              {"model", meta.model}};
}

Json Reason(std::optional<std::string_view> reason) {
  return reason ? Json(std::string(*reason)) : Json(nullptr);
}

}  // namespace

Json CompletionJson(const ResponseMeta& meta, std::string_view text, std::string_view finish_reason,
                    const Usage& usage) {
  Json out = Envelope(meta, "chat.completion", "text_completion");
  Json choice = {{"index", 0}, {"finish_reason", std::string(finish_reason)}};
  if (meta.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", std::string(text)}};
  } else {
    choice["text"] = std::string(text);
    choice["logprobs"] = nullptr;
  }
  out["choices"] = Json::array({choice});
  out["usage"] = UsageJson(usage);
  return out;
}

Json ChunkJson(const ResponseMeta& meta, bool with_role, std::string_view text,
               std::optional<std::string_view> finish_reason) {
  Json out = Envelope(meta, "chat.completion.chunk", "text_completion");
  Json choice = {{"index", 0}};
  if (meta.chat) {
    Json delta = Json::object();
    if (with_role) delta["role"] = "assistant";
    if (with_role || !text.empty()) delta["content"] = std::string(text);
    choice["delta"] = delta;
  } else {
    choice["text"] = std::string(text);
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = Reason(finish_reason);
  out["choices"] = Json::array({choice});
  return out;
}

Json UsageChunkJson(const ResponseMeta& meta, const Usage& usage) {
  Json out = Envelope(meta, "chat.completion.chunk", "text_completion");
  out["choices"] = Json::array();
  out["usage"] = UsageJson(usage);
  return out;
}

std::string DumpJson(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string SseFrame(const Json& json) { return "data: " + DumpJson(json) + "\n\n"; }

}  // namespace ringlm
