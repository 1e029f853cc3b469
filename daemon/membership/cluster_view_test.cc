// ClusterView against peers that are real gRPC servers on loopback answering
// Health as a test says (--insecure mode, discovery not started: peers come
// from static addresses or from announcements fed into its peer table). What
// cluster_view.h promises: a peer is a member only once its health call
// proves its identity, and a partition is published only after on_change
// applied it; a member that fails its health call or is reported
// unreachable is dropped and its calls in flight end; the view converges
// only when every stage reports the same partition and this node applied it.
#include "daemon/membership/cluster_view.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "daemon/rpc/proto_convert.h"
#include "daemon/rpc/test_grpc_server.h"
#include "gtest/gtest.h"
#include "security/grpc_test_environment.h"

namespace ringlm {
namespace {

constexpr char kFingerprint[] = "model-fp";
constexpr uint64_t kMiB = 1 << 20;

// A peer's RingNode service: Health answers as `node_id` with the given
// model, memory and partition (or fails); StageStep calls are held open
// until Release, so a test can see them end.
class FakePeer final : public v1::RingNode::CallbackService {
 public:
  FakePeer(std::string node_id, uint64_t usable_memory)
      : node_id_(std::move(node_id)), usable_memory_(usable_memory) {}
  ~FakePeer() override { Release(); }

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx,
                                   const v1::HealthRequest* /*request*/,
                                   v1::HealthReply* reply) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    absl::MutexLock lock(&mu_);
    ++health_calls_;
    if (failing_) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "failing on purpose"));
      return reactor;
    }
    reply->set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    reply->set_node_id(node_id_);
    reply->set_model_fingerprint(fingerprint_);
    reply->set_grpc_port(port_);
    reply->set_instance_id(7);
    reply->set_partition(partition_);
    reply->mutable_capabilities()->set_total_memory_bytes(2 * usable_memory_);
    reply->mutable_capabilities()->set_usable_memory_bytes(usable_memory_);
    reply->mutable_capabilities()->set_threads(2);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* StageStep(grpc::CallbackServerContext* ctx,
                                      const v1::StageStepRequest* /*request*/,
                                      v1::StageStepReply* /*reply*/) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    absl::MutexLock lock(&mu_);
    held_.push_back(reactor);
    return reactor;
  }

  // Waits until `n` StageStep calls are held (up to 30 s).
  bool AwaitHeld(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return held_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30));
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    for (grpc::ServerUnaryReactor* r : held_) r->Finish(grpc::Status::OK);
    held_.clear();
  }

  void set_port(int port) {
    absl::MutexLock lock(&mu_);
    port_ = static_cast<uint32_t>(port);
  }
  void set_fingerprint(std::string fp) {
    absl::MutexLock lock(&mu_);
    fingerprint_ = std::move(fp);
  }
  void set_partition(std::string p) {
    absl::MutexLock lock(&mu_);
    partition_ = std::move(p);
  }
  void set_failing(bool failing) {
    absl::MutexLock lock(&mu_);
    failing_ = failing;
  }
  int health_calls() const {
    absl::MutexLock lock(&mu_);
    return health_calls_;
  }
  DeviceCapabilities caps() const {
    DeviceCapabilities c;
    c.total_memory_bytes = 2 * usable_memory_;
    c.usable_memory_bytes = usable_memory_;
    c.threads = 2;
    return c;
  }

 private:
  const std::string node_id_;
  const uint64_t usable_memory_;
  mutable absl::Mutex mu_;
  uint32_t port_ ABSL_GUARDED_BY(mu_) = 0;
  std::string fingerprint_ ABSL_GUARDED_BY(mu_) = kFingerprint;
  std::string partition_ ABSL_GUARDED_BY(mu_);
  bool failing_ ABSL_GUARDED_BY(mu_) = false;
  int health_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<grpc::ServerUnaryReactor*> held_ ABSL_GUARDED_BY(mu_);
};

