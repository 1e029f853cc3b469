// Serves GET /metrics (Prometheus text) for a daemon's registries on its
// own port.
#ifndef RINGLM_DAEMON_METRICS_SERVER_H_
#define RINGLM_DAEMON_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/metrics.h"

namespace httplib {
class Server;
}

namespace ringlm {

// The host /metrics binds unless told otherwise: the metrics say how busy
// the node is and how its caches are used, which is nobody else's business.
inline constexpr char kDefaultMetricsHost[] = "127.0.0.1";

// MetricsServer
//
// Purpose: one plain-HTTP listener for GET /metrics. With a bearer token,
// a request without "Authorization: Bearer <token>" gets 401 (compared in
// constant time); without one, any client that reaches the port may read.
// What it serves: `render()`'s Prometheus text (the daemon's registries as
// one exposition: ModelHost::RenderMetrics).
// Ownership: owns its listener and its threads (4 at most: scrapes are rare);
// what `render` reads must outlive it. Start binds (port 0 = any free port) and
// returns once serving; Start may be called again after a failed Start.
// Stop (also run by the destructor) stops and joins.
// Thread-safety: Start, Stop and port() from one thread; requests are
// served on the listener's threads.
// Limits: 5 s per read and write, 8 KiB request line and headers, no body.
class MetricsServer {
 public:
  // `bearer_token` empty = no token needed.
  // `render` is called on the listener's threads, and must be thread-safe.
  explicit MetricsServer(std::function<std::string()> render, std::string bearer_token = "");
  ~MetricsServer();

  absl::Status Start(const std::string& host, uint16_t port);
  void Stop();
  uint16_t port() const { return port_; }

 private:
  const std::function<std::string()> render_;
  const std::string bearer_token_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

// Where and how a daemon serves /metrics (ringlmd's --metrics-* flags).
struct MetricsEndpoint {
  // Port 0 = any free port.
  uint16_t port = 0;
  // Loopback unless asked: plain HTTP, readable by whoever reaches it.
  std::string host = kDefaultMetricsHost;
  // When set, /metrics needs "Authorization: Bearer <token>".
  std::string token;
  // The port was derived (gRPC port + 1000), not asked for: when something
  // else holds it, /metrics moves to a free port (with a warning) instead of
  // the daemon failing to start.
  bool port_is_default = false;
};

// A started MetricsServer at `endpoint` serving `render()`, its address
// logged (`advertise_host` standing for a wildcard host); Unavailable when
// the port cannot be bound.
absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetricsServer(
    const MetricsEndpoint& endpoint, std::function<std::string()> render,
    const std::string& advertise_host);

}  // namespace ringlm

#endif  // RINGLM_DAEMON_METRICS_SERVER_H_
