// ModelShare, the source side of model distribution: it serves the header,
// the manifest and the held tensors' chunks of the bundled model byte for
// byte, refuses what is out of range or not held with a clear code, and its
// two RPC handlers (over a real gRPC server) say the same.
#include "daemon/model_fetch/model_share.h"

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/testing/temp_dir.h"
#include "daemon/model_fetch/peer_tensor_source.h"
#include "daemon/model_fetch/test_share_member.h"
#include "daemon/rpc/peer_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model_store/model_cache.h"
#include "security/crypto.h"
#include "security/grpc_test_environment.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;

constexpr char kFingerprint[] = "stories260K";

// The bundled model, copied to a folder of the test's own (so its manifest
// cache lands there), with its share.
class ModelShareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    original_ = testing::ReadFileBytes(testing::BundledModelPath());
    ASSERT_GT(original_.size(), 0u);
    path_ = testing::WriteModelCopy(original_, "model_share");
    state_dir_ = testing::MakeTempDir("model_share_state");
    absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path_);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
    absl::StatusOr<std::unique_ptr<ModelShare>> share =
        ModelShare::ForFile(path_, *file_, kFingerprint, state_dir_);
    ASSERT_TRUE(share.ok()) << share.status();
    share_ = *std::move(share);
  }

  // Tensor `t`'s bytes in the original file.
  std::string TensorBytes(const GgufFile& file, const std::string& bytes, size_t t) const {
    const GgufTensorInfo& info = file.tensors()[t];
    return bytes.substr(file.data_offset() + info.offset, info.n_bytes);
  }

  std::string original_;
  std::string path_;
  std::string state_dir_;
  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<ModelShare> share_;
};

TEST_F(ModelShareTest, ForFileServesTheHeaderAndEveryTensorAsTheFileHoldsThem) {
  ASSERT_GT(file_->tensors().size(), 1u);
  EXPECT_EQ(share_->fingerprint(), kFingerprint);
  EXPECT_EQ(share_->file_size(), original_.size());
  EXPECT_EQ(share_->header_size(), file_->data_offset());
  EXPECT_EQ(share_->header_sha256(), Sha256(original_.substr(0, file_->data_offset())));
  EXPECT_EQ(share_->Held(), std::vector<bool>(file_->tensors().size(), true));

  // The header, in chunks (one, for this model).
  absl::StatusOr<uint64_t> header_chunks = share_->Chunks(true, 0);
  ASSERT_TRUE(header_chunks.ok()) << header_chunks.status();
  ASSERT_EQ(*header_chunks, 1u);
  std::string chunk;
  ASSERT_TRUE(share_->ReadChunk(true, 0, 0, &chunk).ok());
  EXPECT_EQ(chunk, original_.substr(0, file_->data_offset()));

  // Every tensor, whole (each under 4 MiB: one chunk).
  for (size_t t = 0; t < file_->tensors().size(); ++t) {
    SCOPED_TRACE(file_->tensors()[t].name);
    absl::StatusOr<uint64_t> chunks = share_->Chunks(false, t);
    ASSERT_TRUE(chunks.ok()) << chunks.status();
    EXPECT_EQ(*chunks, 1u);
    ASSERT_TRUE(share_->ReadChunk(false, t, 0, &chunk).ok());
    EXPECT_EQ(chunk, TensorBytes(*file_, original_, t));
  }
}

TEST_F(ModelShareTest, TheManifestIsComputedInTheBackgroundAndDescribesTheFile) {
  // The first call starts the computation and cannot have its result yet.
  const absl::StatusOr<std::shared_ptr<const TensorManifest>> first = share_->Manifest();
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(first.status().message()), HasSubstr("computing"));

  ASSERT_TRUE(testing::AwaitManifest(*share_).ok());
  absl::StatusOr<std::shared_ptr<const TensorManifest>> served = share_->Manifest();
  ASSERT_TRUE(served.ok()) << served.status();
  absl::StatusOr<TensorManifest> expected = TensorManifest::Compute(path_, *file_);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ((*served)->digest(), expected->digest());
  ASSERT_EQ((*served)->tensors().size(), file_->tensors().size());
  std::string chunk;
  for (size_t t = 0; t < file_->tensors().size(); ++t) {
    ASSERT_TRUE(share_->ReadChunk(false, t, 0, &chunk).ok());
    EXPECT_TRUE((*served)->ChunkMatches(t, 0, chunk)) << file_->tensors()[t].name;
  }
  // Cached beside the file (its folder is writable), for the next start.
  EXPECT_TRUE(std::filesystem::exists(path_ + ".ringlm-manifest"));
}

