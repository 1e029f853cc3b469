// The head node's OpenAI-compatible HTTP API.
//
// Endpoints:
//   POST /v1/chat/completions, POST /v1/completions, POST /v1/responses (stream or not),
//        served by the model the request's `model` names (see ModelLanes)
//   GET  /v1/models, GET /v1/models/{id}: every name of every model, with its
//        model's "root" (primary name), "state" ("ready" or "loading") and
//        "plan" (its stages' layer ranges)
//   GET  /v1/topology[?model=NAME]   that model's (default: the first's)
//        TopologyJson(), for the web page
//   GET  /health        200 {"status":"ok"} when every model's backend is
//                       Ready(), else 503 naming one that is not
//   POST /v1/admin/models   loads a model (ApiOptions.load_model; API key)
//   POST /v1/admin/models/{name}/unload   removes one (ApiOptions.unload_model)
//   GET  /              the embedded web chat page (404 when not built in)
// With an api_key, every /v1/ path needs "Authorization: Bearer <key>" (the
// scheme in any case); /health and / do not. Errors have OpenAI's shape (see
// api_error.h for the codes).
//
// Every request passes, in order (each failure answers at once and reads no
// body): the connection gate (http_connection_gate.h: header deadline, size
// limits, connection bound), the Host check (403 unless a known name of this
// server; against DNS rebinding), the Origin check (a cross-site browser
// request from an origin not in cors_origins gets 403; an allowed origin's
// preflight gets 204 before the key check; see host_check.h), the API key.
// A completion request is then parsed within json_limits, admitted (it waits
// in a bounded line past the running limit; 429 with Retry-After when the
// line is full), and only then rendered and tokenized.
#ifndef RINGLM_API_OPENAI_SERVER_H_
#define RINGLM_API_OPENAI_SERVER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "api/admission.h"
#include "api/generation_backend.h"
#include "api/json_limits.h"
#include "api/model_admin.h"
#include "api/prefix_cache.h"
#include "chat/chat_renderer.h"
#include "chat/reply_store.h"

namespace ringlm {

// One model the API serves.
struct ApiModel {
  GenerationBackend* backend = nullptr;  // not owned; must outlive the server
  // What requests may give as `model` and /v1/models lists; the first is the
  // primary, reported when a request names none. Empty = backend->model_id().
  std::vector<std::string> names;
};

struct ApiOptions {
  // The address the API binds. Loopback only by default: "0.0.0.0" (every
  // interface) exposes it to the network, and Start logs a warning when that
  // happens without an api_key.
  std::string host = "127.0.0.1";
  uint16_t port = 8080;             // 0 = any free port (see ApiServer::port())
  std::string api_key;              // empty = no authentication
  size_t max_body_bytes = 4 << 20;  // larger request bodies get 413, unread
  // Generations running at once, and the line waiting behind them (429 with
  // Retry-After when it is full).
  AdmissionOptions admission;

  // Connections (see ConnectionLimits).
  int max_connections = 512;  // open at once; past it 503 and close
  // The request line and headers must arrive within this, in total.
  std::chrono::milliseconds header_timeout{10000};
  size_t max_header_bytes = 32 << 10;             // larger heads get 431
  std::chrono::milliseconds body_timeout{60000};  // the whole body, once headers are in
  // Request bodies held at once, summed (503 past it): bounds the memory a
  // flood of large bodies can take (max_connections x max_body_bytes is 2 GiB).
  uint64_t max_body_bytes_in_flight = uint64_t{256} << 20;

  // Browsers (see host_check.h). Host names or addresses, besides localhost,
  // 127.0.0.1, ::1, the bound host (and the machine's own addresses and name
  // when bound to 0.0.0.0), that requests may be addressed to; any port; "*"
  // turns the Host check off.
  std::vector<std::string> allowed_hosts;
  // Origins ("https://app.example:8443") whose web pages may call the API;
  // "*" = any. Empty = CORS off: cross-site browser requests get 403.
  std::vector<std::string> cors_origins;

  // Request bodies: JSON nesting and element bounds.
  JsonLimits json_limits;
  // false (default): special-token text in message content ("<|im_start|>")
  // stays plain text and only the chat template's markers become control
  // tokens. true: the old behaviour, content can write control tokens.
  bool parse_special_in_content = false;

  PrefixCacheOptions prefix_cache;
  // Chat replies kept as their generated ids (docs/reply-ids.md); no flag.
  ReplyStoreOptions replies;

  // A request naming no model served gets the first model (reported by its
  // primary name) instead of 404 model_not_found.
  bool accept_any_model = false;

  // --chat-template, for every model: empty = each model's own template (or a
  // built-in format when the Jinja engine cannot run it). Start fails when
  // what it names cannot be used with some model.
  ChatTemplateChoice chat_template;

  // POST /v1/admin/models {"name", "path", "memory_mb"} loads a model while
  // the server runs: this loads it on the daemon and returns its backend and
  // names, which the API then serves. Unset = no such route (404). A load
  // call needs the API key: without one configured, it gets 403.
  std::function<absl::StatusOr<ApiModel>(const ModelLoadRequest&)> load_model;
  // POST /v1/admin/models/{name}/unload [{"drain_s": S}]: the server stops
  // routing to the model, then this drains its requests for up to S seconds
  // (default 30), ends the rest and removes it from the daemon; returns how
  // many it ended. Unset = no such route. The API key, as for load_model.
  std::function<absl::StatusOr<size_t>(const std::string& name, std::chrono::milliseconds drain)>
      unload_model;
};

// Serves the API on its own threads: an accept thread plus one thread per
// open connection (at most max_connections, joined at Stop). HTTP threads
// never touch model state: they tokenize, submit to the named model's
// backend, and read the results through a GenerationStream whose handle
// cancels the request when the client goes away.
//
// Each model has its own backend, chat renderer, prefix cache and kept reply
// ids; admission (running slots and the line), large-body turns and every
// check before them are shared by all. Backends are not owned and must
// outlive the server. Start and Stop are for one controlling thread; the
// rest is internal. Start ignores SIGPIPE for the
// whole process (the HTTP library writes to sockets without MSG_NOSIGNAL, and
// a client that hangs up must not kill the node).
class ApiServer {
 public:
  // Precondition: at least one model (else Start fails).
  ApiServer(ApiOptions options, std::vector<ApiModel> models);
  // One model, under its backend's model_id().
  ApiServer(ApiOptions options, GenerationBackend* backend);
  ~ApiServer();  // Stop()s
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds options.host:options.port and serves on a thread of its own.
  // Returns once the server accepts connections. InvalidArgument when there
  // is no model, or two models (or one, twice) claim a name; the
  // chat_template's error when a model cannot use it; Unavailable when the
  // port cannot be bound; FailedPrecondition when already started.
  absl::Status Start();
  // The bound port (the chosen one when options.port was 0); 0 before Start.
  uint16_t port() const;
  // Serves one more model from now on (a model loaded by the daemon, e.g.
  // from its models file); the errors of the constructor's checks.
  absl::Status AddModel(ApiModel model);
  // Stops routing to the model `name` names (requests that hold it go on):
  // NotFound, or FailedPrecondition for the last model.
  absl::Status RemoveModel(const std::string& name);
  // Stops accepting, cancels running generations, joins the threads.
  // Idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringlm

#endif  // RINGLM_API_OPENAI_SERVER_H_
