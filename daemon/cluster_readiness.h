// Whether the cluster can serve, as this node's cluster view sees it: for
// new requests (a plan every stage agrees on) and for recovering ones (the
// next such plan without the nodes that failed).
#ifndef RINGLM_DAEMON_CLUSTER_READINESS_H_
#define RINGLM_DAEMON_CLUSTER_READINESS_H_

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/membership/cluster_view.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// OK when `cluster` has a plan every stage agrees on (ClusterView::Converged).
// Polls every 50 ms for up to `patience` (nodes settle within a health
// interval or two), then Unavailable with the reason: the nodes do not
// agree yet, or why there is no plan. Blocks the calling thread; any thread.
absl::Status WaitUntilConverged(const ClusterView& cluster, std::chrono::milliseconds patience);

// For recovering requests (OriginClusterHooks::await_plan): the next plan
// of `cluster` that every node agrees on and that names none of `avoid`,
// except nodes back since they were reported unreachable
// (ClusterView::BackSinceReported): a node restarted at once (same id, a new
// instance) may rejoin before a plan without it forms, and its new instance
// serves as well as any member.
// Polls every 50 ms until `deadline`, then Unavailable naming the wait;
// ResourceExhausted at once when the nodes other than `avoid` cannot hold
// the model (no wait helps until a node joins); Unavailable at once when
// `stopping` is true (checked at every poll). Any thread.
absl::StatusOr<v1::Plan> AwaitPlanWithout(const ClusterView& cluster,
                                          const std::vector<std::string>& avoid,
                                          std::chrono::steady_clock::time_point deadline,
                                          const std::atomic<bool>& stopping);

}  // namespace ringlm

#endif  // RINGLM_DAEMON_CLUSTER_READINESS_H_