// A FakePeer and its server.
struct Peer {
  Peer(const std::string& id, uint64_t usable_memory) : service(id, usable_memory) {
    service.set_port(server.port());
  }
  ~Peer() {
    service.Release();
    server.Shutdown();
  }
  FakePeer service;
  testing::TestGrpcServer server{&service};
};

// The snapshots on_change was given, and what current() said meanwhile.
class ChangeLog {
 public:
  void Record(std::shared_ptr<const ClusterSnapshot> next, uint64_t published_epoch) {
    absl::MutexLock lock(&mu_);
    snapshots_.push_back(std::move(next));
    published_during_.push_back(published_epoch);
  }
  // Waits (up to 30 s) for a snapshot that satisfies `want`; null if none.
  std::shared_ptr<const ClusterSnapshot> Await(
      const std::function<bool(const ClusterSnapshot&)>& want) {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<const ClusterSnapshot> found;
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& s : snapshots_) {
        if (want(*s)) found = s;
      }
      return found != nullptr;
    };
    mu_.AwaitWithTimeout(absl::Condition(&seen), absl::Seconds(30));
    return found;
  }
  std::vector<std::shared_ptr<const ClusterSnapshot>> snapshots() const {
    absl::MutexLock lock(&mu_);
    return snapshots_;
  }
  std::vector<uint64_t> published_during() const {
    absl::MutexLock lock(&mu_);
    return published_during_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<const ClusterSnapshot>> snapshots_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> published_during_ ABSL_GUARDED_BY(mu_);
};

bool HasPeer(const ClusterSnapshot& s, const std::string& id) {
  for (const PeerInfo& p : s.peers) {
    if (p.node_id == id) return true;
  }
  return false;
}

// Polls `condition` every millisecond for up to 30 s.
bool Eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 30000; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return condition();
}

class ClusterViewTest : public ::testing::Test {
 protected:
  ClusterViewTest() {
    self_.node_id = "self";
    self_.address = "127.0.0.1:47801";
    self_.caps.usable_memory_bytes = 64 * kMiB;
    self_.caps.total_memory_bytes = 128 * kMiB;
    footprint_.n_layers = 8;
    footprint_.bytes_per_layer = kMiB;
  }
  // Stops the view's thread before the view goes: on_change reads view_,
  // which unique_ptr::reset clears before it destroys the view.
  ~ClusterViewTest() override {
    if (view_ != nullptr) view_->Stop();
    view_.reset();
  }

  // The view, with fast polls and no start-up delay.
  ClusterView& MakeView(std::vector<std::string> static_peers = {}) {
    ClusterOptions options;
    options.static_peers = std::move(static_peers);
    options.health_interval = std::chrono::milliseconds(20);
    options.repartition_debounce = std::chrono::milliseconds(10);
    options.first_partition_delay = std::chrono::milliseconds(0);
    view_ = std::make_unique<ClusterView>(options, self_, footprint_, kFingerprint, &discovery_,
                                          &client_,
                                          [this](std::shared_ptr<const ClusterSnapshot> next) {
                                            log_.Record(next, view_->current()->epoch);
                                          });
    return *view_;
  }

  // Feeds an announcement of `id` at `port` on loopback into the peer table.
  void Announce(const std::string& id, int port, const DeviceCapabilities& caps,
                uint64_t instance = 7) {
    Announcement a;
    a.node_id = id;
    a.instance_id = instance;
    a.grpc_port = static_cast<uint16_t>(port);
    a.model_fingerprint = kFingerprint;
    a.caps = caps;
    a.grpc_host = "127.0.0.1";
    ASSERT_TRUE(discovery_.peers().Observe(a, "127.0.0.1", std::chrono::steady_clock::now()).ok());
  }

  // Starts a StageStep to `address` that the peer holds open; returns the
  // thread (joined when it goes, also when an assertion ends the test
  // early), which stores the call's result in `result`.
  std::jthread HeldStep(const std::string& address, absl::Status* result) {
    return std::jthread([this, address, result] {
      v1::StageStepRequest step;
      step.set_request_id("r1#0");
      *result = client_.StageStep(address, step);
    });
  }

