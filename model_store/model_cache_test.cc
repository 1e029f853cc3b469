#include "model_store/model_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "model_store/internal/test_model.h"
#include "security/crypto.h"

namespace ringlm {
namespace {

using model_store_test::kBig;
using model_store_test::kMid;
using model_store_test::kSmallA;
using model_store_test::kSmallB;
using model_store_test::kSmallC;
using model_store_test::kTensorCount;
using model_store_test::TestModel;

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class ModelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = model_store_test::MakeScratchDir();
    model_ = model_store_test::WriteTestModel(dir_ + "/original.gguf");
    absl::StatusOr<TensorManifest> m = TensorManifest::Compute(model_.path, *model_.file);
    ASSERT_TRUE(m.ok()) << m.status();
    manifest_ = *std::move(m);
    cache_dir_ = ModelCacheDir(dir_ + "/state", "fingerprint");
  }
  void TearDown() override { model_store_test::RemoveScratchDir(dir_); }

  std::unique_ptr<ModelCache> Create() {
    absl::StatusOr<std::unique_ptr<ModelCache>> c =
        ModelCache::Create(cache_dir_, model_.header(), model_.bytes.size(), manifest_.Serialize());
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  std::string Chunk(size_t tensor, uint64_t chunk) const {
    return model_.bytes.substr(manifest_.tensors()[tensor].offset + chunk * kManifestChunkBytes,
                               manifest_.ChunkSize(tensor, chunk));
  }
  void WriteAndCommit(ModelCache* cache, size_t tensor) {
    for (uint64_t c = 0; c < manifest_.tensors()[tensor].chunks(); ++c) {
      ASSERT_TRUE(cache->WriteChunk(tensor, c, Chunk(tensor, c)).ok());
    }
    ASSERT_TRUE(cache->CommitTensor(tensor).ok());
  }
  // The tensor's bytes as they are in `path`.
  std::string TensorBytes(const std::string& path, size_t tensor) const {
    const TensorDigest& d = manifest_.tensors()[tensor];
    return model_store_test::ReadWholeFile(path).substr(d.offset, d.size);
  }
  std::string Original(size_t tensor) const {
    const TensorDigest& d = manifest_.tensors()[tensor];
    return model_.bytes.substr(d.offset, d.size);
  }

  std::string dir_;
  std::string cache_dir_;
  TestModel model_;
  TensorManifest manifest_;
};

TEST_F(ModelCacheTest, CacheDirIsUnderStateModels) {
  EXPECT_EQ(ModelCacheDir("/var/lib/ringlm", "fp"),
            "/var/lib/ringlm/models/" + HexEncode(Sha256("fp")).substr(0, 16));
}

TEST_F(ModelCacheTest, CreateMakesASparseFullSizeGguf) {
  std::unique_ptr<ModelCache> cache = Create();
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->dir(), cache_dir_);
  struct stat st;
  ASSERT_EQ(::stat(cache->gguf_path().c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), model_.bytes.size());
  EXPECT_LT(cache->DiskBytes(), model_.bytes.size() / 8);  // holes, not zeros
  EXPECT_EQ(cache->header(), model_.header());
  EXPECT_EQ(cache->manifest().digest(), manifest_.digest());
  EXPECT_EQ(cache->file().tensors().size(), kTensorCount);
  EXPECT_TRUE(cache->Held().empty());
  EXPECT_EQ(cache->HeldBytes(), 0u);
  EXPECT_TRUE(GgufFile::Open(cache->gguf_path()).ok());
  // The header bytes on disk are the original's.
  EXPECT_EQ(model_store_test::ReadWholeFile(cache->gguf_path()).substr(0, model_.header().size()),
            model_.header());
}

