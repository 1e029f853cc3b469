#include "model_store/tensor_manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

#include "gtest/gtest.h"
#include "model_store/internal/test_model.h"
#include "security/crypto.h"

namespace ringlm {
namespace {

using model_store_test::kBig;
using model_store_test::kMid;
using model_store_test::kSmallA;
using model_store_test::kTensorCount;
using model_store_test::TestModel;

void PutLe(std::string* out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// The manifest format, written independently of TensorManifest::Serialize so
// that tests can build manifests with one field wrong.
std::string Encode(const std::vector<TensorDigest>& tensors, uint64_t count) {
  std::string out = "RLMMANI1";
  PutLe(&out, kManifestChunkBytes, 8);
  PutLe(&out, count, 8);
  for (const TensorDigest& d : tensors) {
    PutLe(&out, d.name.size(), 4);
    out += d.name;
    PutLe(&out, d.offset, 8);
    PutLe(&out, d.size, 8);
    PutLe(&out, d.chunk_sha256.size(), 8);
    for (const std::string& h : d.chunk_sha256) out += h;
  }
  return out;
}
std::string Encode(const std::vector<TensorDigest>& tensors) {
  return Encode(tensors, tensors.size());
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

class TensorManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = model_store_test::MakeScratchDir();
    model_ = model_store_test::WriteTestModel(dir_ + "/model.gguf");
    absl::StatusOr<TensorManifest> m = TensorManifest::Compute(model_.path, *model_.file);
    ASSERT_TRUE(m.ok()) << m.status();
    manifest_ = *std::move(m);
  }
  void TearDown() override { model_store_test::RemoveScratchDir(dir_); }

  std::string dir_;
  TestModel model_;
  TensorManifest manifest_;
};

TEST_F(TensorManifestTest, ComputeHashesEveryChunkAtAbsoluteOffsets) {
  const GgufFile& f = *model_.file;
  ASSERT_EQ(manifest_.tensors().size(), kTensorCount);
  for (size_t i = 0; i < kTensorCount; ++i) {
    const TensorDigest& d = manifest_.tensors()[i];
    const GgufTensorInfo& t = f.tensors()[i];
    EXPECT_EQ(d.name, t.name);
    EXPECT_EQ(d.offset, f.data_offset() + t.offset);
    EXPECT_EQ(d.size, t.n_bytes);
    for (uint64_t c = 0; c < d.chunks(); ++c) {
      const std::string bytes =
          model_.bytes.substr(d.offset + c * kManifestChunkBytes, manifest_.ChunkSize(i, c));
      EXPECT_EQ(d.chunk_sha256[c], Sha256(bytes)) << d.name << " chunk " << c;
    }
  }
  EXPECT_EQ(manifest_.tensors()[kBig].chunks(), 3u);
  EXPECT_EQ(manifest_.ChunkSize(kBig, 2), 1u << 20);
  EXPECT_EQ(manifest_.tensors()[kMid].chunks(), 2u);
  EXPECT_EQ(manifest_.tensors()[kSmallA].chunks(), 1u);
  EXPECT_EQ(manifest_.digest(), Sha256(manifest_.Serialize()));
}

TEST_F(TensorManifestTest, ComputeReportsProgressToTheEnd) {
  uint64_t last_done = 0, last_total = 0;
  int calls = 0;
  ASSERT_TRUE(TensorManifest::Compute(model_.path, *model_.file, [&](uint64_t d, uint64_t t) {
                ++calls;
                last_done = d;
                last_total = t;
              }).ok());
  EXPECT_GE(calls, 1);
  EXPECT_EQ(last_done, last_total);
  uint64_t sum = 0;
  for (const TensorDigest& d : manifest_.tensors()) sum += d.size;
  EXPECT_EQ(last_total, sum);
}

TEST_F(TensorManifestTest, ComputeStopsWhenCancelled) {
  int polls = 0;
  absl::StatusOr<TensorManifest> m =
      TensorManifest::Compute(model_.path, *model_.file, nullptr, [&] { return ++polls > 2; });
  EXPECT_EQ(m.status().code(), absl::StatusCode::kCancelled) << m.status();
  EXPECT_EQ(polls, 3);
}

TEST_F(TensorManifestTest, SerializeParseRoundTrip) {
  const std::string bytes = manifest_.Serialize();
  EXPECT_EQ(bytes, Encode(manifest_.tensors()));  // the documented format
  absl::StatusOr<TensorManifest> parsed = TensorManifest::Parse(bytes, *model_.file);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->digest(), manifest_.digest());
  EXPECT_EQ(parsed->Serialize(), bytes);
  ASSERT_EQ(parsed->tensors().size(), kTensorCount);
  EXPECT_EQ(parsed->tensors()[kBig].chunk_sha256, manifest_.tensors()[kBig].chunk_sha256);
}

TEST_F(TensorManifestTest, ChunkMatchesChecksLengthAndHash) {
  const TensorDigest& big = manifest_.tensors()[kBig];
  std::string chunk1 = model_.bytes.substr(big.offset + kManifestChunkBytes, kManifestChunkBytes);
  EXPECT_TRUE(manifest_.ChunkMatches(kBig, 1, chunk1));
  EXPECT_FALSE(manifest_.ChunkMatches(kBig, 0, chunk1));  // right length, wrong place
  EXPECT_FALSE(manifest_.ChunkMatches(kBig, 1, std::string_view(chunk1).substr(1)));
  EXPECT_FALSE(manifest_.ChunkMatches(kBig, 3, chunk1));
  EXPECT_FALSE(manifest_.ChunkMatches(kTensorCount, 0, chunk1));
  chunk1[12345] ^= 1;
  EXPECT_FALSE(manifest_.ChunkMatches(kBig, 1, chunk1));
}

TEST_F(TensorManifestTest, ParseRejectsTruncatedAndTrailingBytes) {
  const std::string bytes = manifest_.Serialize();
  for (size_t n : {size_t{0}, size_t{7}, size_t{8}, size_t{23}, size_t{30}, bytes.size() / 2,
                   bytes.size() - 1}) {
    absl::StatusOr<TensorManifest> p = TensorManifest::Parse(bytes.substr(0, n), *model_.file);
    EXPECT_TRUE(absl::IsDataLoss(p.status())) << n << ": " << p.status();
  }
  EXPECT_TRUE(absl::IsDataLoss(TensorManifest::Parse(bytes + "x", *model_.file).status()));
  std::string bad_magic = bytes;
  bad_magic[0] = 'X';
  EXPECT_TRUE(absl::IsDataLoss(TensorManifest::Parse(bad_magic, *model_.file).status()));
}

TEST_F(TensorManifestTest, ParseRejectsEachWrongField) {
  struct Case {
    const char* what;
    void (*mutate)(std::vector<TensorDigest>*);
  };
  const Case cases[] = {
      {"renamed", [](std::vector<TensorDigest>* t) { (*t)[kMid].name = "blk.0.mud"; }},
      {"offset", [](std::vector<TensorDigest>* t) { (*t)[kSmallA].offset += 32; }},
      {"size", [](std::vector<TensorDigest>* t) { (*t)[kSmallA].size -= 4; }},
      {"chunk count", [](std::vector<TensorDigest>* t) { (*t)[kBig].chunk_sha256.pop_back(); }},
      {"extra chunk",
       [](std::vector<TensorDigest>* t) {
         (*t)[kSmallA].chunk_sha256.push_back(std::string(32, 'x'));
       }},
      {"swapped", [](std::vector<TensorDigest>* t) { std::swap((*t)[kBig], (*t)[kMid]); }},
      {"long name", [](std::vector<TensorDigest>* t) { (*t)[0].name = std::string(70000, 'a'); }},
  };
  for (const Case& c : cases) {
    std::vector<TensorDigest> tensors = manifest_.tensors();
    c.mutate(&tensors);
    absl::StatusOr<TensorManifest> p = TensorManifest::Parse(Encode(tensors), *model_.file);
    EXPECT_TRUE(absl::IsDataLoss(p.status())) << c.what << ": " << p.status();
  }
  // One fewer tensor, and a count that would be a huge allocation if trusted.
  std::vector<TensorDigest> fewer = manifest_.tensors();
  fewer.pop_back();
  EXPECT_TRUE(absl::IsDataLoss(TensorManifest::Parse(Encode(fewer), *model_.file).status()));
  EXPECT_TRUE(absl::IsDataLoss(
      TensorManifest::Parse(Encode(manifest_.tensors(), uint64_t{1} << 60), *model_.file)
          .status()));
  // A chunk count that claims more hashes than there are bytes.
  std::vector<TensorDigest> one = {manifest_.tensors()[0]};
  std::string huge = Encode(one, kTensorCount);
  const size_t count_at = 24 + 4 + one[0].name.size() + 16;
  for (int i = 0; i < 8; ++i) huge[count_at + i] = static_cast<char>(0xff);
  EXPECT_TRUE(absl::IsDataLoss(TensorManifest::Parse(huge, *model_.file).status()));
  // A manifest of another file.
  TestModel other = model_store_test::WriteOtherModel(dir_ + "/other.gguf");
  EXPECT_TRUE(absl::IsDataLoss(TensorManifest::Parse(manifest_.Serialize(), *other.file).status()));
}

class ManifestCacheTest : public TensorManifestTest {
 protected:
  // LoadOrComputeManifest, counting whether it hashed the file.
  absl::StatusOr<TensorManifest> Load(const std::string& path, const GgufFile& file,
                                      std::string_view fp, const std::string& fallback,
                                      bool* computed) {
    *computed = false;
    return LoadOrComputeManifest(path, file, fp, fallback,
                                 [computed](uint64_t, uint64_t) { *computed = true; });
  }
};

TEST_F(ManifestCacheTest, CachesBesideTheModelAndRecomputesWhenItChanges) {
  const std::string fallback = dir_ + "/fallback";
  bool computed = false;
  absl::StatusOr<TensorManifest> first =
      Load(model_.path, *model_.file, "fp1", fallback, &computed);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(computed);
  EXPECT_EQ(first->digest(), manifest_.digest());
  EXPECT_TRUE(Exists(model_.path + ".ringlm-manifest"));
  EXPECT_FALSE(Exists(fallback));

  absl::StatusOr<TensorManifest> again =
      Load(model_.path, *model_.file, "fp1", fallback, &computed);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(computed);
  EXPECT_EQ(again->digest(), manifest_.digest());

  // Another fingerprint: recomputed.
  ASSERT_TRUE(Load(model_.path, *model_.file, "fp2", fallback, &computed).ok());
  EXPECT_TRUE(computed);
  ASSERT_TRUE(Load(model_.path, *model_.file, "fp2", fallback, &computed).ok());
  EXPECT_FALSE(computed);

  // A new modification time: recomputed.
  const struct timespec times[2] = {{1000, 0}, {1000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, model_.path.c_str(), times, 0), 0);
  ASSERT_TRUE(Load(model_.path, *model_.file, "fp2", fallback, &computed).ok());
  EXPECT_TRUE(computed);

  // Same layout, other bytes: a different manifest, not the cached one.
  TestModel rewritten = model_store_test::WriteTestModel(model_.path, 99);
  absl::StatusOr<TensorManifest> changed =
      Load(rewritten.path, *rewritten.file, "fp2", fallback, &computed);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(computed);
  EXPECT_NE(changed->digest(), manifest_.digest());

  // A corrupt cache file is recomputed, not trusted.
  std::string cached = model_store_test::ReadWholeFile(rewritten.path + ".ringlm-manifest");
  cached[cached.size() - 5] ^= 1;
  {
    FILE* f = std::fopen((rewritten.path + ".ringlm-manifest").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(cached.data(), 1, cached.size(), f);
    std::fclose(f);
  }
  absl::StatusOr<TensorManifest> repaired =
      Load(rewritten.path, *rewritten.file, "fp2", fallback, &computed);
  ASSERT_TRUE(repaired.ok());
  EXPECT_TRUE(computed);
  EXPECT_EQ(repaired->digest(), changed->digest());
}

// The model folder is read-only (as /work/shared/models is): the manifest is
// cached in the fallback folder. Runs as root too: a folder marked 0555 is
// left alone even when access() would allow writing.
TEST_F(ManifestCacheTest, ReadOnlyModelFolderUsesFallback) {
  const std::string models = dir_ + "/ro";
  ASSERT_EQ(::mkdir(models.c_str(), 0755), 0);
  TestModel m = model_store_test::WriteTestModel(models + "/model.gguf");
  ASSERT_EQ(::chmod(models.c_str(), 0555), 0);
  const std::string fallback = dir_ + "/state/manifests";
  bool computed = false;
  absl::StatusOr<TensorManifest> first = Load(m.path, *m.file, "fp", fallback, &computed);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(computed);
  EXPECT_FALSE(Exists(m.path + ".ringlm-manifest"));
  const std::string expected = fallback + "/" + HexEncode(Sha256("fp")).substr(0, 16) + "-" +
                               std::to_string(m.bytes.size()) + ".manifest";
  EXPECT_TRUE(Exists(expected)) << expected;

  absl::StatusOr<TensorManifest> again = Load(m.path, *m.file, "fp", fallback, &computed);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(computed);
  EXPECT_EQ(again->digest(), first->digest());
}

// The bundled model, in its read-only shared folder.
TEST_F(ManifestCacheTest, SharedModelIsNotWrittenBeside) {
  const std::string path = std::string(RINGLM_SHARED_DIR) + "/models/stories260K-f32.gguf";
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path);
  if (!f.ok()) GTEST_SKIP() << "no shared model: " << f.status();
  const std::string folder = path.substr(0, path.rfind('/'));
  struct stat dst;
  ASSERT_EQ(::stat(folder.c_str(), &dst), 0);
  if ((dst.st_mode & 0222) != 0) GTEST_SKIP() << "shared model folder is writable here";
  bool computed = false;
  const std::string fallback = dir_ + "/manifests";
  absl::StatusOr<TensorManifest> m = Load(path, **f, "shared", fallback, &computed);
  const bool beside = Exists(path + ".ringlm-manifest");
  if (beside) ::unlink((path + ".ringlm-manifest").c_str());  // never leave it there
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(beside);
  EXPECT_EQ(m->tensors().size(), (*f)->tensors().size());
  ASSERT_TRUE(Load(path, **f, "shared", fallback, &computed).ok());
  EXPECT_FALSE(computed);
}

}  // namespace
}  // namespace ringlm