  std::string Key(const Partition& p) const {
    std::string key;
    for (const Stage& st : p.stages) {
      key += (key.empty() ? "" : " ") + st.node_id + "[" + std::to_string(st.first_layer) + "," +
             std::to_string(st.last_layer) + ")";
    }
    return key;
  }

  NodeDescriptor self_;
  ModelFootprint footprint_;
  DiscoveryService discovery_;  // never started: the tests fill its table
  PeerClient client_{[] {
                       RpcOptions o;
                       o.health_timeout = std::chrono::milliseconds(2000);
                       o.step_timeout = std::chrono::seconds(60);
                       return o;
                     }(),
                     std::nullopt, "self"};
  ChangeLog log_;
  std::unique_ptr<ClusterView> view_;
};

TEST_F(ClusterViewTest, BeforeStartThereIsNoPlan) {
  ClusterView& view = MakeView();
  const auto s = view.current();
  EXPECT_FALSE(s->has_plan());
  EXPECT_EQ(s->status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s->epoch, 0u);
  EXPECT_FALSE(view.Converged());
  EXPECT_TRUE(view.IsMember("self"));
  EXPECT_EQ(view.AddressOf("self"), self_.address);
  EXPECT_FALSE(view.IsMember("nobody"));
  EXPECT_EQ(view.AddressOf("nobody"), std::nullopt);
  EXPECT_TRUE(log_.snapshots().empty());
}

TEST_F(ClusterViewTest, AloneItPlansEveryLayerOnItselfAndPublishesAfterApplying) {
  ClusterView& view = MakeView();
  view.Start();
  const auto s = log_.Await([](const ClusterSnapshot& s) { return s.epoch >= 1; });
  ASSERT_NE(s, nullptr);
  view.Stop();
  ASSERT_TRUE(s->has_plan()) << s->status;
  EXPECT_EQ(s->epoch, 1u);
  EXPECT_TRUE(s->peers.empty());
  ASSERT_EQ(s->partition.stages.size(), 1u);
  EXPECT_EQ(s->partition.stages[0], (Stage{"self", self_.address, 0, 8}));
  EXPECT_EQ(s->partition_key, "self[0,8)");
  EXPECT_TRUE(ValidatePlan(s->plan, 8, kFingerprint).ok());
  EXPECT_EQ(s->plan.epoch(), s->epoch);
  // on_change ran while current() still had the previous snapshot.
  EXPECT_EQ(log_.published_during(), std::vector<uint64_t>{0});
  EXPECT_EQ(view.current(), s);
}

TEST_F(ClusterViewTest, AStaticPeerThatAnswersBecomesAMemberAndJoinsThePlan) {
  Peer b("b", 32 * kMiB);
  ASSERT_TRUE(b.server.started());
  ClusterView& view = MakeView({b.server.address()});
  view.Start();
  const auto s = log_.Await([](const ClusterSnapshot& s) { return HasPeer(s, "b"); });
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->has_plan()) << s->status;
  EXPECT_TRUE(view.IsMember("b"));
  EXPECT_EQ(view.AddressOf("b"), b.server.address());
  ASSERT_EQ(s->peers.size(), 1u);
  EXPECT_EQ(s->peers[0].address, b.server.address());
  EXPECT_EQ(s->peers[0].caps, b.service.caps());  // from its health reply
  // The partition of exactly these two nodes.
  absl::StatusOr<Partition> expected =
      PartitionLayers({self_, {"b", b.server.address(), b.service.caps()}}, footprint_);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(s->partition, *expected);
  EXPECT_EQ(s->partition.stages.size(), 2u);
  EXPECT_EQ(s->partition_key, Key(*expected));
  EXPECT_TRUE(ValidatePlan(s->plan, 8, kFingerprint).ok());
  // Each peer's stage names the process that answered (its instance id).
  for (const v1::PlanStage& stage : s->plan.stages()) {
    EXPECT_EQ(stage.instance_id(), stage.node_id() == "b" ? 7u : 0u) << stage.node_id();
  }
}

