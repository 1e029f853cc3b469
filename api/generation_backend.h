// What the HTTP API needs from the cluster: submit a tokenized request,
// receive its tokens, cancel it. The daemon implements it on top of the
// origin registry; tests use a fake.
#ifndef RINGLM_API_GENERATION_BACKEND_H_
#define RINGLM_API_GENERATION_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/origin/generation_request.h"
#include "inference/sampling/logprobs.h"
#include "inference/sampling/sampling_params.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };

// One step of a running request, in order. The first event of a request
// carries `cached_tokens` (prompt positions taken from the cache); the last
// one has a finish reason.
struct GenerationEvent {
  bool has_token = false;
  int32_t token = -1;
  uint32_t cached_tokens = 0;
  FinishReason finish = FinishReason::kNone;
  absl::Status error;                     // with kError
  std::optional<TokenLogprobs> logprobs;  // with the token, when asked for
};

// A running request. Destroying the handle cancels the request if it is
// still running; Cancel may be called from any thread, more than once.
class GenerationHandle {
 public:
  virtual ~GenerationHandle() = default;
  virtual void Cancel() = 0;
};

// Thread-safe. `on_event` is called from backend threads, never
// concurrently for one request, and must not block.
class GenerationBackend {
 public:
  virtual ~GenerationBackend() = default;

  // Unavailable when the cluster cannot serve the model (a settling
  // cluster is awaited here, briefly: the one wait for readiness on a
  // request's path); ResourceExhausted when overloaded; InvalidArgument for
  // a bad request (e.g. the prompt does not fit the context).
  virtual absl::StatusOr<std::unique_ptr<GenerationHandle>> Submit(
      GenerationRequest request, std::function<void(const GenerationEvent&)> on_event) = 0;

  // Whether Submit can succeed now, and why not (for /health: no waiting).
  virtual absl::Status Ready() const = 0;
  // Drops a kept session on every stage (an eviction from the session map).
  virtual void DropSession(const std::string& session_id) = 0;

  virtual const Tokenizer& tokenizer() const = 0;
  virtual std::string model_id() const = 0;       // e.g. the GGUF file's base name
  virtual std::string chat_template() const = 0;  // tokenizer.chat_template, may be empty
  virtual uint32_t context_size() const = 0;
  // The cluster as JSON text for the web page (nodes, layer ranges, states).
  virtual std::string TopologyJson() const = 0;
};

}  // namespace ringlm

#endif  // RINGLM_API_GENERATION_BACKEND_H_
