#include "model_store/model_fetcher.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "model_store/internal/test_model.h"

namespace ringlm {
namespace {

using model_store_test::kBig;
using model_store_test::kMid;
using model_store_test::kSmallA;
using model_store_test::kSmallB;
using model_store_test::kSmallC;
using model_store_test::kTensorCount;
using model_store_test::TestModel;

std::vector<size_t> AllTensors() { return {kBig, kMid, kSmallA, kSmallB, kSmallC}; }

// A peer that serves chunks of the original file, and can be told to lie,
// fail or be slow.
class FakeSource : public TensorSource {
 public:
  struct Call {
    size_t tensor;
    uint64_t first_chunk;
  };

  FakeSource(std::string name, const TestModel* model, const TensorManifest* manifest)
      : name_(std::move(name)), model_(model), manifest_(manifest) {}

  const std::string& name() const override { return name_; }
  std::vector<bool> Holdings() override { return holds; }

  absl::Status Fetch(size_t tensor, uint64_t first_chunk,
                     const std::function<bool(uint64_t, std::string_view)>& on_chunk) override {
    int sent = 0;
    {
      absl::MutexLock lock(&mu_);
      calls_.push_back({tensor, first_chunk});
      ++in_flight_;
      max_in_flight_ = std::max(max_in_flight_, in_flight_);
      // A rendezvous: the first calls wait (a bounded time) for each other.
      if (rendezvous > 0) {
        mu_.AwaitWithTimeout(absl::Condition(
                                 +[](FakeSource* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(f->mu_) {
                                   return f->max_in_flight_ >= f->rendezvous;
                                 },
                                 this),
                             absl::Seconds(5));
      }
    }
    struct Leave {
      FakeSource* f;
      ~Leave() {
        absl::MutexLock lock(&f->mu_);
        --f->in_flight_;
      }
    } leave{this};
    const TensorDigest& d = manifest_->tensors()[tensor];
    for (uint64_t c = first_chunk; c < d.chunks(); ++c) {
      if (fail_after_chunks >= 0 && sent == fail_after_chunks && failures_left != 0) {
        if (failures_left > 0) --failures_left;
        return absl::UnavailableError("connection reset");
      }
      if (chunk_delay.count() > 0) std::this_thread::sleep_for(chunk_delay);
      std::string bytes =
          model_->bytes.substr(d.offset + c * kManifestChunkBytes, manifest_->ChunkSize(tensor, c));
      if (corrupt_chunk >= 0 && c == static_cast<uint64_t>(corrupt_chunk)) bytes[7] ^= 0x01;
      const uint64_t index = c + chunk_index_offset;
      ++sent;
      if (!on_chunk(index, bytes)) return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  std::vector<Call> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  int max_in_flight() const {
    absl::MutexLock lock(&mu_);
    return max_in_flight_;
  }

  // Knobs, set before Fetch.
  std::vector<bool> holds = std::vector<bool>(kTensorCount, true);
  int corrupt_chunk = -1;           // flip a byte of this chunk (of every tensor)
  int fail_after_chunks = -1;       // fail a call after sending this many chunks
  int failures_left = -1;           // how many calls fail that way (-1: all)
  uint64_t chunk_index_offset = 0;  // misnumber chunks
  std::chrono::milliseconds chunk_delay{0};
  int rendezvous = 0;  // the first calls wait until this many are in flight

 private:
  const std::string name_;
  const TestModel* model_;
  const TensorManifest* manifest_;
  mutable absl::Mutex mu_;
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int max_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

class ModelFetcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = model_store_test::MakeScratchDir();
    model_ = model_store_test::WriteTestModel(dir_ + "/original.gguf");
    absl::StatusOr<TensorManifest> m = TensorManifest::Compute(model_.path, *model_.file);
    ASSERT_TRUE(m.ok()) << m.status();
    manifest_ = *std::move(m);
    absl::StatusOr<std::unique_ptr<ModelCache>> c = ModelCache::Create(
        dir_ + "/cache", model_.header(), model_.bytes.size(), manifest_.Serialize());
    ASSERT_TRUE(c.ok()) << c.status();
    cache_ = *std::move(c);
  }
  void TearDown() override {
    cache_.reset();
    model_store_test::RemoveScratchDir(dir_);
  }

  std::unique_ptr<FakeSource> Source(const std::string& name) {
    return std::make_unique<FakeSource>(name, &model_, &manifest_);
  }
  uint64_t Bytes(const std::vector<size_t>& tensors) const {
    uint64_t n = 0;
    for (size_t t : tensors) n += manifest_.tensors()[t].size;
    return n;
  }
  // Every held tensor's bytes in the cache file equal the original's.
  void ExpectHeldBytesMatch() {
    const std::string cached = model_store_test::ReadWholeFile(cache_->gguf_path());
    ASSERT_EQ(cached.size(), model_.bytes.size());
    for (size_t t : cache_->Held()) {
      const TensorDigest& d = manifest_.tensors()[t];
      EXPECT_TRUE(cached.compare(d.offset, d.size, model_.bytes, d.offset, d.size) == 0) << d.name;
    }
  }

  std::string dir_;
  TestModel model_;
  TensorManifest manifest_;
  std::unique_ptr<ModelCache> cache_;
};

TEST_F(ModelFetcherTest, OneSourceServesTwoStreamsAtOnce) {
  auto a = Source("a");
  a->rendezvous = 2;  // fails the fetch's timing only if the calls never overlap
  FetchOptions options;
  options.streams_per_source = 2;
  ModelFetcher fetcher(cache_.get(), options);
  absl::StatusOr<FetchStats> stats = fetcher.Fetch(AllTensors(), {a.get()});
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(a->max_in_flight(), 2);
  EXPECT_EQ(stats->tensors, kTensorCount);
  ExpectHeldBytesMatch();
}

TEST_F(ModelFetcherTest, TwoGoodSourcesFetchEverythingInParallel) {
  auto a = Source("a");
  auto b = Source("b");
  a->chunk_delay = b->chunk_delay = std::chrono::milliseconds(10);
  std::vector<FetchProgress> reports;
  FetchOptions options;
  options.streams_per_source = 1;  // one ordered stream each: largest first
  options.progress = [&](const FetchProgress& p) { reports.push_back(p); };  // serialised
  ModelFetcher fetcher(cache_.get(), options);
  absl::StatusOr<FetchStats> stats = fetcher.Fetch(AllTensors(), {a.get(), b.get()});
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->tensors, kTensorCount);
  EXPECT_EQ(stats->bytes, Bytes(AllTensors()));
  EXPECT_EQ(stats->bad_chunks, 0u);
  EXPECT_EQ(stats->failed_calls, 0u);
  EXPECT_EQ(cache_->Held().size(), kTensorCount);
  ExpectHeldBytesMatch();
  // Largest first, and both sources took part.
  EXPECT_FALSE(a->calls().empty());
  EXPECT_FALSE(b->calls().empty());
  EXPECT_EQ(a->calls().size() + b->calls().size(), kTensorCount);
  const size_t first_a = a->calls()[0].tensor, first_b = b->calls()[0].tensor;
  EXPECT_TRUE((first_a == kBig && first_b == kMid) || (first_a == kMid && first_b == kBig));
  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports.back().bytes_done, reports.back().bytes_total);
  EXPECT_EQ(reports.back().bytes_total, Bytes(AllTensors()));
  EXPECT_EQ(reports.back().eta_seconds, 0);
  EXPECT_TRUE(fetcher.avoided().empty());

