#include "daemon/metrics_server.h"

#include <httplib.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/exclusive_port.h"

namespace ringlm {

MetricsServer::MetricsServer(const MetricsRegistry& registry) : registry_(registry) {}

MetricsServer::~MetricsServer() { Stop(); }

absl::Status MetricsServer::Start(const std::string& host, uint16_t port) {
  server_ = std::make_unique<httplib::Server>();
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry_.RenderPrometheusText(), kPrometheusContentType);
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

}  // namespace ringlm
