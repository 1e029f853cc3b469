// The models one daemon serves: a Node per model behind one gRPC server,
// and what the HTTP API and /metrics need of them.
#ifndef RINGLM_DAEMON_MODEL_HOST_H_
#define RINGLM_DAEMON_MODEL_HOST_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "api/model_admin.h"
#include "api/openai_server.h"
#include "base/metrics.h"
#include "daemon/cluster_backend.h"
#include "daemon/node.h"
#include "daemon/ring_server.h"

namespace ringlm {

// ModelHost
//
// Purpose: the daemon's models. Create makes a Node per model given at
// start; Start binds the one gRPC server (its identity and message limit
// from those models) and starts them; Load adds a model while the daemon
// serves, from a file on this machine, in memory no other model holds, so
// the other models' plans and requests are not touched; Unload removes one
// after draining its requests, and its memory part becomes free for Load.
// An unloaded model's Node stays (stopped, its memory given back) until the
// daemon exits, for calls still in flight; at most kMaxUnloaded of them.
// Memory: each model's part of this machine's memory is fixed when it is
// added (NodeOptions.memory_part); Load takes the memory the parts leave.
// Ownership: owns the nodes, their API backends, the server and the
// daemon's own metrics registry. Thread-safety: Start and Stop from one
// thread; the rest is thread-safe after Start.
class ModelHost {
 public:
  // `base`: every model's options but its file, names and memory part.
  // `models`: one per model at start, at least one.
  static absl::StatusOr<std::unique_ptr<ModelHost>> Create(NodeOptions base,
                                                           std::vector<NodeOptions> models);
  ~ModelHost();

  // Binds the gRPC server (`options` without identity, API key and message
  // limit: those come from the models) and starts every node. With
  // `loads_at_run_time` (a models file, or the admin API), the message limit
  // also admits the steps of models up to kMaxLoadableEmbd wide, so that a
  // model loaded later is not refused for its width.
  absl::Status Start(RingServerOptions options, bool loads_at_run_time);
  static constexpr uint32_t kMaxLoadableEmbd = 16384;
  // Stops every node, then the server. Idempotent.
  void Stop();

  // The models as the API serves them, in order.
  std::vector<ApiModel> ApiModels() const;
  // Loads `request`'s model while serving (ApiOptions.load_model):
  //   FailedPrecondition: not enough memory left on this node, or its steps
  //     are larger than the server accepts (fixed at start);
  //   AlreadyExists: the name is taken;
  //   FailedPrecondition: kMaxModels are served already;
  //   the model file's own error (a missing file, a GGUF that does not parse).
  absl::StatusOr<ApiModel> Load(const ModelLoadRequest& request);

  // Removes the model served as `name`: refuses its new requests, waits up
  // to `drain` for the running ones this node started, ends the rest with an
  // error, stops its ring member and gives back its memory. Returns how many
  // requests were ended. NotFound for a name not served here;
  // FailedPrecondition for the last model, or past kMaxUnloaded.
  absl::StatusOr<size_t> Unload(const std::string& name, std::chrono::milliseconds drain);
  static constexpr size_t kMaxUnloaded = 32;
  // Models one daemon serves at once at most (each runs a ring's threads).
  static constexpr size_t kMaxModels = 16;

  // The daemon's own metrics (the API's admission), then each model's,
  // labelled model="NAME" when there are several.
  std::string RenderMetrics() const;
  MetricsRegistry& daemon_metrics() { return daemon_metrics_; }
  // The host other nodes dial (after Start).
  std::string advertise_host() const;
  // Every node (and every node loaded later) reports this HTTP API.
  void SetApiAddress(const std::string& host, uint16_t port);

 private:
  struct Served {
    std::unique_ptr<Node> node;
    std::unique_ptr<ClusterBackend> backend;
  };
  explicit ModelHost(NodeOptions base) : base_(std::move(base)) {}
  // Starts `node` behind the server and makes its backend.
  absl::Status StartModel(Served& served) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the models hold of this machine's memory (those draining too).
  uint64_t HeldBytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The model served under `name`, or models_.end().
  std::vector<Served>::iterator FindServed(const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const NodeOptions base_;
  MetricsRegistry daemon_metrics_;
  std::unique_ptr<RingServer> server_;
  mutable absl::Mutex mu_;
  std::vector<Served> models_ ABSL_GUARDED_BY(mu_);
  std::vector<Served> unloaded_ ABSL_GUARDED_BY(mu_);  // stopped; see Unload
  uint64_t draining_bytes_ ABSL_GUARDED_BY(mu_) = 0;   // of models being unloaded
  std::string api_host_ ABSL_GUARDED_BY(mu_);
  uint16_t api_port_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_MODEL_HOST_H_
