#include "daemon/metrics_server.h"

#include <httplib.h>

#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/exclusive_port.h"
#include "security/bearer_token.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

constexpr int kListenerThreads = 4;

}  // namespace

MetricsServer::MetricsServer(std::function<std::string()> render, std::string bearer_token)
    : render_(std::move(render)), bearer_token_(std::move(bearer_token)) {}

MetricsServer::~MetricsServer() { Stop(); }

absl::Status MetricsServer::Start(const std::string& host, uint16_t port) {
  server_ = std::make_unique<httplib::Server>();
  server_->new_task_queue = [] { return new httplib::ThreadPool(kListenerThreads); };
  server_->set_read_timeout(5, 0);
  server_->set_write_timeout(5, 0);
  server_->set_payload_max_length(0);
  server_->Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    if (!bearer_token_.empty() &&
        !BearerMatches(req.get_header_value("Authorization"), bearer_token_)) {
      res.status = 401;
      res.set_header("WWW-Authenticate", "Bearer realm=\"ringlm metrics\"");
      res.set_content("a bearer token is required (--metrics-token-file)\n", "text/plain");
      return;
    }
    res.set_content(render_(), kPrometheusContentType);
  });
  BindExclusively(*server_);
  const int bound = port == 0 ? server_->bind_to_any_port(host.c_str())
                              : (server_->bind_to_port(host.c_str(), port) ? port : -1);
  if (bound <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for /metrics on ", host, ":", port, " (is the port in use?)"));
  }
  port_ = static_cast<uint16_t>(bound);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // httplib 0.11 has no wait_until_ready: poll until it runs.
  for (int i = 0; i < 200 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return absl::OkStatus();
}

void MetricsServer::Stop() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetricsServer(
    const MetricsEndpoint& endpoint, std::function<std::string()> render,
    const std::string& advertise_host) {
  auto server = std::make_unique<MetricsServer>(std::move(render), endpoint.token);
  absl::Status s = server->Start(endpoint.host, endpoint.port);
  if (!s.ok() && endpoint.port_is_default) {
    spdlog::warn("{}; serving /metrics on a free port instead", std::string(s.message()));
    s = server->Start(endpoint.host, 0);
  }
  if (!s.ok()) return s;
  const bool any = endpoint.host.empty() || endpoint.host == "0.0.0.0" || endpoint.host == "::";
  spdlog::info("metrics at http://{}:{}/metrics{}", any ? advertise_host : endpoint.host,
               server->port(), endpoint.token.empty() ? "" : " (bearer token)");
  return server;
}

}  // namespace ringlm
