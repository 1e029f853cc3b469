// Real TLS handshakes over loopback between a tiny RingNode server (Health
// only) and clients holding various credentials.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>
#include <stdlib.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "proto/ringlm.grpc.pb.h"
#include "security/grpc_test_environment.h"
#include "security/tls_credentials.h"

namespace ringlm {
namespace {

constexpr auto kDeadline = std::chrono::seconds(5);

ClusterKey KeyOf(char fill) { return *ClusterKey::FromBytes(std::string(32, fill)); }

// Answers Health with its node id to authenticated callers, UNAUTHENTICATED
// to everyone else, and remembers who called last.
class HealthOnlyService final : public v1::RingNode::CallbackService {
 public:
  explicit HealthOnlyService(std::string node_id) : node_id_(std::move(node_id)) {}

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* context,
                                   const v1::HealthRequest* /*request*/,
                                   v1::HealthReply* reply) override {
    const PeerIdentity peer = IdentityOf(*context);
    {
      absl::MutexLock lock(&mu_);
      last_peer_ = peer;
      ++calls_;
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (absl::Status s = RequireAuthenticated(peer); !s.ok()) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(s.message())));
      return reactor;
    }
    reply->set_node_id(node_id_);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  PeerIdentity last_peer() const {
    absl::MutexLock lock(&mu_);
    return last_peer_;
  }
  int calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  const std::string node_id_;
  mutable absl::Mutex mu_;
  PeerIdentity last_peer_ ABSL_GUARDED_BY(mu_);
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
};

class TlsHandshakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TlsIdentity> identity =
        MakeNodeIdentity(key_a_, testing::MakeTempDir("tls_handshake_test"), "node-server");
    ASSERT_TRUE(identity.ok()) << identity.status();
    server_identity_ = *identity;
    service_ = std::make_unique<HealthOnlyService>("node-server");
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", ServerCredentials(server_identity_), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }

  void TearDown() override {
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now() + kDeadline);
    server_->Wait();
    server_.reset();
  }

  // One Health call with `credentials`; the server as the client saw it goes
  // to `server_seen` when given.
  grpc::Status CallHealth(const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                          v1::HealthReply* reply, PeerIdentity* server_seen = nullptr) {
    grpc::ChannelArguments args;
    AddChannelArgs(&args);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // no connection reuse across cases
    std::shared_ptr<grpc::Channel> channel =
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_), credentials, args);
    std::unique_ptr<v1::RingNode::Stub> stub = v1::RingNode::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kDeadline);
    grpc::Status status = stub->Health(&context, v1::HealthRequest(), reply);
    if (server_seen != nullptr) *server_seen = IdentityOf(context);
    return status;
  }

  ClusterKey key_a_ = KeyOf('a');
  ClusterKey key_b_ = KeyOf('b');
  TlsIdentity server_identity_;
  std::unique_ptr<HealthOnlyService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(TlsHandshakeTest, MemberNodeIsAuthenticatedBothWays) {
  absl::StatusOr<TlsIdentity> client =
      MakeNodeIdentity(key_a_, testing::MakeTempDir("tls_handshake_test"), "node-client");
  ASSERT_TRUE(client.ok()) << client.status();
  v1::HealthReply reply;
  PeerIdentity server_seen;
  grpc::Status status = CallHealth(ChannelCredentials(*client), &reply, &server_seen);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_EQ(reply.node_id(), "node-server");

  const PeerIdentity client_seen = service_->last_peer();
  EXPECT_TRUE(client_seen.authenticated);
  EXPECT_EQ(client_seen.role, Role::kNode);
  EXPECT_EQ(client_seen.common_name, "node-client");
  EXPECT_EQ(client_seen.spki_fingerprint, client->spki_fingerprint);

  EXPECT_TRUE(server_seen.authenticated);
  EXPECT_EQ(server_seen.role, Role::kNode);
  EXPECT_EQ(server_seen.common_name, "node-server");
  EXPECT_EQ(server_seen.spki_fingerprint, server_identity_.spki_fingerprint);
  EXPECT_EQ(server_seen.spki_fingerprint.size(), 32u);
}

