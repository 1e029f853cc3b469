#include "api/openai_server.h"

#include <malloc.h>

#include <algorithm>
#include <csignal>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "api/api_error.h"
#include "api/completion_handler.h"
#include "api/host_check.h"
#include "api/http_connection_gate.h"
#include "api/model_lanes.h"
#include "api/openai_format.h"
#include "api/web_page.h"
#include "base/exclusive_port.h"
#include "chat/chat_template.h"
#include "httplib.h"
#include "security/bearer_token.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

// The header's value, or nullopt when the request has none.
std::optional<std::string> Header(const httplib::Request& req, const char* name) {
  if (!req.has_header(name)) return std::nullopt;
  return req.get_header_value(name);
}

ConnectionLimits LimitsOf(const ApiOptions& o) {
  ConnectionLimits limits;
  limits.header_timeout = o.header_timeout;
  limits.max_header_bytes = o.max_header_bytes;
  limits.max_connections = o.max_connections;
  limits.max_body_bytes = o.max_body_bytes;
  limits.body_timeout = o.body_timeout;
  limits.max_body_bytes_in_flight = o.max_body_bytes_in_flight;
  return limits;
}

// The request body, read into one buffer sized from the Content-Length,
// which the connection gate has already held to max_body_bytes: httplib's
// own reading grows the body by doubling, touching up to twice its size. A
// chunked body (no Content-Length) grows as it comes, up to max_body_bytes.
// OutOfRange (413) past that; InvalidArgument when the body cannot be read.
absl::StatusOr<std::string> ReadBody(const httplib::Request& req,
                                     const httplib::ContentReader& reader, size_t max_body_bytes) {
  std::string body;
  uint64_t length = 0;
  if (absl::SimpleAtoi(req.get_header_value("Content-Length"), &length)) {
    body.reserve(std::min<uint64_t>(length, max_body_bytes));
  }
  bool too_large = false;
  const bool read = reader([&](const char* data, size_t n) {
    if (n > max_body_bytes - body.size()) {
      too_large = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (too_large) return absl::OutOfRangeError("The request body is too large");
  if (!read) return absl::InvalidArgumentError("The request body could not be read");
  return body;
}

// After a request with a body at least this large, free heap memory goes
// back to the system: glibc keeps what such a request freed, so that after
// a flood of large bodies the process would hold its peak for good.
constexpr size_t kTrimAfterBodyBytes = 1 << 20;

void TrimHeap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

CompletionHandlerOptions HandlerOptionsOf(const ApiOptions& o) {
  CompletionHandlerOptions h;
  h.keep_sessions = o.prefix_cache.enabled;
  h.admission = o.admission;
  h.json_limits = o.json_limits;
  h.max_body_bytes = o.max_body_bytes;
  h.parse_special_in_content = o.parse_special_in_content;
  return h;
}

// What /v1/models tells of a model's plan, from its TopologyJson() (see
// ClusterBackend): the layer count and the stages in layer order, each a
// node and its layer range. nullopt when the topology is not a JSON object.
std::optional<nlohmann::json> PlanOf(const std::string& topology_json) {
  const nlohmann::json topology = nlohmann::json::parse(topology_json, nullptr, false);
  if (!topology.is_object()) return std::nullopt;
  nlohmann::json stages = nlohmann::json::array();
  if (const auto nodes = topology.find("nodes"); nodes != topology.end() && nodes->is_array()) {
    for (const nlohmann::json& node : *nodes) {
      const auto layers = node.find("layers");
      if (!node.is_object() || layers == node.end() || !layers->is_array() || layers->size() != 2) {
        continue;
      }
      stages.push_back({{"node_id", node.value("node_id", "")}, {"layers", *layers}});
    }
  }
  std::sort(stages.begin(), stages.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["layers"][0] < b["layers"][0];
  });
  nlohmann::json plan = {{"stages", std::move(stages)}};
  if (const auto n = topology.find("n_layers"); n != topology.end()) plan["n_layers"] = *n;
  return plan;
}

}  // namespace

struct ApiServer::Impl {
  Impl(ApiOptions opts, std::vector<ApiModel> models)
      : options(std::move(opts)),
        lanes(std::move(models), options),
        completions(lanes, HandlerOptionsOf(options)),
        created(absl::ToUnixSeconds(absl::Now())),
        server(LimitsOf(options)) {}

  void Route();
  // A route that reads the body itself (see ReadBody), then calls `handle`.
  httplib::Server::HandlerWithContentReader WithBody(
      void (CompletionHandler::*handle)(std::string_view, httplib::Response&));
  bool Authorized(const httplib::Request& req) const;
  // Host, Origin (and CORS preflight), API key: false when `res` holds the
  // refusal or the preflight's answer.
  bool Admit(const httplib::Request& req, httplib::Response& res) const;
  // A /v1/models entry: `name`, one of `lane`'s names; "root" is the lane's
  // primary name, shared by its aliases (the web page's picker lists roots).
  nlohmann::json ModelJson(const std::string& name, const ModelLane& lane) const;

  // POST /v1/admin/models: loads the model the body names, then serves it.
  void LoadModel(std::string_view body, httplib::Response& res);
  // POST /v1/admin/models/{name}/unload: stops serving it, then unloads it.
  void UnloadModel(const std::string& name, std::string_view body, httplib::Response& res);
  // OK when a key is configured (Admit checked it); else PermissionDenied.
  absl::Status AdminAllowed() const;

  const ApiOptions options;
  ModelLanes lanes;
  CompletionHandler completions;
  const int64_t created;
  std::optional<HostCheck> host_check;  // built at Start (it reads the interfaces)
  GatedHttpServer server;
  std::thread thread;
  int port = 0;
  bool started = false;
};

bool ApiServer::Impl::Authorized(const httplib::Request& req) const {
  if (options.api_key.empty()) return true;
  return BearerMatches(req.get_header_value("Authorization"), options.api_key);
}

bool ApiServer::Impl::Admit(const httplib::Request& req, httplib::Response& res) const {
  const std::optional<std::string> host = Header(req, "Host");
  if (req.get_header_value_count("Host") > 1) {
    SetErrorResponse(absl::InvalidArgumentError("More than one Host header"), res);
    return false;
  }
  if (!host_check->HostAllowed(host)) {
    SetErrorResponse(
        absl::PermissionDeniedError(absl::StrCat(
            "Requests addressed to host '", *host,
            "' are refused (protection against DNS rebinding). If this server is meant to be "
            "reached by that name, allow it: ringlmd --api-allowed-host ",
            HostOfHeader(*host).value_or(*host), " (ApiOptions.allowed_hosts)")),
        res);
    return false;
  }
  const std::optional<std::string> origin = Header(req, "Origin");
  const HostCheck::OriginVerdict verdict = host_check->CheckOrigin(origin, host);
  const bool preflight = req.method == "OPTIONS" && origin.has_value() &&
                         req.has_header("Access-Control-Request-Method");
  if (verdict == HostCheck::OriginVerdict::kDenied) {
    SetErrorResponse(absl::PermissionDeniedError(absl::StrCat(
                         "Cross-origin requests from '", *origin,
                         "' are not allowed. To let web pages from that origin call this API, "
                         "allow it: ringlmd --api-cors-origin ",
                         *origin, " (ApiOptions.cors_origins)")),
                     res);
    return false;
  }
  if (preflight) {
    // Answered before the key check: browsers send no credentials here.
    res.status = 204;
    if (verdict == HostCheck::OriginVerdict::kAllowed) {
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "600");
    }
    return false;
  }
  if (req.path.rfind("/v1/", 0) == 0 && !Authorized(req)) {
    SetErrorResponse(absl::UnauthenticatedError(
                         "Missing or incorrect API key: send 'Authorization: Bearer <key>'"),
                     res);
    return false;
  }
  return true;
}

