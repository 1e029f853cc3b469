// POST /v1/chat/completions and /v1/completions: from the request body to a
// whole response or an SSE stream. Internal to ApiServer.
#ifndef RINGLM_API_COMPLETION_HANDLER_H_
#define RINGLM_API_COMPLETION_HANDLER_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "api/completion_request.h"
#include "api/generation_backend.h"
#include "api/generation_stream.h"
#include "api/prefix_cache.h"
#include "httplib.h"
#include "inference/chat_template.h"

namespace ringlm {

// Writes `status` (not OK) as the response: HTTP code and OpenAI error JSON.
void SetErrorResponse(const absl::Status& status, httplib::Response& res);

// Thread-safe: one instance serves every HTTP thread. The backend and cache
// must outlive it, and so must the handler itself outlive every response it
// produced (ApiServer stops the HTTP server first).
class CompletionHandler {
 public:
  CompletionHandler(GenerationBackend& backend, PrefixCache& cache, bool keep_sessions,
                    int max_concurrent, ChatFormat format);

  void HandleChat(const httplib::Request& req, httplib::Response& res);
  void HandleText(const httplib::Request& req, httplib::Response& res);

  // Makes every waiting or streaming request give up (server shutdown).
  void Shutdown() { stopping_ = true; }

 private:
  class Slot;  // one unit of max_concurrent, released on destruction
  void Handle(absl::StatusOr<CompletionRequest> parsed, httplib::Response& res);
  // Everything before Submit that can fail: model, readiness, load, prompt.
  absl::StatusOr<GenerationStream::Params> Prepare(const CompletionRequest& request);
  void Respond(const CompletionRequest& request, std::unique_ptr<Slot> slot,
               std::unique_ptr<GenerationStream> stream, httplib::Response& res);
  void RespondStreaming(const CompletionRequest& request, std::unique_ptr<Slot> slot,
                        std::unique_ptr<GenerationStream> stream, httplib::Response& res);

  GenerationBackend& backend_;
  PrefixCache& cache_;
  const bool keep_sessions_;
  const int max_concurrent_;
  const ChatFormat format_;
  std::atomic<int> running_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace ringlm

#endif  // RINGLM_API_COMPLETION_HANDLER_H_
