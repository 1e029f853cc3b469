#include "daemon/ring_server.h"

#include <gtest/gtest.h>

#include "proto/call_metadata.h"

namespace ringlm {
namespace {

// Answers Health with its own name as the node id, GetModel with it as the
// fingerprint.
class NamedService : public v1::RingNode::CallbackService {
 public:
  explicit NamedService(std::string name) : name_(std::move(name)) {}

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx, const v1::HealthRequest*,
                                   v1::HealthReply* reply) override {
    reply->set_node_id(name_);
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* ctx, const v1::GetModelRequest*,
                                     v1::GetModelReply* reply) override {
    reply->set_model_fingerprint(name_);
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  std::string name_;
};

class RingServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RingServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    absl::StatusOr<std::unique_ptr<RingServer>> server = RingServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::RingNode::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }

  // Health's node id, or the error's code, for a call naming `model` ("" = none).
  std::string Ask(const std::string& model) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (!model.empty()) ctx.AddMetadata(kModelMetadata, model);
    v1::HealthReply reply;
    grpc::Status s = stub_->Health(&ctx, v1::HealthRequest(), &reply);
    if (!s.ok()) return "error " + std::to_string(s.error_code());
    return reply.node_id();
  }

  std::unique_ptr<RingServer> server_;
  std::unique_ptr<v1::RingNode::Stub> stub_;
  NamedService small_{"small"};
  NamedService large_{"large"};
};

TEST_F(RingServerTest, CallsGoToTheModelTheyName) {
  ASSERT_TRUE(server_->Add("fp-small", {"small", "alias"}, &small_).ok());
  ASSERT_TRUE(server_->Add("fp-large", {"large"}, &large_).ok());
  EXPECT_EQ(Ask("fp-small"), "small");
  EXPECT_EQ(Ask("alias"), "small");
  EXPECT_EQ(Ask("large"), "large");
  EXPECT_EQ(Ask("fp-large"), "large");
  EXPECT_EQ(Ask(""), "small");  // none named: the first
  EXPECT_EQ(Ask("other"), "error " + std::to_string(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(server_->ModelNames(), (std::vector<std::string>{"small", "large"}));
}

// A node fetching a model it does not know yet names it only in the request.
TEST_F(RingServerTest, ModelDistributionWithoutMetadataGoesToTheModelItAsksFor) {
  ASSERT_TRUE(server_->Add("fp-small", {"small"}, &small_).ok());
  ASSERT_TRUE(server_->Add("fp-large", {"large"}, &large_).ok());
  auto get_model = [&](const std::string& fingerprint) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GetModelRequest request;
    request.set_model_fingerprint(fingerprint);
    v1::GetModelReply reply;
    grpc::Status s = stub_->GetModel(&ctx, request, &reply);
    return s.ok() ? reply.model_fingerprint() : "error";
  };
  EXPECT_EQ(get_model("fp-large"), "large");
  EXPECT_EQ(get_model("fp-small"), "small");
  EXPECT_EQ(get_model("fp-other"), "small");  // the first: it refuses another model itself
}

TEST_F(RingServerTest, ATakenNameIsRefusedWhole) {
  ASSERT_TRUE(server_->Add("fp-small", {"small"}, &small_).ok());
  absl::Status s = server_->Add("fp-large", {"large", "small"}, &large_);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_EQ(Ask("large"), "error " + std::to_string(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(server_->ModelNames(), std::vector<std::string>{"small"});
}

TEST_F(RingServerTest, ARemovedModelIsNotFoundAndTheNextIsFirst) {
  ASSERT_TRUE(server_->Add("fp-small", {"small"}, &small_).ok());
  ASSERT_TRUE(server_->Add("fp-large", {"large"}, &large_).ok());
  server_->Remove(&small_);
  EXPECT_EQ(Ask("small"), "error " + std::to_string(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(Ask(""), "large");
  server_->Remove(&large_);
  EXPECT_EQ(Ask(""), "error " + std::to_string(grpc::StatusCode::UNAVAILABLE));
}

TEST(RingServerPortTest, ATakenPortIsAnError) {
  RingServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  absl::StatusOr<std::unique_ptr<RingServer>> first = RingServer::Start(options);
  ASSERT_TRUE(first.ok()) << first.status();
  options.port = (*first)->port();
  absl::StatusOr<std::unique_ptr<RingServer>> second = RingServer::Start(options);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

}  // namespace
}  // namespace ringlm