absl::Status ApiServer::Impl::AdminAllowed() const {
  // Admit() checked the key when there is one; without one, anyone who
  // reaches the port could make the daemon map files or drop models.
  if (!options.api_key.empty()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      "Loading and removing models needs an API key: start ringlmd with --api-key");
}

void ApiServer::Impl::UnloadModel(const std::string& name, std::string_view body,
                                  httplib::Response& res) {
  if (absl::Status s = AdminAllowed(); !s.ok()) return SetErrorResponse(s, res);
  absl::StatusOr<std::chrono::seconds> drain = ParseModelUnloadRequest(body, options.json_limits);
  if (!drain.ok()) return SetErrorResponse(drain.status(), res);
  // No new request finds it from here on; the running ones keep their lane.
  if (absl::Status s = lanes.Remove(name); !s.ok()) return SetErrorResponse(s, res);
  absl::StatusOr<size_t> ended = options.unload_model(name, *drain);
  if (!ended.ok()) return SetErrorResponse(ended.status(), res);
  spdlog::info("api: removed model {} ({} request(s) ended unfinished)", name, *ended);
  res.set_content(
      DumpJson(nlohmann::json{
          {"id", name}, {"object", "model"}, {"deleted", true}, {"ended_requests", *ended}}),
      "application/json");
}

