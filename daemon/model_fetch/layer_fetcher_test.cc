// LayerFetcher: brings the tensors of a layer range into a node's partial
// copy (a ModelCache in a temp dir) from the members of a snapshot, each a
// real ModelShare of the bundled model behind gRPC on loopback; reports when
// it is done, never takes bytes that fail the manifest, lets a newer request
// replace an older one, and keeps the copy within its disk budget.
#include "daemon/model_fetch/layer_fetcher.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "base/metrics.h"
#include "daemon/model_fetch/test_share_member.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

constexpr char kFingerprint[] = "stories260K";

// Records the snapshots on_fetched reports.
class FetchedLog {
 public:
  std::function<void(std::shared_ptr<const ClusterSnapshot>)> Callback() {
    return [this](std::shared_ptr<const ClusterSnapshot> s) {
      absl::MutexLock lock(&mu_);
      reported_.push_back(std::move(s));
    };
  }
  // Waits until `n` reports came (up to 60 s); returns the n-th or null.
  std::shared_ptr<const ClusterSnapshot> Await(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reported_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
    return reported_.size() >= n ? reported_[n - 1] : nullptr;
  }
  size_t count() const {
    absl::MutexLock lock(&mu_);
    return reported_.size();
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<const ClusterSnapshot>> reported_ ABSL_GUARDED_BY(mu_);
};

std::shared_ptr<const ClusterSnapshot> SnapshotOf(
    uint64_t epoch, const std::vector<std::pair<std::string, std::string>>& members) {
  auto s = std::make_shared<ClusterSnapshot>();
  s->epoch = epoch;
  for (const auto& [id, address] : members) {
    PeerInfo p;
    p.node_id = id;
    p.address = address;
    p.verified = true;
    s->peers.push_back(p);
  }
  return s;
}

class LayerFetcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    original_ = testing::ReadFileBytes(testing::BundledModelPath());
    member_ = std::make_unique<testing::ShareMember>(
        "a", testing::WriteModelCopy(original_, "layer_fetcher_a"), kFingerprint);
    ASSERT_TRUE(member_->ok());
    const GgufFile& file = member_->file();
    absl::StatusOr<std::unique_ptr<ModelCache>> cache = ModelCache::Create(
        testing::MakeTempDir("layer_fetcher_cache") + "/m", original_.substr(0, file.data_offset()),
        original_.size(), member_->manifest().Serialize());
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = *std::move(cache);
    metrics_.bytes = *registry_.AddCounter("bytes", "");
    metrics_.tensors = *registry_.AddCounter("tensors", "");
    metrics_.bad_chunks = *registry_.AddCounter("bad_chunks", "");
    metrics_.failed_calls = *registry_.AddCounter("failed_calls", "");
    metrics_.pending_bytes = *registry_.AddGauge("pending_bytes", "");
  }

  LayerFetcherOptions Options(uint64_t budget = 0) const {
    LayerFetcherOptions o;
    o.fingerprint = kFingerprint;
    o.cache_budget_bytes = budget;
    o.retry_after = std::chrono::milliseconds(10);
    return o;
  }

  // Indices of the tensors of layer `layer` ("blk.<layer>.").
  std::vector<size_t> LayerTensors(int layer) const {
    std::vector<size_t> out;
    const std::string prefix = "blk." + std::to_string(layer) + ".";
    const std::vector<GgufTensorInfo>& tensors = cache_->file().tensors();
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (absl::StartsWith(tensors[t].name, prefix)) out.push_back(t);
    }
    EXPECT_FALSE(out.empty()) << prefix;
    return out;
  }
  size_t TensorNamed(const std::string& name) const {
    const std::vector<GgufTensorInfo>& tensors = cache_->file().tensors();
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (tensors[t].name == name) return t;
    }
    ADD_FAILURE() << "no tensor " << name;
    return 0;
  }
  uint64_t Bytes(const std::vector<size_t>& tensors) const {
    uint64_t n = 0;
    for (size_t t : tensors) n += cache_->manifest().tensors()[t].size;
    return n;
  }
  // Tensor `t` as the copy's file holds it now.
  std::string CachedBytes(size_t t) const {
    const TensorDigest& d = cache_->manifest().tensors()[t];
    return testing::ReadFileBytes(cache_->gguf_path()).substr(d.offset, d.size);
  }
  std::string OriginalBytes(size_t t) const {
    const TensorDigest& d = cache_->manifest().tensors()[t];
    return original_.substr(d.offset, d.size);
  }

  std::string original_;
  std::unique_ptr<testing::ShareMember> member_;
  std::unique_ptr<ModelCache> cache_;
  PeerClient client_{RpcOptions{}, std::nullopt, "fetcher"};
  MetricsRegistry registry_;
  LayerFetcherMetrics metrics_;
  FetchedLog fetched_;
};

