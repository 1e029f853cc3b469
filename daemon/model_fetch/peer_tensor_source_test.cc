// PeerTensorSource: a member as the fetcher sees it, over real gRPC to a
// ModelShare. What it holds (nothing when it serves another manifest or
// cannot answer), and the chunks of a tensor in order.
#include "daemon/model_fetch/peer_tensor_source.h"

#include <string>
#include <vector>

#include "daemon/model_fetch/test_share_member.h"
#include "gtest/gtest.h"
#include "model_store/model_cache.h"

namespace ringlm {
namespace {

constexpr char kFingerprint[] = "stories260K";

TEST(PeerTensorSourceTest, GetModelRequestForNamesTheModel) {
  const v1::GetModelRequest r = GetModelRequestFor("fp");
  EXPECT_EQ(r.protocol_version(), static_cast<uint32_t>(v1::PROTOCOL_VERSION_CURRENT));
  EXPECT_EQ(r.model_fingerprint(), "fp");
  EXPECT_FALSE(r.with_manifest());
  EXPECT_TRUE(GetModelRequestFor("fp", true).with_manifest());
}

TEST(PeerTensorSourceTest, DecodeHeldReadsBitIOfByteIOver8) {
  // Tensors 0, 2 and 8 of 9.
  absl::StatusOr<std::vector<bool>> held = DecodeHeld(std::string("\x05\x01", 2), 9);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(*held, (std::vector<bool>{true, false, true, false, false, false, false, false, true}));
  held = DecodeHeld("", 0);
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held->empty());
  held = DecodeHeld(std::string("\xff", 1), 8);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(*held, std::vector<bool>(8, true));
}

TEST(PeerTensorSourceTest, DecodeHeldRefusesABitmapOfAnotherLength) {
  EXPECT_EQ(DecodeHeld(std::string(1, '\x01'), 9).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeHeld(std::string(3, '\x01'), 9).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeHeld(std::string(1, '\x01'), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

class PeerTensorSourceFetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    original_ = testing::ReadFileBytes(testing::BundledModelPath());
    member_ = std::make_unique<testing::ShareMember>(
        "a", testing::WriteModelCopy(original_, "peer_source"), kFingerprint);
    ASSERT_TRUE(member_->ok());
  }

  std::string TensorBytes(size_t t) const {
    const GgufTensorInfo& info = member_->file().tensors()[t];
    return original_.substr(member_->file().data_offset() + info.offset, info.n_bytes);
  }

  std::string original_;
  std::unique_ptr<testing::ShareMember> member_;
  PeerClient client_{RpcOptions{}, std::nullopt, "fetcher"};
};

TEST_F(PeerTensorSourceFetchTest, AMemberWithTheFileHoldsEveryTensor) {
  PeerTensorSource source(&client_, "a", member_->address(), kFingerprint, &member_->manifest());
  EXPECT_EQ(source.name(), "a");
  EXPECT_EQ(source.Holdings(), std::vector<bool>(member_->file().tensors().size(), true));
}

TEST_F(PeerTensorSourceFetchTest, APartialCopyHoldsWhatItFetched) {
  const TensorManifest& manifest = member_->manifest();
  absl::StatusOr<std::unique_ptr<ModelCache>> created = ModelCache::Create(
      testing::MakeTempDir("peer_source_cache") + "/m",
      original_.substr(0, member_->file().data_offset()), original_.size(), manifest.Serialize());
  ASSERT_TRUE(created.ok()) << created.status();
  std::shared_ptr<ModelCache> cache = *std::move(created);
  ASSERT_TRUE(cache->WriteChunk(2, 0, TensorBytes(2)).ok());
  ASSERT_TRUE(cache->CommitTensor(2).ok());
  std::unique_ptr<ModelShare> partial = ModelShare::ForCache(cache, kFingerprint);
  testing::ShareService service("p", partial.get());
  testing::TestGrpcServer server(&service);
  ASSERT_TRUE(server.started());

  PeerTensorSource source(&client_, "p", server.address(), kFingerprint, &manifest);
  std::vector<bool> expected(manifest.tensors().size(), false);
  expected[2] = true;
  EXPECT_EQ(source.Holdings(), expected);
  // What it does not hold, it refuses.
  const absl::Status s = source.Fetch(3, 0, [](uint64_t, std::string_view) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  std::string got;
  ASSERT_TRUE(source
                  .Fetch(2, 0,
                         [&](uint64_t, std::string_view bytes) {
                           got += bytes;
                           return true;
                         })
                  .ok());
  EXPECT_EQ(got, TensorBytes(2));
  server.Shutdown();
}

TEST_F(PeerTensorSourceFetchTest, AMemberThatCannotServeThisManifestHoldsNothing) {
  // Another model under this fingerprint: its manifest digest differs.
  const std::string other_bytes = testing::MultiChunkModelBytes();
  testing::ShareMember other("o", testing::WriteModelCopy(other_bytes, "peer_source_other"),
                             kFingerprint);
  ASSERT_TRUE(other.ok());
  PeerTensorSource wrong_manifest(&client_, "o", other.address(), kFingerprint,
                                  &member_->manifest());
  EXPECT_TRUE(wrong_manifest.Holdings().empty());

  // Another fingerprint than the member serves.
  PeerTensorSource wrong_model(&client_, "a", member_->address(), "another-model",
                               &member_->manifest());
  EXPECT_TRUE(wrong_model.Holdings().empty());

  // Nobody there.
  PeerTensorSource gone(&client_, "gone", "127.0.0.1:1", kFingerprint, &member_->manifest());
  EXPECT_TRUE(gone.Holdings().empty());
}

TEST_F(PeerTensorSourceFetchTest, FetchHandsOnTheChunksInOrder) {
  PeerTensorSource source(&client_, "a", member_->address(), kFingerprint, &member_->manifest());
  for (size_t t : {size_t{0}, member_->file().tensors().size() - 1}) {
    std::vector<uint64_t> numbers;
    std::string got;
    const absl::Status s = source.Fetch(t, 0, [&](uint64_t chunk, std::string_view bytes) {
      numbers.push_back(chunk);
      got += bytes;
      return true;
    });
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(numbers, std::vector<uint64_t>{0});
    EXPECT_EQ(got, TensorBytes(t));
  }
}

TEST_F(PeerTensorSourceFetchTest, FetchResumesAndStopsWhereTheCallerSays) {
  const std::string bytes = testing::MultiChunkModelBytes();
  testing::ShareMember big("big", testing::WriteModelCopy(bytes, "peer_source_big"), "big");
  ASSERT_TRUE(big.ok());
  PeerTensorSource source(&client_, "big", big.address(), "big", &big.manifest());
  std::vector<uint64_t> numbers;
  ASSERT_TRUE(source
                  .Fetch(0, 1,
                         [&](uint64_t chunk, std::string_view data) {
                           numbers.push_back(chunk);
                           EXPECT_TRUE(big.manifest().ChunkMatches(0, chunk, data)) << chunk;
                           return true;
                         })
                  .ok());
  EXPECT_EQ(numbers, (std::vector<uint64_t>{1, 2}));

  // on_chunk returning false ends the call early, and that is no error.
  numbers.clear();
  ASSERT_TRUE(source
                  .Fetch(0, 0,
                         [&](uint64_t chunk, std::string_view) {
                           numbers.push_back(chunk);
                           return false;
                         })
                  .ok());
  EXPECT_EQ(numbers, std::vector<uint64_t>{0});
}

TEST_F(PeerTensorSourceFetchTest, ATensorOutsideTheManifestIsRefusedWithoutACall) {
  PeerTensorSource source(&client_, "a", member_->address(), kFingerprint, &member_->manifest());
  const int calls = member_->service().fetch_calls();
  const absl::Status s = source.Fetch(member_->manifest().tensors().size(), 0,
                                      [](uint64_t, std::string_view) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(member_->service().fetch_calls(), calls);
}

TEST_F(PeerTensorSourceFetchTest, AnUnreachableMemberFailsInTransport) {
  PeerTensorSource source(&client_, "gone", "127.0.0.1:1", kFingerprint, &member_->manifest());
  const absl::Status s = source.Fetch(0, 0, [](uint64_t, std::string_view) { return true; });
  EXPECT_TRUE(absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) << s;
}

}  // namespace
}  // namespace ringlm
