// The cluster as the HTTP API sees it: a GenerationBackend over this node's
// origin registry and current plan.
#ifndef RINGLM_DAEMON_CLUSTER_BACKEND_H_
#define RINGLM_DAEMON_CLUSTER_BACKEND_H_

#include <memory>
#include <string>

#include "api/generation_backend.h"
#include "daemon/node.h"

namespace ringlm {

// Submits API requests as origin requests on the current plan. The node
// must outlive it. Thread-safe.
class ClusterBackend : public GenerationBackend {
 public:
  explicit ClusterBackend(Node& node);

  absl::StatusOr<std::unique_ptr<GenerationHandle>> Submit(
      GenerationRequest request, std::function<void(const GenerationEvent&)> on_event) override;
  absl::Status Ready() const override;
  absl::Status WaitUntilReady(std::chrono::milliseconds patience) const override;
  void DropSession(const std::string& session_id) override;
  const Tokenizer& tokenizer() const override;
  std::string model_id() const override;
  std::string chat_template() const override;
  uint32_t context_size() const override;
  std::string TopologyJson() const override;

 private:
  Node& node_;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_CLUSTER_BACKEND_H_