TEST_F(LayerFetcherTest, FetchesTheRangesTensorsFromAMemberAndReports) {
  std::vector<size_t> wanted = LayerTensors(0);
  wanted.push_back(TensorNamed("token_embd.weight"));
  LayerFetcher fetcher(Options(), cache_.get(), &client_, metrics_, fetched_.Callback());
  const auto snapshot = SnapshotOf(7, {{"a", member_->address()}});
  fetcher.Request(snapshot, LayerRange{0, 1}, wanted);

  ASSERT_EQ(fetched_.Await(1), snapshot);  // the very snapshot it was asked for
  std::vector<size_t> held = cache_->Held();
  std::vector<size_t> expected = wanted;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(held, expected);  // those, and nothing else
  for (size_t t : wanted) EXPECT_EQ(CachedBytes(t), OriginalBytes(t)) << t;
  // Each tensor was sent once, whole. (The fetcher's own byte and tensor
  // counters are not checked exactly: they count the last, successful
  // attempt only, and a member may refuse a stream now and then while gRPC
  // has not yet given back the slot of one that ended.)
  EXPECT_EQ(member_->service().served_bytes(), static_cast<double>(Bytes(wanted)));
  EXPECT_GT(metrics_.bytes->Value(), 0);
  EXPECT_LE(metrics_.bytes->Value(), static_cast<double>(Bytes(wanted)));
  EXPECT_LE(metrics_.tensors->Value(), static_cast<double>(wanted.size()));
  EXPECT_EQ(metrics_.bad_chunks->Value(), 0);
  EXPECT_EQ(metrics_.pending_bytes->Value(), 0);
}

TEST_F(LayerFetcherTest, TensorsAlreadyHeldNeedNoMember) {
  const std::vector<size_t> wanted = LayerTensors(1);
  {
    LayerFetcher first(Options(), cache_.get(), &client_, metrics_, fetched_.Callback());
    first.Request(SnapshotOf(1, {{"a", member_->address()}}), LayerRange{1, 2}, wanted);
    ASSERT_NE(fetched_.Await(1), nullptr);
  }
  const double served = member_->service().served_bytes();
  LayerFetcher again(Options(), cache_.get(), &client_, metrics_, fetched_.Callback());
  const auto alone = SnapshotOf(2, {});
  again.Request(alone, LayerRange{1, 2}, wanted);
  EXPECT_EQ(fetched_.Await(2), alone);
  EXPECT_EQ(member_->service().served_bytes(), served);
}

// A member whose copy rotted after its manifest was made: its manifest
// digest is right, one tensor's bytes are not.
TEST_F(LayerFetcherTest, BytesThatFailTheManifestAreNeverTaken) {
  const size_t victim = LayerTensors(0).front();
  const TensorDigest& d = cache_->manifest().tensors()[victim];
  const std::string rotted_path = testing::WriteModelCopy(original_, "layer_fetcher_rot");
  {
    absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(rotted_path);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE(LoadOrComputeManifest(rotted_path, **f, kFingerprint, "").ok());
  }
  testing::RotKeepingTheFileTime(rotted_path, d.offset + d.size / 2);
  testing::ShareMember rotted("rot", rotted_path, kFingerprint);
  ASSERT_TRUE(rotted.ok());
  ASSERT_EQ(rotted.manifest().digest(), cache_->manifest().digest());

  // A witness that holds nothing: the fetcher asks it what it holds once per
  // attempt, so its second answer means the first attempt has ended.
  absl::StatusOr<std::unique_ptr<ModelCache>> empty =
      ModelCache::Create(testing::MakeTempDir("layer_fetcher_witness") + "/m",
                         original_.substr(0, member_->file().data_offset()), original_.size(),
                         member_->manifest().Serialize());
  ASSERT_TRUE(empty.ok()) << empty.status();
  std::unique_ptr<ModelShare> nothing =
      ModelShare::ForCache(std::shared_ptr<ModelCache>(*std::move(empty)), kFingerprint);
  testing::ShareService witness("w", nothing.get());
  testing::TestGrpcServer witness_server(&witness);
  ASSERT_TRUE(witness_server.started());

  LayerFetcher fetcher(Options(), cache_.get(), &client_, metrics_, fetched_.Callback());
  fetcher.Request(SnapshotOf(1, {{"rot", rotted.address()}, {"w", witness_server.address()}}),
                  LayerRange{0, 1}, {victim});
  ASSERT_TRUE(witness.AwaitGetModelCalls(2));
  // Tried, then avoided (its second stream may have taken the tensor once more).
  EXPECT_GE(rotted.service().fetch_calls(), 1);
  EXPECT_LE(rotted.service().fetch_calls(), 2);
  EXPECT_EQ(rotted.service().get_model_calls(), 1);
  EXPECT_FALSE(cache_->Holds(victim));
  EXPECT_EQ(CachedBytes(victim), std::string(d.size, '\0'));  // nothing written: a hole
  EXPECT_EQ(fetched_.count(), 0u);

  // With an honest member beside it, the tensor comes from that one.
  const auto both = SnapshotOf(2, {{"rot", rotted.address()}, {"a", member_->address()}});
  fetcher.Request(both, LayerRange{0, 1}, {victim});
  ASSERT_EQ(fetched_.Await(1), both);
  EXPECT_TRUE(cache_->Holds(victim));
  EXPECT_EQ(CachedBytes(victim), OriginalBytes(victim));
}