void ApiServer::Impl::LoadModel(std::string_view body, httplib::Response& res) {
  if (absl::Status s = AdminAllowed(); !s.ok()) return SetErrorResponse(s, res);
  absl::StatusOr<ModelLoadRequest> request = ParseModelLoadRequest(body, options.json_limits);
  if (!request.ok()) return SetErrorResponse(request.status(), res);
  if (lanes.Find(request->name) != nullptr) {
    return SetErrorResponse(absl::AlreadyExistsError(
                                absl::StrCat("a model is already served as '", request->name, "'")),
                            res);
  }
  absl::StatusOr<ApiModel> model = options.load_model(*request);
  if (!model.ok()) return SetErrorResponse(model.status(), res);
  if (absl::Status s = lanes.Add(*model, options); !s.ok()) return SetErrorResponse(s, res);
  const ModelLane* lane = lanes.Find(request->name);
  spdlog::info("api: loaded model {} (as '{}')", lane->backend.model_id(),
               absl::StrJoin(lane->names, "', '"));
  res.status = 201;
  res.set_content(DumpJson(ModelJson(request->name, *lane)), "application/json");
}

nlohmann::json ApiServer::Impl::ModelJson(const std::string& name, const ModelLane& lane) const {
  nlohmann::json out = {{"id", name},
                        {"object", "model"},
                        {"created", created},
                        {"owned_by", "ringlm"},
                        {"root", lane.primary()},
                        {"state", lane.backend.Ready().ok() ? "ready" : "loading"}};
  if (std::optional<nlohmann::json> plan = PlanOf(lane.backend.TopologyJson())) {
    out["plan"] = *std::move(plan);
  }
  return out;
}

httplib::Server::HandlerWithContentReader ApiServer::Impl::WithBody(
    void (CompletionHandler::*handle)(std::string_view, httplib::Response&)) {
  return [this, handle](const httplib::Request& req, httplib::Response& res,
                        const httplib::ContentReader& reader) {
    size_t body_bytes = 0;
    {
      absl::StatusOr<std::string> body = ReadBody(req, reader, options.max_body_bytes);
      if (!body.ok()) return SetErrorResponse(body.status(), res);
      body_bytes = body->size();
      (completions.*handle)(*body, res);
    }
    if (body_bytes >= kTrimAfterBodyBytes) TrimHeap();
  };
}