TEST_F(ModelShareTest, TheManifestGoesToTheStateDirWhenTheModelsFolderIsReadOnly) {
  const std::string folder = std::filesystem::path(path_).parent_path();
  ASSERT_EQ(::chmod(folder.c_str(), 0555), 0);
  const absl::Status s = testing::AwaitManifest(*share_);
  ASSERT_EQ(::chmod(folder.c_str(), 0755), 0);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(std::filesystem::exists(path_ + ".ringlm-manifest"));
  EXPECT_FALSE(std::filesystem::is_empty(state_dir_));
}

TEST_F(ModelShareTest, RequestsPastTheEndAreOutOfRange) {
  const size_t n = file_->tensors().size();
  std::string chunk = "untouched";
  EXPECT_EQ(share_->Chunks(false, n).status().code(), absl::StatusCode::kOutOfRange);
  const absl::Status no_tensor = share_->ReadChunk(false, n, 0, &chunk);
  EXPECT_EQ(no_tensor.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(no_tensor.message()), HasSubstr(std::to_string(n) + " tensors"));
  EXPECT_EQ(share_->ReadChunk(false, 0, 1, &chunk).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(share_->ReadChunk(false, n - 1, 1u << 30, &chunk).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(share_->ReadChunk(true, 0, 1, &chunk).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(chunk, "untouched");
}

TEST_F(ModelShareTest, ATensorOfSeveralChunksIsServedInManifestChunks) {
  const std::string bytes = testing::MultiChunkModelBytes();
  const std::string path = testing::WriteModelCopy(bytes, "model_share_big");
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<std::unique_ptr<ModelShare>> share =
      ModelShare::ForFile(path, **file, "big", state_dir_);
  ASSERT_TRUE(share.ok()) << share.status();
  ASSERT_TRUE(testing::AwaitManifest(**share).ok());
  const TensorManifest& manifest = **(*share)->Manifest();

  absl::StatusOr<uint64_t> chunks = (*share)->Chunks(false, 0);
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  ASSERT_EQ(*chunks, 3u);
  const std::string whole = TensorBytes(**file, bytes, 0);
  std::string joined;
  for (uint64_t c = 0; c < 3; ++c) {
    std::string chunk;
    ASSERT_TRUE((*share)->ReadChunk(false, 0, c, &chunk).ok());
    EXPECT_EQ(chunk.size(), c < 2 ? kManifestChunkBytes : 1048576u);
    EXPECT_TRUE(manifest.ChunkMatches(0, c, chunk)) << c;
    joined += chunk;
  }
  EXPECT_EQ(joined, whole);
  std::string past;
  EXPECT_EQ((*share)->ReadChunk(false, 0, 3, &past).code(), absl::StatusCode::kOutOfRange);
}

// A partial copy (a node that fetched some tensors) serves those only.
TEST_F(ModelShareTest, ForCacheServesOnlyTheTensorsItHolds) {
  ASSERT_TRUE(testing::AwaitManifest(*share_).ok());
  const TensorManifest& manifest = **share_->Manifest();
  absl::StatusOr<std::unique_ptr<ModelCache>> created = ModelCache::Create(
      testing::MakeTempDir("model_share_cache") + "/m", original_.substr(0, file_->data_offset()),
      original_.size(), manifest.Serialize());
  ASSERT_TRUE(created.ok()) << created.status();
  std::shared_ptr<ModelCache> cache = *std::move(created);
  const std::vector<size_t> held = {1, 3};
  for (size_t t : held) {
    ASSERT_TRUE(cache->WriteChunk(t, 0, TensorBytes(*file_, original_, t)).ok());
    ASSERT_TRUE(cache->CommitTensor(t).ok());
  }
  std::unique_ptr<ModelShare> partial = ModelShare::ForCache(cache, kFingerprint);

  EXPECT_EQ(partial->file_size(), original_.size());
  EXPECT_EQ(partial->header_sha256(), share_->header_sha256());
  // Its manifest is the one it verified against, at once.
  absl::StatusOr<std::shared_ptr<const TensorManifest>> m = partial->Manifest();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->digest(), manifest.digest());

  std::vector<bool> expected_held(file_->tensors().size(), false);
  for (size_t t : held) expected_held[t] = true;
  EXPECT_EQ(partial->Held(), expected_held);
  std::string chunk;
  for (size_t t = 0; t < file_->tensors().size(); ++t) {
    SCOPED_TRACE(t);
    if (expected_held[t]) {
      ASSERT_TRUE(partial->ReadChunk(false, t, 0, &chunk).ok());
      EXPECT_EQ(chunk, TensorBytes(*file_, original_, t));
    } else {
      EXPECT_EQ(partial->Chunks(false, t).status().code(), absl::StatusCode::kNotFound);
      EXPECT_EQ(partial->ReadChunk(false, t, 0, &chunk).code(), absl::StatusCode::kNotFound);
    }
  }
  EXPECT_EQ(partial->Chunks(false, file_->tensors().size()).status().code(),
            absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(partial->ReadChunk(true, 0, 0, &chunk).ok());
  EXPECT_EQ(chunk, original_.substr(0, file_->data_offset()));
}

TEST_F(ModelShareTest, AtMostEightStreamsAtOnce) {
  for (int i = 0; i < ModelShare::kMaxStreams; ++i) EXPECT_TRUE(share_->BeginStream()) << i;
  EXPECT_FALSE(share_->BeginStream());
  EXPECT_FALSE(share_->BeginStream());  // a refusal takes no slot
  share_->EndStream();
  EXPECT_TRUE(share_->BeginStream());
  EXPECT_FALSE(share_->BeginStream());
  for (int i = 0; i < ModelShare::kMaxStreams; ++i) share_->EndStream();
  EXPECT_TRUE(share_->BeginStream());
  share_->EndStream();
}

TEST_F(ModelShareTest, GetModelDescribesWhatTheNodeServes) {
  v1::GetModelReply reply;
  absl::Status s;
  ServeGetModel(nullptr, GetModelRequestFor(kFingerprint), &reply, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);  // no model yet
  ServeGetModel(share_.get(), GetModelRequestFor("another"), &reply, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  ServeGetModel(share_.get(), GetModelRequestFor(kFingerprint), &reply, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);  // the manifest is being computed
  EXPECT_THAT(std::string(s.message()), HasSubstr("computing"));

  ASSERT_TRUE(testing::AwaitManifest(*share_).ok());
  const TensorManifest& manifest = **share_->Manifest();
  ServeGetModel(share_.get(), GetModelRequestFor(kFingerprint), &reply, &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(reply.model_fingerprint(), kFingerprint);
  EXPECT_EQ(reply.file_size(), original_.size());
  EXPECT_EQ(reply.header_size(), file_->data_offset());
  EXPECT_EQ(reply.header_sha256(), Sha256(original_.substr(0, file_->data_offset())));
  EXPECT_EQ(reply.manifest_digest(), manifest.digest());
  EXPECT_TRUE(reply.manifest().empty());  // not asked for
  absl::StatusOr<std::vector<bool>> held = DecodeHeld(reply.held(), file_->tensors().size());
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(*held, std::vector<bool>(file_->tensors().size(), true));

  v1::GetModelReply with_manifest;
  ServeGetModel(share_.get(), GetModelRequestFor(kFingerprint, true), &with_manifest, &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(with_manifest.manifest(), manifest.Serialize());
  EXPECT_EQ(Sha256(with_manifest.manifest()), with_manifest.manifest_digest());
}

// The FetchTensor handler behind a real gRPC server.
class FetchTensorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    original_ = testing::ReadFileBytes(testing::BundledModelPath());
    member_ = std::make_unique<testing::ShareMember>(
        "a", testing::WriteModelCopy(original_, "fetch_tensor"), kFingerprint);
    ASSERT_TRUE(member_->ok());
  }

  struct Fetched {
    absl::Status status;
    std::vector<uint64_t> chunk_numbers;
    std::string bytes;
  };
  Fetched Fetch(const v1::FetchTensorRequest& request) {
    EXPECT_TRUE(testing::AwaitNoStreams(member_->share()));
    Fetched f;
    f.status =
        client_.FetchTensor(member_->address(), request, 1 << 20, [&](const v1::TensorChunk& c) {
          f.chunk_numbers.push_back(c.chunk());
          f.bytes += c.data();
          return true;
        });
    return f;
  }
  static v1::FetchTensorRequest Request(const std::string& fingerprint, uint32_t tensor,
                                        uint64_t first_chunk = 0, bool header = false) {
    v1::FetchTensorRequest r;
    r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    r.set_model_fingerprint(fingerprint);
    r.set_tensor(tensor);
    r.set_first_chunk(first_chunk);
    r.set_header(header);
    return r;
  }

  std::string original_;
  std::unique_ptr<testing::ShareMember> member_;
  PeerClient client_{RpcOptions{}, std::nullopt, "fetcher"};
};

TEST_F(FetchTensorTest, StreamsTheTensorsAndTheHeaderByteForByte) {
  const GgufFile& file = member_->file();
  uint64_t expected_bytes = 0;
  for (size_t t = 0; t < file.tensors().size(); ++t) {
    SCOPED_TRACE(file.tensors()[t].name);
    const Fetched f = Fetch(Request(kFingerprint, static_cast<uint32_t>(t)));
    ASSERT_TRUE(f.status.ok()) << f.status;
    EXPECT_EQ(f.chunk_numbers, std::vector<uint64_t>{0});
    const GgufTensorInfo& info = file.tensors()[t];
    EXPECT_EQ(f.bytes, original_.substr(file.data_offset() + info.offset, info.n_bytes));
    expected_bytes += info.n_bytes;
  }
  const Fetched header = Fetch(Request(kFingerprint, 0, 0, true));
  ASSERT_TRUE(header.status.ok()) << header.status;
  EXPECT_EQ(header.bytes, original_.substr(0, file.data_offset()));
  expected_bytes += file.data_offset();
  EXPECT_EQ(member_->service().served_bytes(), static_cast<double>(expected_bytes));
}

TEST_F(FetchTensorTest, ResumesAtTheChunkAsked) {
  const std::string bytes = testing::MultiChunkModelBytes();
  testing::ShareMember big("big", testing::WriteModelCopy(bytes, "fetch_tensor_big"), "big");
  ASSERT_TRUE(big.ok());
  Fetched f;
  f.status = client_.FetchTensor(big.address(), Request("big", 0, 1), 5 << 20,
                                 [&](const v1::TensorChunk& c) {
                                   f.chunk_numbers.push_back(c.chunk());
                                   f.bytes += c.data();
                                   return true;
                                 });
  ASSERT_TRUE(f.status.ok()) << f.status;
  EXPECT_EQ(f.chunk_numbers, (std::vector<uint64_t>{1, 2}));
  const GgufTensorInfo& info = big.file().tensors()[0];
  EXPECT_EQ(f.bytes, bytes.substr(big.file().data_offset() + info.offset + kManifestChunkBytes,
                                  info.n_bytes - kManifestChunkBytes));
}

TEST_F(FetchTensorTest, RefusesWhatItCannotServeWithAClearCode) {
  const uint32_t n = static_cast<uint32_t>(member_->file().tensors().size());
  Fetched f = Fetch(Request(kFingerprint, n));
  EXPECT_EQ(f.status.code(), absl::StatusCode::kOutOfRange) << f.status;
  EXPECT_TRUE(f.bytes.empty());
  f = Fetch(Request("another-model", 0));
  EXPECT_EQ(f.status.code(), absl::StatusCode::kNotFound) << f.status;
  EXPECT_TRUE(f.bytes.empty());
  // What the gRPC edge decided about the caller is final.
  member_->service().set_refusal(absl::PermissionDeniedError("clients may not fetch"));
  f = Fetch(Request(kFingerprint, 0));
  EXPECT_EQ(f.status.code(), absl::StatusCode::kPermissionDenied) << f.status;
  EXPECT_THAT(std::string(f.status.message()), HasSubstr("clients may not fetch"));
  EXPECT_TRUE(f.bytes.empty());
  member_->service().set_refusal(absl::OkStatus());
  // A node that serves no model yet.
  member_->service().set_fetch_share(nullptr);
  f = Fetch(Request(kFingerprint, 0));
  EXPECT_EQ(f.status.code(), absl::StatusCode::kUnavailable) << f.status;
  EXPECT_EQ(member_->service().served_bytes(), 0);
}

TEST_F(FetchTensorTest, ANinthStreamIsResourceExhausted) {
  // Eight streams in progress (as far as the share can tell).
  for (int i = 0; i < ModelShare::kMaxStreams; ++i) ASSERT_TRUE(member_->share().BeginStream());
  auto fetch = [&] {
    return client_.FetchTensor(member_->address(), Request(kFingerprint, 0), 1 << 20,
                               [](const v1::TensorChunk&) { return true; });
  };
  absl::Status s = fetch();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(member_->service().refused_streams(), 1);
  EXPECT_EQ(member_->service().served_bytes(), 0);
  member_->share().EndStream();
  // One slot free: a stream is served in it.
  s = fetch();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(member_->service().refused_streams(), 1);
  for (int i = 1; i < ModelShare::kMaxStreams; ++i) member_->share().EndStream();
  // The finished stream gives its slot back (when gRPC is done with it).
  EXPECT_TRUE(testing::AwaitNoStreams(member_->share()));
}

// Resuming at the chunk after the last sends nothing: the caller has it all.
// (Not refused, unlike ReadChunk past the end.)
TEST_F(FetchTensorTest, AFirstChunkPastTheEndSendsNothing) {
  const Fetched f = Fetch(Request(kFingerprint, 0, 1));
  EXPECT_TRUE(f.status.ok()) << f.status;
  EXPECT_TRUE(f.chunk_numbers.empty());
  const Fetched far = Fetch(Request(kFingerprint, 0, 1ull << 40));
  EXPECT_TRUE(far.status.ok()) << far.status;
  EXPECT_TRUE(far.bytes.empty());
}

}  // namespace
}  // namespace ringlm