  // Everything held: nothing to do, no source called.
  absl::StatusOr<FetchStats> again = fetcher.Fetch({kBig, kBig}, {a.get()});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->bytes, 0u);
  EXPECT_EQ(a->calls().size() + b->calls().size(), kTensorCount);
}

TEST_F(ModelFetcherTest, BadChunkIsNeverWrittenAndItsSourceIsAvoided) {
  auto liar = Source("liar");
  auto good = Source("good");
  liar->corrupt_chunk = 1;  // the big or mid tensor, whichever it takes first
  FetchOptions options;
  options.max_parallel_sources = 1;
  options.streams_per_source = 1;  // liar first, then good: deterministic
  ModelFetcher fetcher(cache_.get(), options);
  absl::StatusOr<FetchStats> stats = fetcher.Fetch({kBig, kMid, kSmallA}, {liar.get(), good.get()});
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->bad_chunks, 1u);
  EXPECT_EQ(fetcher.avoided(), (std::set<std::string>{"liar"}));
  ASSERT_EQ(liar->calls().size(), 1u);
  EXPECT_EQ(liar->calls()[0].tensor, kBig);
  // The good source resumed the big tensor after the liar's one good chunk.
  ASSERT_FALSE(good->calls().empty());
  EXPECT_EQ(good->calls()[0].tensor, kBig);
  EXPECT_EQ(good->calls()[0].first_chunk, 1u);
  EXPECT_EQ(cache_->Held(), (std::vector<size_t>{kBig, kMid, kSmallA}));
  ExpectHeldBytesMatch();

  // The avoid list lasts across Fetch calls.
  absl::StatusOr<FetchStats> only_liar = fetcher.Fetch({kSmallB}, {liar.get()});
  EXPECT_TRUE(absl::IsUnavailable(only_liar.status())) << only_liar.status();
  EXPECT_EQ(liar->calls().size(), 1u);
}

TEST_F(ModelFetcherTest, MisnumberedChunksCountAsBad) {
  auto liar = Source("liar");
  liar->chunk_index_offset = 1;
  auto good = Source("good");
  FetchOptions options;
  options.max_parallel_sources = 1;
  options.streams_per_source = 1;
  ModelFetcher fetcher(cache_.get(), options);
  absl::StatusOr<FetchStats> stats = fetcher.Fetch({kSmallA}, {liar.get(), good.get()});
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->bad_chunks, 1u);
  EXPECT_TRUE(fetcher.avoided().contains("liar"));
  ExpectHeldBytesMatch();
}