TEST_F(ClusterViewTest, AnAnnouncedPeerIsUsedOnlyOnceItsHealthCallProvesIt) {
  Peer b("b", 32 * kMiB);
  Peer impostor("mallory", 32 * kMiB);  // announced as "c", answers as "mallory"
  ASSERT_TRUE(b.server.started() && impostor.server.started());
  Announce("b", b.server.port(), b.service.caps());
  Announce("c", impostor.server.port(), impostor.service.caps());
  ClusterView& view = MakeView();
  // Announced, not proven: not a member, no address.
  EXPECT_FALSE(view.IsMember("b"));
  EXPECT_EQ(view.AddressOf("b"), std::nullopt);

  view.Start();
  const auto s = log_.Await([](const ClusterSnapshot& s) { return HasPeer(s, "b"); });
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(view.IsMember("b"));
  // The same health round that proved b dropped c.
  EXPECT_FALSE(view.IsMember("c"));
  EXPECT_EQ(discovery_.peers().Find("c"), std::nullopt);
  for (const auto& snapshot : log_.snapshots()) {
    EXPECT_FALSE(HasPeer(*snapshot, "c"));
    for (const Stage& st : snapshot->partition.stages) EXPECT_NE(st.node_id, "c");
  }
}

TEST_F(ClusterViewTest, AStaticPeerOfAnotherModelOrThisNodeItselfIsIgnored) {
  Peer other("b", 32 * kMiB);
  other.service.set_fingerprint("another-model");
  Peer itself("self", 32 * kMiB);  // this node, listed among its own static peers
  ClusterView& view = MakeView({other.server.address(), itself.server.address()});
  view.Start();
  const auto s = log_.Await([](const ClusterSnapshot& s) { return s.epoch >= 1; });
  ASSERT_NE(s, nullptr);
  // Both were asked before the first partition, and neither joined.
  EXPECT_GE(other.service.health_calls(), 1);
  EXPECT_GE(itself.service.health_calls(), 1);
  EXPECT_TRUE(s->peers.empty());
  EXPECT_EQ(s->partition_key, "self[0,8)");
  EXPECT_FALSE(view.IsMember("b"));
  EXPECT_EQ(discovery_.peers().size(), 0u);
}

TEST_F(ClusterViewTest, AMemberThatFailsItsHealthCallIsDroppedAndItsCallsEnd) {
  Peer b("b", 32 * kMiB);
  ClusterView& view = MakeView({b.server.address()});
  view.Start();
  const auto with_b = log_.Await([](const ClusterSnapshot& s) { return HasPeer(s, "b"); });
  ASSERT_NE(with_b, nullptr);

  absl::Status step;
  std::jthread caller = HeldStep(b.server.address(), &step);
  ASSERT_TRUE(b.service.AwaitHeld(1));
  b.service.set_failing(true);
  const auto without_b = log_.Await(
      [&](const ClusterSnapshot& s) { return s.epoch > with_b->epoch && !HasPeer(s, "b"); });
  caller.join();
  ASSERT_NE(without_b, nullptr);
  EXPECT_FALSE(view.IsMember("b"));
  EXPECT_EQ(without_b->partition_key, "self[0,8)");
  EXPECT_EQ(step.code(), absl::StatusCode::kCancelled) << step;
  // Epochs count the recomputations, one by one.
  const auto all = log_.snapshots();
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i]->epoch, i + 1);
}

