// The cluster as the HTTP API sees it: a GenerationBackend over this node's
// origin registry and current plan.
#ifndef RINGLM_DAEMON_CLUSTER_BACKEND_H_
#define RINGLM_DAEMON_CLUSTER_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "api/generation_backend.h"
#include "daemon/membership/cluster_view.h"
#include "daemon/origin/origin.h"
#include "inference/model.h"

namespace ringlm {

// What the backend uses of its node (Node::BackendParts). Pointers are
// borrowed and must outlive the backend; the functions must be thread-safe.
struct ClusterBackendParts {
  OriginRegistry* origin = nullptr;  // requests are submitted to it
  const Model* model = nullptr;      // tokenizer, name, chat template, context
  // The cluster as this node's view has it now.
  std::function<std::shared_ptr<const ClusterSnapshot>()> cluster;
  // OK when every member of the plan agrees on it now (no waiting), else
  // Unavailable with the reason.
  std::function<absl::Status()> serving;
  // This node, as the topology shows it.
  std::string node_id;
  std::function<std::string()> address;
  uint64_t usable_memory_bytes = 0;
  std::string security_mode;  // "mutual-tls" or "insecure"
};

// ClusterBackend
//
// Purpose: submits API requests as origin requests on the current plan
// (OriginRegistry::Prepare checks them, and awaits a serving plan, once for
// every frontend); reports readiness and the topology for /health and the
// web page. Thread-safe.
class ClusterBackend : public GenerationBackend {
 public:
  explicit ClusterBackend(ClusterBackendParts parts);

  absl::StatusOr<std::unique_ptr<GenerationHandle>> Submit(
      GenerationRequest request, std::function<void(const GenerationEvent&)> on_event) override;
  absl::Status Ready() const override;
  void DropSession(const std::string& session_id) override;
  const Tokenizer& tokenizer() const override;
  std::string model_id() const override;
  std::string chat_template() const override;
  uint32_t context_size() const override;
  std::string TopologyJson() const override;

 private:
  const ClusterBackendParts parts_;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_CLUSTER_BACKEND_H_