TEST_F(ModelFetcherTest, FailedCallResumesAtTheFirstMissingChunk) {
  auto flaky = Source("flaky");
  flaky->fail_after_chunks = 1;
  flaky->failures_left = 1;
  FetchOptions options;
  ModelFetcher fetcher(cache_.get(), options);
  absl::StatusOr<FetchStats> stats = fetcher.Fetch({kBig}, {flaky.get()});
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->failed_calls, 1u);
  EXPECT_EQ(stats->bytes, Bytes({kBig}));  // no chunk twice
  const std::vector<FakeSource::Call> calls = flaky->calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].first_chunk, 0u);
  EXPECT_EQ(calls[1].first_chunk, 1u);
  EXPECT_TRUE(cache_->Holds(kBig));
  ExpectHeldBytesMatch();
}

TEST_F(ModelFetcherTest, SourceFailingTwiceInARowIsDroppedForTheFetch) {
  auto flaky = Source("flaky");
  flaky->fail_after_chunks = 1;  // every call
  auto good = Source("good");
  FetchOptions options;
  options.max_parallel_sources = 1;
  options.streams_per_source = 1;
  ModelFetcher fetcher(cache_.get(), options);
  absl::StatusOr<FetchStats> stats = fetcher.Fetch({kBig, kMid}, {flaky.get(), good.get()});
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->failed_calls, 2u);
  ASSERT_EQ(flaky->calls().size(), 2u);
  EXPECT_EQ(flaky->calls()[1].first_chunk, 1u);
  ASSERT_FALSE(good->calls().empty());
  EXPECT_EQ(good->calls()[0].tensor, kBig);
  EXPECT_EQ(good->calls()[0].first_chunk, 2u);
  EXPECT_TRUE(fetcher.avoided().empty());  // failing is not lying
  ExpectHeldBytesMatch();
}

TEST_F(ModelFetcherTest, TensorFailingTooOftenFailsTheFetch) {
  auto a = Source("a");
  auto b = Source("b");
  a->fail_after_chunks = b->fail_after_chunks = 0;
  FetchOptions options;
  options.max_attempts_per_tensor = 3;
  ModelFetcher fetcher(cache_.get(), options);
  absl::StatusOr<FetchStats> stats = fetcher.Fetch({kSmallA}, {a.get(), b.get()});
  EXPECT_TRUE(absl::IsUnavailable(stats.status())) << stats.status();
  EXPECT_NE(stats.status().message().find("small.a"), std::string::npos) << stats.status();
  EXPECT_EQ(a->calls().size() + b->calls().size(), 3u);
  EXPECT_FALSE(cache_->Holds(kSmallA));
}

TEST_F(ModelFetcherTest, AllSourcesFailingIsUnavailable) {
  auto a = Source("a");
  a->fail_after_chunks = 0;
  FetchOptions options;
  options.streams_per_source = 1;
  ModelFetcher fetcher(cache_.get(), options);
  absl::StatusOr<FetchStats> stats = fetcher.Fetch({kSmallA, kSmallB}, {a.get()});
  EXPECT_TRUE(absl::IsUnavailable(stats.status())) << stats.status();
  EXPECT_EQ(a->calls().size(), 2u);  // dropped after two in a row
}

TEST_F(ModelFetcherTest, TensorNobodyHoldsIsUnavailable) {
  auto a = Source("a");
  a->holds[kMid] = false;
  auto wrong = Source("wrong-length");
  wrong->holds = std::vector<bool>(kTensorCount + 1, true);  // skipped
  ModelFetcher fetcher(cache_.get(), FetchOptions{});
  absl::StatusOr<FetchStats> stats = fetcher.Fetch({kSmallA, kMid}, {a.get(), wrong.get()});
  EXPECT_TRUE(absl::IsUnavailable(stats.status())) << stats.status();
  EXPECT_NE(stats.status().message().find("blk.0.mid"), std::string::npos) << stats.status();
  EXPECT_TRUE(a->calls().empty());
  EXPECT_TRUE(wrong->calls().empty());
  EXPECT_TRUE(absl::IsInvalidArgument(fetcher.Fetch({kTensorCount}, {a.get()}).status()));
  EXPECT_TRUE(absl::IsUnavailable(fetcher.Fetch({kSmallA}, {}).status()));
}

TEST_F(ModelFetcherTest, CancelledStopsTheFetch) {
  auto a = Source("a");
  std::atomic<int> polls{0};
  bool final_report = false;
  FetchOptions options;
  options.max_parallel_sources = 1;
  options.streams_per_source = 1;
  options.cancelled = [&] { return polls.fetch_add(1) >= 2; };
  options.progress = [&](const FetchProgress& p) {
    final_report = true;
    EXPECT_LT(p.bytes_done, p.bytes_total);
  };
  ModelFetcher fetcher(cache_.get(), options);
  absl::StatusOr<FetchStats> stats = fetcher.Fetch(AllTensors(), {a.get()});
  EXPECT_TRUE(absl::IsCancelled(stats.status())) << stats.status();
  EXPECT_TRUE(final_report);
  EXPECT_FALSE(cache_->Holds(kBig));
  EXPECT_EQ(cache_->FirstMissingChunk(kBig), 1u);  // the chunk before the cancel stays
  EXPECT_EQ(a->calls().size(), 1u);
}

}  // namespace
}  // namespace ringlm