void ApiServer::Impl::Route() {
  server.set_payload_max_length(options.max_body_bytes);
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return Admit(req, res) ? httplib::Server::HandlerResponse::Unhandled
                           : httplib::Server::HandlerResponse::Handled;
  });
  // Every response, refusals and errors included, to an allowed origin.
  server.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!host_check->cors_enabled()) return;
    res.set_header("Vary", "Origin");
    const std::optional<std::string> origin = Header(req, "Origin");
    if (host_check->CheckOrigin(origin, Header(req, "Host")) ==
        HostCheck::OriginVerdict::kAllowed) {
      res.set_header("Access-Control-Allow-Origin", *origin);
    }
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

  server.Post("/v1/chat/completions", WithBody(&CompletionHandler::HandleChat));
  server.Post("/v1/completions", WithBody(&CompletionHandler::HandleText));
  server.Post("/v1/responses", WithBody(&CompletionHandler::HandleResponses));
  if (options.load_model) {
    server.Post("/v1/admin/models", [this](const httplib::Request& req, httplib::Response& res,
                                           const httplib::ContentReader& reader) {
      absl::StatusOr<std::string> body = ReadBody(req, reader, options.max_body_bytes);
      if (!body.ok()) return SetErrorResponse(body.status(), res);
      LoadModel(*body, res);
    });
  }
  if (options.unload_model) {
    server.Post("/v1/admin/models/(.+)/unload",
                [this](const httplib::Request& req, httplib::Response& res,
                       const httplib::ContentReader& reader) {
                  absl::StatusOr<std::string> body = ReadBody(req, reader, options.max_body_bytes);
                  if (!body.ok()) return SetErrorResponse(body.status(), res);
                  UnloadModel(req.matches[1], *body, res);
                });
  }
  server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json data = nlohmann::json::array();
    for (const ModelLane* lane : lanes.lanes()) {
      nlohmann::json entry = ModelJson(lane->primary(), *lane);  // asks the backend once
      for (const std::string& name : lane->names) {
        entry["id"] = name;
        data.push_back(entry);
      }
    }
    res.set_content(DumpJson(nlohmann::json{{"object", "list"}, {"data", data}}),
                    "application/json");
  });
  server.Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    const ModelLane* lane = lanes.Find(name);
    if (lane == nullptr) return SetErrorResponse(lanes.NotFound(name), res);
    res.set_content(DumpJson(ModelJson(name, *lane)), "application/json");
  });
  server.Get("/v1/topology", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.get_param_value("model");
    const ModelLane* lane = name.empty() ? &lanes.first() : lanes.Find(name);
    if (lane == nullptr) return SetErrorResponse(lanes.NotFound(name), res);
    res.set_content(lane->backend.TopologyJson(), "application/json");
  });
  server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    for (const ModelLane* lane : lanes.lanes()) {
      if (absl::Status ready = lane->backend.Ready(); !ready.ok()) {
        return SetErrorResponse(
            absl::UnavailableError(
                absl::StrCat("model '", lane->primary(), "' is not ready: ", ready.message())),
            res);
      }
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

ApiServer::ApiServer(ApiOptions options, std::vector<ApiModel> models)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(models))) {}

ApiServer::ApiServer(ApiOptions options, GenerationBackend* backend)
    : ApiServer(std::move(options), std::vector<ApiModel>{{.backend = backend, .names = {}}}) {}

ApiServer::~ApiServer() { Stop(); }

absl::Status ApiServer::AddModel(ApiModel model) {
  return impl_->lanes.Add(std::move(model), impl_->options);
}

absl::Status ApiServer::RemoveModel(const std::string& name) { return impl_->lanes.Remove(name); }

absl::Status ApiServer::Start() {
  if (!impl_->lanes.status().ok()) return impl_->lanes.status();
  if (impl_->started || impl_->thread.joinable()) {
    return absl::FailedPreconditionError("the API server was already started");
  }
  std::signal(SIGPIPE, SIG_IGN);
  const ApiOptions& o = impl_->options;
  impl_->host_check.emplace(o.host, o.allowed_hosts, o.cors_origins);
  impl_->Route();
  int port = o.port;
  BindExclusively(impl_->server);
  if (o.port == 0) {
    port = impl_->server.bind_to_any_port(o.host);
  } else if (!impl_->server.bind_to_port(o.host, o.port)) {
    port = -1;
  }
  if (port <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot bind the API to ", o.host, ":", o.port));
  }
  // Room for a burst of connections (each is then served or refused at once).
  impl_->server.SetListenBacklog(std::clamp(o.max_connections, 16, 4096));
  impl_->port = port;
  impl_->started = true;
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
  // httplib 0.11.4 has no wait_until_ready(): poll is_running().
  for (int i = 0; i < 5000 && !impl_->server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  spdlog::info("api: serving on http://{}:{} (prefix cache {})", o.host, port,
               o.prefix_cache.enabled ? "on" : "off");
  for (const ModelLane* lane : impl_->lanes.lanes()) {
    spdlog::info("api: model {} (as '{}'; chat template {})", lane->backend.model_id(),
                 absl::StrJoin(lane->names, "', '"), lane->renderer.Describe());
    if (!lane->renderer.warning().empty()) {
      spdlog::warn("api: model {}: {}", lane->primary(), lane->renderer.warning());
    }
  }
  if (const std::string warning = ExposureWarning(o.host, !o.api_key.empty()); !warning.empty()) {
    spdlog::warn("{}", warning);
  }
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
