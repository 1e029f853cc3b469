// Serves GET /metrics (Prometheus text) for one registry on its own port.
#ifndef RINGLM_DAEMON_METRICS_SERVER_H_
#define RINGLM_DAEMON_METRICS_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "base/metrics.h"

namespace httplib {
class Server;
}

namespace ringlm {

// One HTTP listener thread, owned: Start binds (port 0 = any free port) and
// returns once serving; Stop (also run by the destructor) stops and joins.
// The registry must outlive it.
class MetricsServer {
 public:
  explicit MetricsServer(const MetricsRegistry& registry);
  ~MetricsServer();

  absl::Status Start(const std::string& host, uint16_t port);
  void Stop();
  uint16_t port() const { return port_; }

 private:
  const MetricsRegistry& registry_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_METRICS_SERVER_H_
