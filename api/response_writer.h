// How one endpoint words its answer: /v1/chat/completions and /v1/completions
// (chat.completion / text_completion objects and their chunks) or
// /v1/responses (a response object, or its typed stream events). The handler
// drives generation the same way for all three and asks the writer for bytes.
#ifndef RINGLM_API_RESPONSE_WRITER_H_
#define RINGLM_API_RESPONSE_WRITER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/api_error.h"
#include "api/completion_request.h"
#include "api/openai_format.h"
#include "chat/tool_call_parser.h"
#include "nlohmann/json.hpp"

namespace ringlm {

// A finished reply.
struct Answer {
  std::string text;
  std::string finish_reason;  // "stop", "length" or "tool_calls"
  Usage usage;
  // As ChatLogprobsJson or TextLogprobsJson give it (null when not asked for).
  nlohmann::json logprobs;
  std::vector<ParsedToolCall> tool_calls;
};

// One per request. Not thread-safe: the HTTP thread that serves the request
// owns it. The Stream* calls come in the order Start, Text*, then End or
// Error, and return SSE bytes ready to write.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;

  // The id that is also the x-request-id header.
  virtual const std::string& id() const = 0;

  // The whole (non-streamed) answer.
  virtual nlohmann::json Whole(const Answer& answer) const = 0;

  virtual std::string StreamStart() = 0;
  virtual std::string StreamText(std::string_view text, const nlohmann::json& logprobs) = 0;
  // Calls found in the reply, numbered from `first_index` (chat only).
  virtual std::string StreamToolCalls(const std::vector<ParsedToolCall>& calls,
                                      size_t first_index) = 0;
  // The last frames of a stream that finished.
  virtual std::string StreamEnd(std::string_view finish_reason, const Usage& usage,
                                const nlohmann::json& logprobs) = 0;
  // The last frames of a stream that failed after its headers went out.
  virtual std::string StreamError(const HttpError& error) = 0;
};

// The writer for `request`'s endpoint. `model` is the name the answer
// reports; `created` the Unix time.
std::unique_ptr<ResponseWriter> MakeResponseWriter(const CompletionRequest& request,
                                                   int64_t created);

}  // namespace ringlm

#endif  // RINGLM_API_RESPONSE_WRITER_H_
