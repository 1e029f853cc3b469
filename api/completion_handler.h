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
#include "api/model_lanes.h"
#include "chat/chat_template.h"
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
};

// Thread-safe: one instance serves every HTTP thread, for every model. The
// lanes must outlive it, and so must the handler outlive every response it
// produced (ApiServer stops the HTTP server first).
//
// Order of work per request, cheapest first so that a flood costs little:
// parse the body (bounded by json_limits; a large body first waits for one of
// max_large_bodies turns, held until its prompt is made), pick the model's
// lane by name, take a running slot (one admission for all models: waiting
// in line for one; 429 when the line is full), and only then check
// readiness, render the chat template, refuse text too long for the context
// from its size alone, and tokenize. From then on the request touches its
// lane only.
//
// Chat replies are recorded in the lane's ReplyStore, and a chat prompt uses
// their generated ids where a request sends them back to the same model
// (RenderWithReplyIds), whether the prefix cache is on or off.
class CompletionHandler {
 public:
  // Precondition: lanes.status() is OK.
  CompletionHandler(const ModelLanes& lanes, CompletionHandlerOptions options);

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
  // What comes after admission and before Submit, on `lane`: readiness, the
  // prompt.
  absl::StatusOr<GenerationStream::Params> Prepare(const CompletionRequest& request,
                                                   ModelLane& lane);
  // The prompt's tokens: chat messages rendered in the template's format
  // (ids segments verbatim).
  std::vector<int32_t> Tokenize(const Tokenizer& tokenizer,
                                std::vector<PromptSegment> segments) const;
  void Respond(const CompletionRequest& request, const Tokenizer& tokenizer,
               std::unique_ptr<Slot> slot, std::unique_ptr<GenerationStream> stream,
               httplib::Response& res);
  void RespondStreaming(const CompletionRequest& request, const Tokenizer& tokenizer,
                        std::unique_ptr<Slot> slot, std::unique_ptr<GenerationStream> stream,
                        httplib::Response& res);

  const ModelLanes& lanes_;
  const CompletionHandlerOptions options_;
  Admission admission_;
  Admission large_bodies_;  // turns of max_large_bodies
  std::atomic<bool> stopping_{false};
};

}  // namespace ringlm

#endif  // RINGLM_API_COMPLETION_HANDLER_H_