TEST_F(ModelCacheTest, WriteChunkRefusesBytesThatDoNotMatch) {
  std::unique_ptr<ModelCache> cache = Create();
  ASSERT_NE(cache, nullptr);
  const uint64_t disk = cache->DiskBytes();
  std::string bad = Chunk(kBig, 0);
  bad[100] ^= 0x40;
  EXPECT_TRUE(absl::IsDataLoss(cache->WriteChunk(kBig, 0, bad)));
  EXPECT_TRUE(absl::IsDataLoss(cache->WriteChunk(kBig, 0, Chunk(kBig, 1))));
  EXPECT_TRUE(absl::IsDataLoss(cache->WriteChunk(kBig, 2, Chunk(kBig, 2).substr(1))));
  EXPECT_TRUE(absl::IsInvalidArgument(cache->WriteChunk(kBig, 3, Chunk(kBig, 2))));
  EXPECT_TRUE(absl::IsInvalidArgument(cache->WriteChunk(kTensorCount, 0, "x")));
  EXPECT_EQ(cache->DiskBytes(), disk);
  EXPECT_EQ(cache->FirstMissingChunk(kBig), 0u);
  EXPECT_EQ(TensorBytes(cache->gguf_path(), kBig),
            std::string(manifest_.tensors()[kBig].size, '\0'));

  ASSERT_TRUE(cache->WriteChunk(kBig, 0, Chunk(kBig, 0)).ok());
  EXPECT_EQ(cache->FirstMissingChunk(kBig), 1u);
  EXPECT_TRUE(absl::IsFailedPrecondition(cache->CommitTensor(kBig)));
  EXPECT_FALSE(cache->Holds(kBig));
  std::string out;
  EXPECT_TRUE(absl::IsNotFound(cache->ReadChunk(kBig, 0, &out)));
}

TEST_F(ModelCacheTest, CommittedTensorsSurviveReopen) {
  {
    std::unique_ptr<ModelCache> cache = Create();
    ASSERT_NE(cache, nullptr);
    // Chunks of a tensor may arrive in any order.
    ASSERT_TRUE(cache->WriteChunk(kBig, 2, Chunk(kBig, 2)).ok());
    ASSERT_TRUE(cache->WriteChunk(kBig, 0, Chunk(kBig, 0)).ok());
    EXPECT_EQ(cache->FirstMissingChunk(kBig), 1u);
    ASSERT_TRUE(cache->WriteChunk(kBig, 1, Chunk(kBig, 1)).ok());
    ASSERT_TRUE(cache->CommitTensor(kBig).ok());
    WriteAndCommit(cache.get(), kSmallB);
    // Written but not committed: lost on reopen.
    ASSERT_TRUE(cache->WriteChunk(kSmallA, 0, Chunk(kSmallA, 0)).ok());
    EXPECT_TRUE(cache->Holds(kBig));
    EXPECT_GE(cache->DiskBytes(), manifest_.tensors()[kBig].size);
  }
  absl::StatusOr<std::unique_ptr<ModelCache>> opened = ModelCache::Open(cache_dir_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ModelCache& cache = **opened;
  EXPECT_EQ(cache.Held(), (std::vector<size_t>{kBig, kSmallB}));
  EXPECT_FALSE(cache.Holds(kSmallA));
  EXPECT_EQ(cache.FirstMissingChunk(kSmallA), 0u);
  EXPECT_EQ(cache.FirstMissingChunk(kBig), 3u);
  EXPECT_EQ(cache.HeldBytes(), manifest_.tensors()[kBig].size + manifest_.tensors()[kSmallB].size);
  EXPECT_EQ(cache.header(), model_.header());
  EXPECT_EQ(TensorBytes(cache.gguf_path(), kBig), Original(kBig));
  EXPECT_EQ(TensorBytes(cache.gguf_path(), kSmallB), Original(kSmallB));
  std::string out;
  ASSERT_TRUE(cache.ReadChunk(kBig, 1, &out).ok());
  EXPECT_EQ(out, Chunk(kBig, 1));
  ASSERT_TRUE(cache.ReadChunk(kBig, 2, &out).ok());
  EXPECT_EQ(out, Chunk(kBig, 2));
  EXPECT_TRUE(absl::IsNotFound(cache.ReadChunk(kMid, 0, &out)));
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(cache.gguf_path());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const GgufTensorInfo& big = (*gguf)->tensors()[kBig];
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(big.data), big.n_bytes), Original(kBig));
}

