// BootstrapModel: a node with no model file learns the cluster's model from
// static peers (real ModelShares behind gRPC on loopback; discovery off),
// takes the manifest most members agree on, checks the header against its
// digest, creates its copy, and reuses that copy on the next start.
#include "daemon/model_fetch/model_bootstrap.h"

#include <memory>
#include <string>
#include <vector>

#include "daemon/model_fetch/test_share_member.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/crypto.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;

constexpr char kFingerprint[] = "stories260K";

class ModelBootstrapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    original_ = testing::ReadFileBytes(testing::BundledModelPath());
    ASSERT_GT(original_.size(), 0u);
  }

  // A member with its own copy of `bytes`, serving it as `fingerprint`.
  testing::ShareMember* AddMember(const std::string& id, const std::string& bytes,
                                  const std::string& fingerprint = kFingerprint) {
    members_.push_back(std::make_unique<testing::ShareMember>(
        id, testing::WriteModelCopy(bytes, "bootstrap_" + id), fingerprint));
    EXPECT_TRUE(members_.back()->ok());
    return members_.back().get();
  }
  // The bundled model with one byte of tensor data changed: another manifest.
  std::string Altered() const {
    std::string bytes = original_;
    bytes[bytes.size() - 100] ^= 0x01;
    return bytes;
  }

  ModelBootstrapOptions Options(std::vector<std::string> peers) const {
    ModelBootstrapOptions o;
    o.state_dir = state_dir_;
    o.node_id = "newcomer";
    o.discovery_enabled = false;
    o.static_peers = std::move(peers);
    o.patience = std::chrono::milliseconds(0);  // one round, then give up
    return o;
  }

  std::string original_;
  std::string state_dir_ = testing::MakeTempDir("bootstrap_state");
  std::vector<std::unique_ptr<testing::ShareMember>> members_;
  PeerClient client_{RpcOptions{}, std::nullopt, "newcomer"};
};

TEST_F(ModelBootstrapTest, CreatesACopyFromAMemberThenReusesIt) {
  testing::ShareMember* a = AddMember("a", original_);
  const uint64_t header_size = a->file().data_offset();
  {
    absl::StatusOr<BootstrappedModel> got = BootstrapModel(Options({a->address()}), client_);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->fingerprint, kFingerprint);  // the one model the members serve
    EXPECT_FALSE(got->reused);
    ASSERT_NE(got->cache, nullptr);
    EXPECT_EQ(got->cache->dir(), ModelCacheDir(state_dir_, kFingerprint));
    EXPECT_EQ(got->cache->header(), original_.substr(0, header_size));
    EXPECT_EQ(got->cache->file().file_size(), original_.size());
    EXPECT_EQ(got->cache->manifest().digest(), a->manifest().digest());
    EXPECT_TRUE(got->cache->Held().empty());  // no tensor bytes yet
  }
  const int get_model_calls = a->service().get_model_calls();
  absl::StatusOr<BootstrappedModel> again = BootstrapModel(Options({a->address()}), client_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->reused);
  EXPECT_EQ(again->fingerprint, kFingerprint);
  EXPECT_EQ(again->cache->manifest().digest(), a->manifest().digest());
  EXPECT_EQ(a->service().get_model_calls(), get_model_calls);  // nothing asked, nothing fetched
}

TEST_F(ModelBootstrapTest, MembersServingSeveralModelsNeedAChoice) {
  testing::ShareMember* one = AddMember("one", original_, "fp-one");
  testing::ShareMember* two = AddMember("two", original_, "fp-two");
  ModelBootstrapOptions options = Options({one->address(), two->address()});
  absl::StatusOr<BootstrappedModel> got = BootstrapModel(options, client_);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("fp-one"));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("fp-two"));

  options.fingerprint = "fp-two";
  got = BootstrapModel(options, client_);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->fingerprint, "fp-two");
  EXPECT_EQ(got->cache->dir(), ModelCacheDir(state_dir_, "fp-two"));
}

TEST_F(ModelBootstrapTest, TheManifestMostMembersAgreeOnWins) {
  // The odd one out is asked first.
  testing::ShareMember* odd = AddMember("odd", Altered());
  testing::ShareMember* a = AddMember("a", original_);
  testing::ShareMember* b = AddMember("b", original_);
  ASSERT_NE(odd->manifest().digest(), a->manifest().digest());
  absl::StatusOr<BootstrappedModel> got =
      BootstrapModel(Options({odd->address(), a->address(), b->address()}), client_);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->cache->manifest().digest(), a->manifest().digest());
}

TEST_F(ModelBootstrapTest, MembersSplitEvenlyAreRefused) {
  testing::ShareMember* a = AddMember("a", original_);
  testing::ShareMember* odd = AddMember("odd", Altered());
  absl::StatusOr<BootstrappedModel> got =
      BootstrapModel(Options({a->address(), odd->address()}), client_);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("disagree"));
  EXPECT_EQ(ModelCache::Open(ModelCacheDir(state_dir_, kFingerprint)).status().code(),
            absl::StatusCode::kNotFound);
}

// A member whose GetModel describes one header and whose FetchTensor sends
// another.
TEST_F(ModelBootstrapTest, AHeaderThatDoesNotMatchItsDigestIsRefused) {
  testing::ShareMember* liar = AddMember("liar", original_);
  testing::ShareMember* other = AddMember("other", testing::MultiChunkModelBytes());
  liar->service().set_fetch_share(&other->share());
  absl::StatusOr<BootstrappedModel> got = BootstrapModel(Options({liar->address()}), client_);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  EXPECT_EQ(ModelCache::Open(ModelCacheDir(state_dir_, kFingerprint)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ModelBootstrapTest, WithoutAMemberThatServesAModelItGivesUpAfterItsPatience) {
  // Nothing listens; a node that is this one; a node that serves no model yet.
  testing::ShareService no_model("empty", nullptr);
  testing::TestGrpcServer empty(&no_model);
  ASSERT_TRUE(empty.started());
  testing::ShareMember* self = nullptr;
  {
    members_.push_back(std::make_unique<testing::ShareMember>(
        "newcomer", testing::WriteModelCopy(original_, "bootstrap_self"), kFingerprint));
    self = members_.back().get();
    ASSERT_TRUE(self->ok());
  }
  absl::StatusOr<BootstrappedModel> got =
      BootstrapModel(Options({"127.0.0.1:1", empty.address(), self->address()}), client_);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("no member"));
  EXPECT_EQ(self->service().get_model_calls(), 0);  // never asked for the model
  EXPECT_EQ(no_model.get_model_calls(), 0);
  empty.Shutdown();
}

}  // namespace
}  // namespace ringlm
