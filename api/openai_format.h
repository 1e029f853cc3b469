// The OpenAI wire format of responses: whole completions, stream chunks, SSE
// framing, usage, ids. Pure functions over plain values; no HTTP, no backend.
#ifndef RINGLM_API_OPENAI_FORMAT_H_
#define RINGLM_API_OPENAI_FORMAT_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "inference/sampling/logprobs.h"
#include "inference/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace ringlm {

struct Usage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_tokens = 0;
};

// What every response object of one request shares.
struct ResponseMeta {
  bool chat = true;  // chat.completion(.chunk) vs text_completion
  std::string id;    // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;
  std::string model;
};

// "chatcmpl-" or "cmpl-" followed by 32 hex digits from the CSPRNG. It is
// also the response's x-request-id header.
std::string NewCompletionId(bool chat);

// The `system_fingerprint` of every response object: names the server
// software and the model it serves, so clients can tell when either changed.
std::string SystemFingerprint(const std::string& model);

// {"prompt_tokens","completion_tokens","total_tokens",
//  "prompt_tokens_details":{"cached_tokens"}}
nlohmann::json UsageJson(const Usage& usage);

// choices[0].logprobs of a chat response or chunk:
//   {"content":[{"token","logprob","bytes":[...],"top_logprobs":[{"token","logprob","bytes"}]}],
//    "refusal":null}
// A token's text is its piece (TokenToPiece: "" for control tokens). A
// logprob of -inf is reported as -9999, as OpenAI does (JSON has no -inf).
nlohmann::json ChatLogprobsJson(const Tokenizer& tokenizer, std::span<const TokenLogprobs> tokens);
// choices[0].logprobs of a text completion, the legacy format:
//   {"tokens":[...],"token_logprobs":[...],"top_logprobs":[{piece: logprob}],"text_offset":[...]}
// text_offset counts bytes from `first_offset` (the text already sent).
nlohmann::json TextLogprobsJson(const Tokenizer& tokenizer, std::span<const TokenLogprobs> tokens,
                                size_t first_offset);

// A whole (non-streamed) chat.completion or text_completion. `logprobs` is
// choices[0].logprobs (null when not asked for).
nlohmann::json CompletionJson(const ResponseMeta& meta, std::string_view text,
                              std::string_view finish_reason, const Usage& usage,
                              const nlohmann::json& logprobs = nullptr);

// One chunk. Chat: the first chunk has role (with_role), content chunks have
// text, the last has finish_reason and an empty delta. Text: choices[0].text.
// `logprobs` as in CompletionJson, for this chunk's tokens.
nlohmann::json ChunkJson(const ResponseMeta& meta, bool with_role, std::string_view text,
                         std::optional<std::string_view> finish_reason,
                         const nlohmann::json& logprobs = nullptr);
// The chunk after the last one when stream_options.include_usage: choices [].
nlohmann::json UsageChunkJson(const ResponseMeta& meta, const Usage& usage);

// "data: <json>\n\n"; invalid UTF-8 in strings is replaced, never thrown on.
std::string SseFrame(const nlohmann::json& json);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// json.dump() that never throws (invalid UTF-8 becomes U+FFFD).
std::string DumpJson(const nlohmann::json& json);

}  // namespace ringlm

#endif  // RINGLM_API_OPENAI_FORMAT_H_
