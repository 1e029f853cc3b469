#include "daemon/cluster_readiness.h"

#include <algorithm>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"

namespace ringlm {

absl::Status WaitUntilConverged(const ClusterView& cluster, std::chrono::milliseconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (!cluster.Converged()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::shared_ptr<const ClusterSnapshot> snap = cluster.current();
      return absl::UnavailableError(
          snap->has_plan()
              ? "the nodes do not agree on a partition yet"
              : absl::StrCat("the cluster cannot serve the model yet: ", snap->status.message()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Plan> AwaitPlanWithout(const ClusterView& cluster,
                                          const std::vector<std::string>& avoid,
                                          std::chrono::steady_clock::time_point deadline,
                                          const std::atomic<bool>& stopping) {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    if (stopping) return absl::UnavailableError("the node is shutting down");
    std::shared_ptr<const ClusterSnapshot> snap = cluster.current();
    const bool clear = std::none_of(
        snap->partition.stages.begin(), snap->partition.stages.end(), [&](const Stage& s) {
          return std::find(avoid.begin(), avoid.end(), s.node_id) != avoid.end() &&
                 !cluster.BackSinceReported(*snap, s.node_id);
        });
    // Without the failed nodes, the rest cannot hold the model: no wait
    // helps (until a node joins), and the message gives the shortfall.
    if (clear && snap->status.code() == absl::StatusCode::kResourceExhausted) return snap->status;
    if (clear && cluster.Converged() && cluster.current() == snap) return snap->plan;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "the nodes did not agree on a new partition within ",
          std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count(), " ms",
          snap->status.ok() ? "" : absl::StrCat(" (", snap->status.message(), ")")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace ringlm
