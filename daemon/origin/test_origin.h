// Test helpers for the origin's tests: a transport that records what the
// origin sends, a fake cluster behind the origin's hooks, and plans of
// named nodes.
#ifndef RINGLM_DAEMON_ORIGIN_TEST_ORIGIN_H_
#define RINGLM_DAEMON_ORIGIN_TEST_ORIGIN_H_

#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/origin/origin_options.h"
#include "daemon/rpc/transport.h"
#include "gtest/gtest.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// Records the steps and cancels the origin sends; every call succeeds,
// except calls to the nodes set with FailCallsTo (Unavailable). Thread-safe.
class RecordingTransport : public Transport {
 public:
  absl::Status StageStep(const std::string& to, const v1::StageStepRequest& r) override {
    absl::MutexLock lock(&mu_);
    if (failing_.count(to) > 0) return absl::UnavailableError("connection refused");
    steps_.push_back({to, r});
    return absl::OkStatus();
  }
  absl::Status DeliverToken(const std::string&, const v1::DeliverTokenRequest&,
                            v1::DeliverTokenReply*) override {
    return absl::OkStatus();
  }
  absl::Status Cancel(const std::string& to, const std::string& id) override {
    absl::MutexLock lock(&mu_);
    if (failing_.count(to) > 0) return absl::UnavailableError("connection refused");
    cancels_.push_back(absl::StrCat(to, " ", id));
    return absl::OkStatus();
  }
  // Origins never roll back (only last stages do).
  absl::Status Rollback(const std::string&, const v1::RollbackRequest&) override {
    return absl::UnimplementedError("an origin does not roll back");
  }
  absl::Status DropSession(const std::string&, const std::string&) override {
    return absl::OkStatus();
  }
  // Node `to` adopts the longest offered length up to what HoldPrefix set
  // for it (0 by default); a failing node answers Unavailable.
  absl::StatusOr<uint32_t> AdoptPrefix(const std::string& to,
                                       const v1::AdoptPrefixRequest& r) override {
    absl::MutexLock lock(&mu_);
    if (failing_.count(to) > 0) return absl::UnavailableError("connection refused");
    offers_.push_back({to, r});
    uint32_t adopted = 0;
    for (uint32_t n : r.lengths()) {
      if (n <= held_[to]) adopted = n;
    }
    return adopted;
  }
  void HoldPrefix(const std::string& node, uint32_t n) {
    absl::MutexLock lock(&mu_);
    held_[node] = n;
  }
  std::vector<std::pair<std::string, v1::AdoptPrefixRequest>> offers() {
    absl::MutexLock lock(&mu_);
    return offers_;
  }
  // Waits for the n-th step (1-based).
  std::pair<std::string, v1::StageStepRequest> WaitStep(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return steps_.size() >= n; };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10)));
    return steps_.size() >= n ? steps_[n - 1] : std::pair<std::string, v1::StageStepRequest>{};
  }
  size_t steps() {
    absl::MutexLock lock(&mu_);
    return steps_.size();
  }
  // Waits for at least n cancels ("<node> <stage request id>"), and returns
  // all so far.
  std::vector<std::string> WaitCancels(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return cancels_.size() >= n; };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10)));
    return cancels_;
  }
  void FailCallsTo(std::set<std::string> nodes) {
    absl::MutexLock lock(&mu_);
    failing_ = std::move(nodes);
  }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<std::string, v1::StageStepRequest>> steps_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> cancels_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> failing_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint32_t> held_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, v1::AdoptPrefixRequest>> offers_ ABSL_GUARDED_BY(mu_);
};

// The cluster as the origin's hooks see it, for the origin's test fixtures
// (which derive from it): nodes in dead_ fail their health call, those in
// restarted_ answer as a new instance (RestartedSincePlan()), what the
// origin reports unreachable is recorded, and await_plan hands out plans_
// in order (ResourceExhausted once none is left), recording what each call
// avoided. Thread-safe through mu_, which fixtures also use for their own
// fields; it outlives the fixture's members, so hooks may run until the
// origin under test is gone.
class FakeClusterHooks {
 protected:
  // Sets `hooks`' health, on_unreachable and await_plan over this fake.
  void InstallOn(OriginClusterHooks& hooks) {
    hooks.health = [this](const v1::PlanStage& s) {
      absl::MutexLock lock(&mu_);
      if (dead_.count(s.node_id())) return absl::UnavailableError("connection refused");
      if (restarted_.count(s.node_id())) return RestartedSincePlan();
      return absl::OkStatus();
    };
    hooks.on_unreachable = [this](const std::string& id) {
      absl::MutexLock lock(&mu_);
      unreachable_.push_back(id);
    };
    hooks.await_plan = [this](const std::vector<std::string>& avoid,
                              std::chrono::steady_clock::time_point) -> absl::StatusOr<v1::Plan> {
      absl::MutexLock lock(&mu_);
      avoided_.push_back(avoid);
      if (plans_.empty()) return absl::ResourceExhaustedError("model needs 9 MiB: 3 MiB short");
      v1::Plan p = plans_.front();
      plans_.pop_front();
      return p;
    };
  }

  absl::Mutex mu_;
  std::set<std::string> dead_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> restarted_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> unreachable_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<std::string>> avoided_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::Plan> plans_ ABSL_GUARDED_BY(mu_);
};

// A plan whose stage i runs on nodes[i], layers [i, i + 1).
inline v1::Plan PlanOf(std::vector<std::string> nodes, uint64_t epoch) {
  v1::Plan plan;
  plan.set_epoch(epoch);
  for (size_t i = 0; i < nodes.size(); ++i) {
    v1::PlanStage* s = plan.add_stages();
    s->set_node_id(nodes[i]);
    s->set_first_layer(static_cast<uint32_t>(i));
    s->set_last_layer(static_cast<uint32_t>(i + 1));
  }
  return plan;
}

}  // namespace ringlm

#endif  // RINGLM_DAEMON_ORIGIN_TEST_ORIGIN_H_
