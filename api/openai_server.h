// The head node's OpenAI-compatible HTTP API.
//
// Endpoints:
//   POST /v1/chat/completions, POST /v1/completions  (stream or not)
//   GET  /v1/models, GET /v1/models/{id}
//   GET  /v1/topology   the backend's TopologyJson(), for the web page
//   GET  /health        200 {"status":"ok"} when the backend is Ready(), else 503
//   GET  /              the embedded web chat page (404 when not built in)
// With an api_key, every /v1/ path needs "Authorization: Bearer <key>"; /health
// and / do not. Errors have OpenAI's shape (see api_error.h for the codes).
#ifndef RINGLM_API_OPENAI_SERVER_H_
#define RINGLM_API_OPENAI_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "api/generation_backend.h"
#include "api/prefix_cache.h"

namespace ringlm {

struct ApiOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8080;             // 0 = any free port (see ApiServer::port())
  std::string api_key;              // empty = no authentication
  size_t max_body_bytes = 4 << 20;  // larger request bodies get 413
  int max_concurrent = 64;          // generations running at once; more get 503
  PrefixCacheOptions prefix_cache;
};

// Serves the API on its own threads: an accept thread plus a pool of HTTP
// worker threads (max_concurrent + 8, at least 16). HTTP threads never touch
// model state: they tokenize, submit to `backend`, and read the results
// through a GenerationStream whose handle cancels the request when the client
// goes away.
//
// `backend` is not owned and must outlive the server. Start and Stop are for
// one controlling thread; the rest is internal. Start ignores SIGPIPE for the
// whole process (the HTTP library writes to sockets without MSG_NOSIGNAL, and
// a client that hangs up must not kill the node).
class ApiServer {
 public:
  ApiServer(ApiOptions options, GenerationBackend* backend);
  ~ApiServer();  // Stop()s
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds options.host:options.port and serves on a thread of its own.
  // Returns once the server accepts connections. Unavailable when the port
  // cannot be bound; FailedPrecondition when already started.
  absl::Status Start();
  // The bound port (the chosen one when options.port was 0); 0 before Start.
  uint16_t port() const;
  // Stops accepting, cancels running generations, joins the threads.
  // Idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringlm

#endif  // RINGLM_API_OPENAI_SERVER_H_
