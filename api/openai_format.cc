#include "api/openai_format.h"

#include <cmath>

#include "security/crypto.h"

namespace ringlm {

using Json = nlohmann::json;

std::string NewCompletionId(bool chat) { return RandomId(chat ? "chatcmpl-" : "cmpl-"); }

std::string SystemFingerprint(const std::string& model) {
  // "fp_" and 16 hex digits of the SHA-256 of the server and model names.
  return "fp_" + HexEncode(Sha256("ringlm/" + model)).substr(0, 16);
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
              {"model", meta.model},
              {"system_fingerprint", SystemFingerprint(meta.model)}};
}

Json Reason(std::optional<std::string_view> reason) {
  return reason ? Json(std::string(*reason)) : Json(nullptr);
}

// OpenAI reports an impossible token as -9999.
double Reportable(float logprob) { return std::isfinite(logprob) ? logprob : -9999.0; }

Json Bytes(const std::string& piece) {
  Json bytes = Json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return bytes;
}

Json ChatEntry(const std::string& piece, float logprob) {
  return Json{{"token", piece}, {"logprob", Reportable(logprob)}, {"bytes", Bytes(piece)}};
}

}  // namespace

Json ChatLogprobsJson(const Tokenizer& tokenizer, std::span<const TokenLogprobs> tokens) {
  Json content = Json::array();
  for (const TokenLogprobs& t : tokens) {
    Json entry = ChatEntry(tokenizer.TokenToPiece(t.chosen.token), t.chosen.logprob);
    Json top = Json::array();
    for (const TokenLogprob& alt : t.top) {
      top.push_back(ChatEntry(tokenizer.TokenToPiece(alt.token), alt.logprob));
    }
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return Json{{"content", std::move(content)}, {"refusal", nullptr}};
}

Json TextLogprobsJson(const Tokenizer& tokenizer, std::span<const TokenLogprobs> tokens,
                      size_t first_offset) {
  Json pieces = Json::array(), logprobs = Json::array(), tops = Json::array(),
       offsets = Json::array();
  size_t offset = first_offset;
  for (const TokenLogprobs& t : tokens) {
    const std::string piece = tokenizer.TokenToPiece(t.chosen.token);
    pieces.push_back(piece);
    logprobs.push_back(Reportable(t.chosen.logprob));
    Json top = Json::object();
    for (const TokenLogprob& alt : t.top) {
      top[tokenizer.TokenToPiece(alt.token)] = Reportable(alt.logprob);
    }
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += piece.size();
  }
  return Json{{"tokens", std::move(pieces)},
              {"token_logprobs", std::move(logprobs)},
              {"top_logprobs", std::move(tops)},
              {"text_offset", std::move(offsets)}};
}

Json CompletionJson(const ResponseMeta& meta, std::string_view text, std::string_view finish_reason,
                    const Usage& usage, const Json& logprobs) {
  Json out = Envelope(meta, "chat.completion", "text_completion");
  Json choice = {{"index", 0}, {"finish_reason", std::string(finish_reason)}};
  if (meta.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", std::string(text)}};
  } else {
    choice["text"] = std::string(text);
  }
  choice["logprobs"] = logprobs;
  out["choices"] = Json::array({choice});
  out["usage"] = UsageJson(usage);
  return out;
}

Json ChunkJson(const ResponseMeta& meta, bool with_role, std::string_view text,
               std::optional<std::string_view> finish_reason, const Json& logprobs) {
  Json out = Envelope(meta, "chat.completion.chunk", "text_completion");
  Json choice = {{"index", 0}};
  if (meta.chat) {
    Json delta = Json::object();
    if (with_role) delta["role"] = "assistant";
    if (with_role || !text.empty()) delta["content"] = std::string(text);
    choice["delta"] = delta;
  } else {
    choice["text"] = std::string(text);
  }
  choice["logprobs"] = logprobs;
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
