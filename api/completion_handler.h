// POST /v1/chat/completions, /v1/completions and /v1/responses: from the request body to a
// whole response or an SSE stream. Internal to ApiServer.
#ifndef RINGLM_API_COMPLETION_HANDLER_H_
#define RINGLM_API_COMPLETION_HANDLER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "api/admission.h"
#include "api/completion_request.h"
#include "api/generation_backend.h"
#include "api/generation_stream.h"
#include "api/json_limits.h"
#include "api/prefix_cache.h"
#include "api/served_models.h"
#include "chat/chat_renderer.h"
#include "chat/chat_template.h"
#include "chat/reply_store.h"
#include "httplib.h"
#include "inference/sampling/output_constraint.h"
#include "nlohmann/json.hpp"

namespace ringlm {

// Writes `status` (not OK) as the response: HTTP code and OpenAI error JSON.
void SetErrorResponse(const absl::Status& status, httplib::Response& res);

struct CompletionHandlerOptions {
  bool keep_sessions = true;   // keep KV sessions for prefix reuse (the prefix cache is on)
  AdmissionOptions admission;  // generations at once, and the line behind them
  JsonLimits json_limits;
  size_t max_body_bytes = 4 << 20;  // a (chunked) body past this gets 413
  // Bodies of at least large_body_bytes are parsed and turned into a prompt
  // at most max_large_bodies at a time (the others wait in a line, as for
  // admission): that work holds a few times the body's size, and without a
  // bound the in-flight body limit alone would let it grow to gigabytes.
  size_t large_body_bytes = 1 << 20;
  int max_large_bodies = 2;
  bool parse_special_in_content = false;  // see ApiOptions
  ReplyStoreOptions replies;              // the chat replies kept as their ids
};

// Thread-safe: one instance serves every HTTP thread. The backend, cache and
// models must outlive it, and so must the handler outlive every response it
// produced (ApiServer stops the HTTP server first).
//
// Order of work per request, cheapest first so that a flood costs little:
// parse the body (bounded by json_limits; a large body first waits for one of
// max_large_bodies turns, held until its prompt is made), check the model
// name, take a running slot (waiting in line for one; 429 when the line is
// full), and
// only then check readiness, render the chat template, refuse text too long
// for the context from its size alone, and tokenize.
//
// Chat replies are recorded in a ReplyStore the handler owns, and a chat
// prompt uses their generated ids where a request sends them back
// (RenderWithReplyIds), whether the prefix cache is on or off.
class CompletionHandler {
 public:
  CompletionHandler(GenerationBackend& backend, PrefixCache& cache, const ServedModels& models,
                    const ChatRenderer& renderer, CompletionHandlerOptions options);

  // `body`: the request's whole body. Sets `res` to the answer.
  void HandleChat(std::string_view body, httplib::Response& res);
  void HandleText(std::string_view body, httplib::Response& res);
  void HandleResponses(std::string_view body, httplib::Response& res);

  // Makes every waiting or streaming request give up (server shutdown).
  void Shutdown() {
    stopping_ = true;
    admission_.Shutdown();
    large_bodies_.Shutdown();
  }

 private:
  using Slot = Admission::Ticket;  // a running slot, released on destruction
  using Parser = absl::StatusOr<CompletionRequest> (*)(std::string_view, const JsonLimits&);
  // The body size checks and its large-body turn, then `parse` and Handle.
  void Serve(std::string_view body, Parser parse, httplib::Response& res);
  // `large_body`: the large-body turn, if the body needed one; given back
  // once the prompt is made.
  void Handle(absl::StatusOr<CompletionRequest> parsed, std::optional<Slot> large_body,
              httplib::Response& res);
  // What comes after admission and before Submit: readiness, the prompt.
  absl::StatusOr<GenerationStream::Params> Prepare(const CompletionRequest& request);
  // OK unless `text_bytes` of prompt text plus `fixed_tokens` verbatim ids
  // cannot fit the context, whatever the text tokenizes to: then the same
  // 400 context_length_exceeded (on `param`) that CheckPromptFits gives
  // after tokenizing. Costs no allocation that grows with the text.
  absl::Status CheckTextCanFit(size_t text_bytes, size_t fixed_tokens,
                               std::string_view param) const;
  // The prompt's tokens: chat messages rendered in the template's format
  // (ids segments verbatim).
  std::vector<int32_t> Tokenize(std::vector<PromptSegment> segments) const;
  // The output_constraint.h spec the reply must match ("" = free text):
  // a forced tool call, else the response format. InvalidArgument naming the
  // field when the grammar cannot enforce it.
  absl::StatusOr<std::string> ConstraintFor(const CompletionRequest& request) const;
  // choices[0].logprobs for `tokens` (null unless the request asked).
  nlohmann::json LogprobsJson(const CompletionRequest& request,
                              std::span<const TokenLogprobs> tokens, size_t text_offset) const;
  void Respond(const CompletionRequest& request, std::unique_ptr<Slot> slot,
               std::unique_ptr<GenerationStream> stream, httplib::Response& res);
  void RespondStreaming(const CompletionRequest& request, std::unique_ptr<Slot> slot,
                        std::unique_ptr<GenerationStream> stream, httplib::Response& res);

  GenerationBackend& backend_;
  PrefixCache& cache_;
  const ServedModels& models_;
  const ChatRenderer& renderer_;
  const CompletionHandlerOptions options_;
  ReplyStore replies_;
  Admission admission_;
  Admission large_bodies_;  // turns of max_large_bodies
  // The most bytes of text one token of the vocabulary stands for.
  const size_t max_token_bytes_;
  std::atomic<bool> stopping_{false};
};

}  // namespace ringlm

#endif  // RINGLM_API_COMPLETION_HANDLER_H_