TEST_F(LayerFetcherTest, ANewerRequestReplacesOneThatCannotFinish) {
  LayerFetcher fetcher(Options(), cache_.get(), &client_, metrics_, fetched_.Callback());
  // Nobody can serve this one: it fails and is retried.
  const auto dead = SnapshotOf(1, {{"gone", "127.0.0.1:1"}});
  fetcher.Request(dead, LayerRange{0, 1}, LayerTensors(0));
  const auto live = SnapshotOf(2, {{"a", member_->address()}});
  fetcher.Request(live, LayerRange{1, 2}, LayerTensors(1));
  ASSERT_EQ(fetched_.Await(1), live);
  for (size_t t : LayerTensors(1)) EXPECT_TRUE(cache_->Holds(t));
  for (size_t t : LayerTensors(0)) EXPECT_FALSE(cache_->Holds(t));
  fetcher.Stop();
  EXPECT_EQ(fetched_.count(), 1u);  // the dead snapshot was never reported
}

TEST_F(LayerFetcherTest, TheBudgetDropsTensorsOutsideTheNewRange) {
  const std::vector<size_t> layer0 = LayerTensors(0);
  const std::vector<size_t> layer1 = LayerTensors(1);
  const auto snapshot = SnapshotOf(1, {{"a", member_->address()}});
  {
    LayerFetcher fetcher(Options(), cache_.get(), &client_, metrics_, fetched_.Callback());
    fetcher.Request(snapshot, LayerRange{0, 1}, layer0);
    ASSERT_NE(fetched_.Await(1), nullptr);
  }
  // Room for both layers: layer 0 stays.
  {
    LayerFetcher fetcher(Options(Bytes(layer0) + Bytes(layer1)), cache_.get(), &client_, metrics_,
                         fetched_.Callback());
    fetcher.Request(snapshot, LayerRange{1, 2}, layer1);
    ASSERT_NE(fetched_.Await(2), nullptr);
  }
  for (size_t t : layer0) EXPECT_TRUE(cache_->Holds(t)) << t;
  for (size_t t : layer1) EXPECT_TRUE(cache_->Holds(t)) << t;

  // Room for layer 2 only: layers 0 and 1 are dropped, and their disk freed.
  const std::vector<size_t> layer2 = LayerTensors(2);
  {
    LayerFetcher fetcher(Options(Bytes(layer2)), cache_.get(), &client_, metrics_,
                         fetched_.Callback());
    fetcher.Request(snapshot, LayerRange{2, 3}, layer2);
    ASSERT_NE(fetched_.Await(3), nullptr);
  }
  std::vector<size_t> expected = layer2;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(cache_->Held(), expected);
  EXPECT_LE(cache_->HeldBytes(), Bytes(layer2));
  for (size_t t : layer0) EXPECT_EQ(CachedBytes(t), std::string(Bytes({t}), '\0')) << t;
}

}  // namespace
}  // namespace ringlm