TEST_F(ModelCacheTest, EvictDropsLeastRecentlyUsedOutsideKeepAndFreesDisk) {
  std::unique_ptr<ModelCache> cache = Create();
  ASSERT_NE(cache, nullptr);
  for (size_t t : {kSmallA, kMid, kBig, kSmallB, kSmallC}) WriteAndCommit(cache.get(), t);
  ASSERT_EQ(cache->Held().size(), kTensorCount);
  cache->Touch({kSmallA});  // now: mid, big, b, c, a (oldest first)
  const uint64_t all = cache->HeldBytes();
  const uint64_t disk_all = cache->DiskBytes();

  // Just over budget: one tensor goes, the least recently used (mid).
  absl::StatusOr<size_t> dropped = cache->Evict(all - 1, {});
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(*dropped, 1u);
  EXPECT_FALSE(cache->Holds(kMid));
  EXPECT_LT(cache->DiskBytes(), disk_all - manifest_.tensors()[kMid].size / 2);
  EXPECT_EQ(TensorBytes(cache->gguf_path(), kMid),
            std::string(manifest_.tensors()[kMid].size, '\0'));
  // Neighbours of the punched range are intact.
  EXPECT_EQ(TensorBytes(cache->gguf_path(), kBig), Original(kBig));
  EXPECT_EQ(TensorBytes(cache->gguf_path(), kSmallA), Original(kSmallA));

  // Within budget: nothing goes.
  dropped = cache->Evict(all, {});
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 0u);

  // Budget zero, keeping big: all others go, big stays even over budget.
  dropped = cache->Evict(0, {kBig});
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 3u);
  EXPECT_EQ(cache->Held(), (std::vector<size_t>{kBig}));
  EXPECT_EQ(TensorBytes(cache->gguf_path(), kBig), Original(kBig));
  std::string out;
  EXPECT_TRUE(absl::IsNotFound(cache->ReadChunk(kSmallA, 0, &out)));
  EXPECT_EQ(cache->FirstMissingChunk(kSmallA), 0u);

  // Evicted tensors are not held after a restart, and can be fetched again.
  cache.reset();
  absl::StatusOr<std::unique_ptr<ModelCache>> opened = ModelCache::Open(cache_dir_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->Held(), (std::vector<size_t>{kBig}));
  WriteAndCommit(opened->get(), kMid);
  EXPECT_EQ(TensorBytes((*opened)->gguf_path(), kMid), Original(kMid));
}

TEST_F(ModelCacheTest, EvictOrderFollowsTouchAcrossRestart) {
  {
    std::unique_ptr<ModelCache> cache = Create();
    ASSERT_NE(cache, nullptr);
    for (size_t t : {kSmallA, kSmallB, kSmallC}) WriteAndCommit(cache.get(), t);
    cache->Touch({kSmallA});
    cache->Touch({kSmallB});  // oldest now: c, a, b
  }
  absl::StatusOr<std::unique_ptr<ModelCache>> opened = ModelCache::Open(cache_dir_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const uint64_t b = manifest_.tensors()[kSmallB].size;
  absl::StatusOr<size_t> dropped = (*opened)->Evict(b, {});
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 2u);
  EXPECT_EQ((*opened)->Held(), (std::vector<size_t>{kSmallB}));
}