TEST_F(ClusterViewTest, AMemberReportedUnreachableIsForgottenAndItsCallsEnd) {
  Peer b("b", 32 * kMiB);
  Announce("b", b.server.port(), b.service.caps());
  ClusterView& view = MakeView();
  view.Start();
  const auto with_b = log_.Await([](const ClusterSnapshot& s) { return HasPeer(s, "b"); });
  ASSERT_NE(with_b, nullptr);

  absl::Status step;
  std::jthread caller = HeldStep(b.server.address(), &step);
  ASSERT_TRUE(b.service.AwaitHeld(1));
  view.ReportUnreachable("b");
  EXPECT_FALSE(view.IsMember("b"));  // at once
  EXPECT_EQ(view.AddressOf("b"), std::nullopt);
  caller.join();
  EXPECT_EQ(step.code(), absl::StatusCode::kCancelled) << step;
  const auto without_b = log_.Await(
      [&](const ClusterSnapshot& s) { return s.epoch > with_b->epoch && !HasPeer(s, "b"); });
  ASSERT_NE(without_b, nullptr);
  EXPECT_EQ(without_b->partition_key, "self[0,8)");
}

// A member reported unreachable that announces again (here a restart: a
// new instance, the same identity) and proves itself is back: snapshots with
// its new entry may plan it again, those with the entry that was reported
// may not, and a node never reported is never "back".
TEST_F(ClusterViewTest, AMemberBackAfterItsReportIsToldApartFromTheEntryReported) {
  Peer b("b", 32 * kMiB);
  Announce("b", b.server.port(), b.service.caps());
  ClusterView& view = MakeView();
  view.Start();
  const auto with_b = log_.Await([](const ClusterSnapshot& s) { return HasPeer(s, "b"); });
  ASSERT_NE(with_b, nullptr);
  EXPECT_FALSE(view.BackSinceReported(*with_b, "b"));  // never reported

  view.ReportUnreachable("b");
  EXPECT_FALSE(view.BackSinceReported(*with_b, "b"));  // the entry reported
  Announce("b", b.server.port(), b.service.caps(), 8);
  const auto back = log_.Await(
      [&](const ClusterSnapshot& s) { return s.epoch > with_b->epoch && HasPeer(s, "b"); });
  ASSERT_NE(back, nullptr);
  EXPECT_TRUE(view.BackSinceReported(*back, "b"));
  EXPECT_FALSE(view.BackSinceReported(*with_b, "b"));
  EXPECT_FALSE(view.BackSinceReported(*back, "c"));

  // Reported again: its current entry is the one reported now.
  view.ReportUnreachable("b");
  EXPECT_FALSE(view.BackSinceReported(*back, "b"));
}

TEST_F(ClusterViewTest, ConvergedOnlyWhenEveryStageReportsThePartitionAndThisNodeAppliedIt) {
  Peer b("b", 32 * kMiB);
  ClusterView& view = MakeView({b.server.address()});
  view.Start();
  const auto s = log_.Await([](const ClusterSnapshot& s) { return HasPeer(s, "b"); });
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->partition.stages.size(), 2u);
  ASSERT_TRUE(Eventually([&] { return view.current() == s; }));
  const std::string key = s->partition_key;

  // b reports no partition yet, and this node applied none.
  EXPECT_FALSE(view.Converged());
  view.MarkApplied(key);
  EXPECT_EQ(view.applied_partition(), key);
  EXPECT_FALSE(view.Converged());  // b still reports none

  b.service.set_partition(key);
  EXPECT_TRUE(Eventually([&] { return view.Converged(); }));

  // b moves to another partition: not converged until it reports this one.
  b.service.set_partition("b[0,8)");
  EXPECT_TRUE(Eventually([&] { return !view.Converged(); }));
  b.service.set_partition(key);
  EXPECT_TRUE(Eventually([&] { return view.Converged(); }));

  // This node reporting an older partition is enough to stop it.
  view.MarkApplied("self[0,8)");
  EXPECT_FALSE(view.Converged());
  view.MarkApplied(key);
  EXPECT_TRUE(Eventually([&] { return view.Converged(); }));
}

}  // namespace
}  // namespace ringlm
