// How one endpoint words its answer: /v1/chat/completions and /v1/completions
// (chat.completion / text_completion objects and their chunks) or
// /v1/responses (a response object, or its typed stream events). The handler
// drives generation the same way for all three and asks the writer for bytes.
#ifndef RINGLM_API_RESPONSE_WRITER_H_
#define RINGLM_API_RESPONSE_WRITER_H_

#include <memory>
#include <string>
#include <string_view>

#include "api/api_error.h"
#include "api/completion_request.h"
#include "api/openai_format.h"
#include "nlohmann/json.hpp"

namespace ringlm {

// One per request. Not thread-safe: the HTTP thread that serves the request
// owns it. The Stream* calls come in the order Start, Text*, then End or
// Error, and return SSE bytes ready to write.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;

  // The id that is also the x-request-id header.
  virtual const std::string& id() const = 0;

  // The whole (non-streamed) answer. `logprobs` as ChatLogprobsJson or
  // TextLogprobsJson give it (null when not asked for).
  virtual nlohmann::json Whole(std::string_view text, std::string_view finish_reason,
                               const Usage& usage, const nlohmann::json& logprobs) const = 0;

  virtual std::string StreamStart() = 0;
  virtual std::string StreamText(std::string_view text, const nlohmann::json& logprobs) = 0;
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