TEST_F(ModelCacheTest, CreateRejectsHeadersThatDoNotFit) {
  const std::string header = model_.header();
  const uint64_t size = model_.bytes.size();
  const std::string manifest = manifest_.Serialize();
  TestModel other = model_store_test::WriteOtherModel(dir_ + "/other.gguf");
  absl::StatusOr<TensorManifest> other_manifest = TensorManifest::Compute(other.path, *other.file);
  ASSERT_TRUE(other_manifest.ok());

  // A good cache first: failed Creates below must leave it alone.
  std::unique_ptr<ModelCache> good = Create();
  ASSERT_NE(good, nullptr);
  WriteAndCommit(good.get(), kSmallA);
  good.reset();

  struct Case {
    const char* what;
    std::string header;
    uint64_t size;
    std::string manifest;
  };
  std::string short_manifest = manifest;
  short_manifest.pop_back();
  std::string bad_magic = header;
  bad_magic[0] = 'X';
  const Case cases[] = {
      {"another file's manifest", header, size, other_manifest->Serialize()},
      {"truncated manifest", header, size, short_manifest},
      {"garbage manifest", header, size, "garbage"},
      {"header one byte short", header.substr(0, header.size() - 1), size, manifest},
      {"header with data", model_.bytes.substr(0, header.size() + 64), size, manifest},
      {"file too small for its tensors", header, size - 4096, manifest},
      {"not gguf", bad_magic, size, manifest},
      {"header larger than the file", header, header.size() - 1, manifest},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<ModelCache>> made =
        ModelCache::Create(cache_dir_, c.header, c.size, c.manifest);
    EXPECT_FALSE(made.ok()) << c.what;
    EXPECT_TRUE(absl::IsDataLoss(made.status()) || absl::IsInvalidArgument(made.status()))
        << c.what << ": " << made.status();
  }
  EXPECT_TRUE(absl::IsInvalidArgument(
      ModelCache::Create(cache_dir_, header, uint64_t{3} << 40, manifest).status()));

  absl::StatusOr<std::unique_ptr<ModelCache>> opened = ModelCache::Open(cache_dir_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE((*opened)->Holds(kSmallA));
  // No temp folders left beside it.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/state/models")) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST_F(ModelCacheTest, CreateReplacesACacheForAnotherModel) {
  std::unique_ptr<ModelCache> first = Create();
  ASSERT_NE(first, nullptr);
  WriteAndCommit(first.get(), kSmallA);
  first.reset();
  TestModel other = model_store_test::WriteOtherModel(dir_ + "/other.gguf");
  absl::StatusOr<TensorManifest> om = TensorManifest::Compute(other.path, *other.file);
  ASSERT_TRUE(om.ok());
  absl::StatusOr<std::unique_ptr<ModelCache>> made =
      ModelCache::Create(cache_dir_ + "/", other.header(), other.bytes.size(), om->Serialize());
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ((*made)->dir(), cache_dir_);
  EXPECT_TRUE((*made)->Held().empty());
  EXPECT_EQ((*made)->file().tensors().size(), 2u);
}

TEST_F(ModelCacheTest, OpenReportsMissingAndCorruptFolders) {
  EXPECT_TRUE(absl::IsNotFound(ModelCache::Open(dir_ + "/nothing").status()));
  ASSERT_EQ(::mkdir((dir_ + "/empty").c_str(), 0755), 0);
  EXPECT_TRUE(absl::IsNotFound(ModelCache::Open(dir_ + "/empty").status()));

  std::unique_ptr<ModelCache> cache = Create();
  ASSERT_NE(cache, nullptr);
  WriteAndCommit(cache.get(), kSmallA);
  cache.reset();
  const std::string held = cache_dir_ + "/held";
  const std::string good_held = model_store_test::ReadWholeFile(held);
  const std::string first_line = good_held.substr(0, good_held.find('\n') + 1);
  const std::string bad_helds[] = {
      "garbage",
      "",
      first_line + "2 123",           // unterminated
      first_line + "5 123\n",         // no tensor 5
      first_line + "2 123\n2 124\n",  // repeated
      first_line + "-1 5\n",          // negative
      first_line + "2 x\n",           // not a number
      first_line + "99999999999999999999 1\n",
      "ringlm-held 1 " + std::string(64, '0') + "\n",  // another manifest
  };
  for (const std::string& bad : bad_helds) {
    WriteFile(held, bad);
    absl::StatusOr<std::unique_ptr<ModelCache>> opened = ModelCache::Open(cache_dir_);
    EXPECT_TRUE(absl::IsDataLoss(opened.status())) << bad << ": " << opened.status();
  }
  WriteFile(held, good_held);
  ASSERT_TRUE(ModelCache::Open(cache_dir_).ok());

  const std::string manifest = cache_dir_ + "/manifest";
  const std::string good_manifest = model_store_test::ReadWholeFile(manifest);
  WriteFile(manifest, good_manifest.substr(0, 100));
  EXPECT_TRUE(absl::IsDataLoss(ModelCache::Open(cache_dir_).status()));
  ::unlink(manifest.c_str());
  EXPECT_TRUE(absl::IsDataLoss(ModelCache::Open(cache_dir_).status()));
  WriteFile(manifest, good_manifest);
  ASSERT_EQ(::truncate((cache_dir_ + "/model.gguf").c_str(), 1000), 0);
  EXPECT_TRUE(absl::IsDataLoss(ModelCache::Open(cache_dir_).status()));
}

}  // namespace
}  // namespace ringlm
