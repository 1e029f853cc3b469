#include "api/openai_server.h"

#include <algorithm>
#include <csignal>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/api_error.h"
#include "api/completion_handler.h"
#include "api/openai_format.h"
#include "api/web_page.h"
#include "httplib.h"
#include "inference/chat_template.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

// Compares without an early exit, so the time taken does not reveal how much
// of a guessed key was right.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace

struct ApiServer::Impl {
  Impl(ApiOptions opts, GenerationBackend* b)
      : options(std::move(opts)),
        backend(b),
        format(DetectChatFormat(backend->chat_template())),
        cache(options.prefix_cache,
              [b](const std::string& session_id) { b->DropSession(session_id); }),
        completions(*backend, cache, options.prefix_cache.enabled, options.max_concurrent, format),
        created(absl::ToUnixSeconds(absl::Now())) {}

  void Route();
  bool Authorized(const httplib::Request& req) const;

  const ApiOptions options;
  GenerationBackend* const backend;
  const ChatFormat format;
  PrefixCache cache;
  CompletionHandler completions;
  const int64_t created;
  httplib::Server server;
  std::thread thread;
  int port = 0;
  bool started = false;
};

bool ApiServer::Impl::Authorized(const httplib::Request& req) const {
  if (options.api_key.empty()) return true;
  const std::string header = req.get_header_value("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (std::string_view(header).substr(0, kBearer.size()) != kBearer) return false;
  return ConstantTimeEquals(std::string_view(header).substr(kBearer.size()), options.api_key);
}

void ApiServer::Impl::Route() {
  server.set_payload_max_length(options.max_body_bytes);
  const size_t threads = static_cast<size_t>(std::clamp(options.max_concurrent + 8, 16, 512));
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };

  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path.rfind("/v1/", 0) != 0 || Authorized(req)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    SetErrorResponse(absl::UnauthenticatedError(
                         "Missing or incorrect API key: send 'Authorization: Bearer <key>'"),
                     res);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Statuses httplib sets by itself (no route, body too large, bad request
  // line) arrive here with an empty body; ours already carry their JSON.
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.content_provider_) return;
    absl::Status status;
    switch (res.status) {
      case 404:
        status = absl::NotFoundError(absl::StrCat("No route for ", req.method, " ", req.path));
        break;
      case 413:
        status = absl::OutOfRangeError("The request body is too large");
        break;
      case 400:
        status = absl::InvalidArgumentError("Malformed HTTP request");
        break;
      default:
        status = absl::UnknownError(absl::StrCat("HTTP status ", res.status));
        break;
    }
    const int http_status = res.status;
    SetErrorResponse(status, res);
    if (status.code() == absl::StatusCode::kUnknown) res.status = http_status;
  });
  server.set_exception_handler([](const httplib::Request& req, httplib::Response& res,
                                  std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SetErrorResponse(
        absl::InternalError(absl::StrCat("Internal error handling ", req.path, ": ", what)), res);
  });

  server.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completions.HandleChat(req, res);
  });
  server.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completions.HandleText(req, res);
  });
  auto model_json = [this] {
    return nlohmann::json{{"id", backend->model_id()},
                          {"object", "model"},
                          {"created", created},
                          {"owned_by", "ringlm"}};
  };
  server.Get("/v1/models", [model_json](const httplib::Request&, httplib::Response& res) {
    nlohmann::json list = {{"object", "list"}, {"data", nlohmann::json::array({model_json()})}};
    res.set_content(DumpJson(list), "application/json");
  });
  server.Get("/v1/models/(.+)", [this, model_json](const httplib::Request& req,
                                                   httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != backend->model_id()) {
      return SetErrorResponse(
          WithOpenAiCode(absl::NotFoundError(absl::StrCat("The model '", id, "' does not exist")),
                         "model_not_found", "model"),
          res);
    }
    res.set_content(DumpJson(model_json()), "application/json");
  });
  server.Get("/v1/topology", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(backend->TopologyJson(), "application/json");
  });
  server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (absl::Status ready = backend->Ready(); !ready.ok()) {
      return SetErrorResponse(absl::UnavailableError(std::string(ready.message())), res);
    }
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    const std::string_view page = EmbeddedWebPage();
    if (page.empty()) {
      res.status = 404;
      res.set_content("The web page was not built into this binary.\n", "text/plain");
      return;
    }
    res.set_content(std::string(page), "text/html; charset=utf-8");
  });
}

ApiServer::ApiServer(ApiOptions options, GenerationBackend* backend)
    : impl_(std::make_unique<Impl>(std::move(options), backend)) {}

ApiServer::~ApiServer() { Stop(); }

absl::Status ApiServer::Start() {
  if (impl_->started || impl_->thread.joinable()) {
    return absl::FailedPreconditionError("the API server was already started");
  }
  std::signal(SIGPIPE, SIG_IGN);
  impl_->Route();
  const ApiOptions& o = impl_->options;
  int port = o.port;
  if (o.port == 0) {
    port = impl_->server.bind_to_any_port(o.host);
  } else if (!impl_->server.bind_to_port(o.host, o.port)) {
    port = -1;
  }
  if (port <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot bind the API to ", o.host, ":", o.port));
  }
  impl_->port = port;
  impl_->started = true;
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
  // httplib 0.11.4 has no wait_until_ready(): poll is_running().
  for (int i = 0; i < 5000 && !impl_->server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  spdlog::info("api: serving {} on http://{}:{} (chat format {}, prefix cache {})",
               impl_->backend->model_id(), o.host, port, FormatName(impl_->format),
               o.prefix_cache.enabled ? "on" : "off");
  return absl::OkStatus();
}

uint16_t ApiServer::port() const { return static_cast<uint16_t>(impl_->port); }

void ApiServer::Stop() {
  if (!impl_->started) return;
  impl_->started = false;
  impl_->completions.Shutdown();
  // stop() before the accept loop runs does nothing: wait for it first.
  for (int i = 0; i < 5000 && !impl_->server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace ringlm