TEST_F(TlsHandshakeTest, MemberClientIsSeenAsClient) {
  absl::StatusOr<TlsIdentity> client = MakeClientIdentity(key_a_);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(client->common_name.size(), std::string("client-").size() + 8);
  v1::HealthReply reply;
  grpc::Status status = CallHealth(ChannelCredentials(*client), &reply);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  const PeerIdentity seen = service_->last_peer();
  EXPECT_TRUE(seen.authenticated);
  EXPECT_EQ(seen.role, Role::kClient);
  EXPECT_EQ(seen.common_name, client->common_name);
  EXPECT_EQ(seen.spki_fingerprint, client->spki_fingerprint);
}

TEST_F(TlsHandshakeTest, ForeignClusterNodeFailsTheHandshake) {
  absl::StatusOr<TlsIdentity> foreign =
      MakeNodeIdentity(key_b_, testing::MakeTempDir("tls_handshake_test"), "node-foreign");
  ASSERT_TRUE(foreign.ok()) << foreign.status();
  v1::HealthReply reply;
  EXPECT_EQ(CallHealth(ChannelCredentials(*foreign), &reply).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(service_->calls(), 0);
}

TEST_F(TlsHandshakeTest, ForeignLeafIsRejectedEvenWithTheRightRoot) {
  // Trusts our CA (so the server's certificate is fine) but presents a leaf
  // of another cluster: the server must refuse it in the handshake.
  absl::StatusOr<TlsIdentity> foreign = MakeClientIdentity(key_b_);
  ASSERT_TRUE(foreign.ok());
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = server_identity_.ca_pem;
  options.pem_private_key = foreign->key_pem;
  options.pem_cert_chain = foreign->cert_pem;
  v1::HealthReply reply;
  EXPECT_EQ(CallHealth(grpc::SslCredentials(options), &reply).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(service_->calls(), 0);
}

TEST_F(TlsHandshakeTest, ServerOfAnotherClusterIsRejectedByTheClient) {
  // Our leaf, but trusting only cluster B's CA: the server's certificate fails.
  absl::StatusOr<TlsIdentity> member = MakeClientIdentity(key_a_);
  absl::StatusOr<ClusterCa> ca_b = ClusterCa::Derive(key_b_);
  ASSERT_TRUE(member.ok() && ca_b.ok());
  member->ca_pem = ca_b->cert_pem();
  v1::HealthReply reply;
  EXPECT_EQ(CallHealth(ChannelCredentials(*member), &reply).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(service_->calls(), 0);
}

TEST_F(TlsHandshakeTest, TlsClientWithoutCertificateIsUnauthenticated) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = server_identity_.ca_pem;
  v1::HealthReply reply;
  PeerIdentity server_seen;
  grpc::Status status = CallHealth(grpc::SslCredentials(options), &reply, &server_seen);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  // The handshake completed and the handler ran, seeing no identity.
  EXPECT_EQ(service_->calls(), 1);
  EXPECT_FALSE(service_->last_peer().authenticated);
  EXPECT_TRUE(service_->last_peer().common_name.empty());
  // The client still authenticated the server.
  EXPECT_TRUE(server_seen.authenticated);
  EXPECT_EQ(server_seen.common_name, "node-server");
}

TEST_F(TlsHandshakeTest, PlaintextClientFails) {
  v1::HealthReply reply;
  grpc::Status status = CallHealth(grpc::InsecureChannelCredentials(), &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_EQ(service_->calls(), 0);
}

TEST(PeerIdentityTest, UnstartedCallIsUnauthenticated) {
  grpc::ClientContext context;
  EXPECT_FALSE(IdentityOf(context).authenticated);
  EXPECT_EQ(RequireAuthenticated(IdentityOf(context)).code(), absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace ringlm
