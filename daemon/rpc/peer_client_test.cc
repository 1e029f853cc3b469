// PeerClient against a real RingNode server on loopback (--insecure mode):
// each call reaches the server with the caller's claimed node id and a
// deadline, replies and errors come back (errors naming the peer), a
// FetchTensor stream can be stopped early, and channels are cached per
// address until Retain closes them.
#include "daemon/rpc/peer_client.h"

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "daemon/rpc/test_grpc_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/grpc_test_environment.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;

// A peer's RingNode service (synchronous API: the test needs no reactors).
// Records the claimed node id and whether a deadline was set for every call;
// answers Health and Topology as `node-b`, GetModel with `get_model_status`,
// and FetchTensor with `n_chunks` chunks. Thread-safe.
class FakeRingService final : public v1::RingNode::Service {
 public:
  struct Call {
    std::string method;
    std::string claimed_node;
    bool has_deadline = false;
  };

  grpc::Status Health(grpc::ServerContext* ctx, const v1::HealthRequest* request,
                      v1::HealthReply* reply) override {
    Record("Health", *ctx);
    reply->set_protocol_version(request->protocol_version());
    reply->set_node_id("node-b");
    reply->set_partition("node-b[0,8)");
    return grpc::Status::OK;
  }
  grpc::Status Topology(grpc::ServerContext* ctx, const v1::TopologyRequest* /*request*/,
                        v1::TopologyReply* reply) override {
    Record("Topology", *ctx);
    reply->set_node_id("node-b");
    reply->mutable_plan()->set_epoch(9);
    return grpc::Status::OK;
  }
  grpc::Status GetModel(grpc::ServerContext* ctx, const v1::GetModelRequest* request,
                        v1::GetModelReply* reply) override {
    Record("GetModel", *ctx);
    absl::MutexLock lock(&mu_);
    reply->set_model_fingerprint(request->model_fingerprint());
    return get_model_status_;
  }
  grpc::Status FetchTensor(grpc::ServerContext* ctx, const v1::FetchTensorRequest* request,
                           grpc::ServerWriter<v1::TensorChunk>* writer) override {
    Record("FetchTensor", *ctx);
    uint64_t n_chunks = 0;
    {
      absl::MutexLock lock(&mu_);
      n_chunks = n_chunks_;
    }
    for (uint64_t c = request->first_chunk(); c < n_chunks; ++c) {
      v1::TensorChunk chunk;
      chunk.set_chunk(c);
      chunk.set_data(std::string(4, static_cast<char>('a' + c)));
      if (!writer->Write(chunk)) break;  // the caller stopped
    }
    return grpc::Status::OK;
  }

  std::vector<Call> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  void set_get_model_status(grpc::Status s) {
    absl::MutexLock lock(&mu_);
    get_model_status_ = std::move(s);
  }
  void set_n_chunks(uint64_t n) {
    absl::MutexLock lock(&mu_);
    n_chunks_ = n;
  }

 private:
  void Record(const std::string& method, const grpc::ServerContext& ctx) {
    std::string claimed;
    auto it = ctx.client_metadata().find(kClaimedNodeMetadata);
    if (it != ctx.client_metadata().end()) claimed.assign(it->second.data(), it->second.size());
    // A call without a deadline arrives with an infinite one.
    const bool has_deadline =
        ctx.deadline() < std::chrono::system_clock::now() + std::chrono::hours(24);
    absl::MutexLock lock(&mu_);
    calls_.push_back({method, claimed, has_deadline});
  }

  mutable absl::Mutex mu_;
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  grpc::Status get_model_status_ ABSL_GUARDED_BY(mu_) = grpc::Status::OK;
  uint64_t n_chunks_ ABSL_GUARDED_BY(mu_) = 3;
};

class PeerClientTest : public ::testing::Test {
 protected:
  FakeRingService service_;
  testing::TestGrpcServer server_{&service_};
  PeerClient client_{RpcOptions{}, std::nullopt, "node-a"};
};

TEST_F(PeerClientTest, HealthAndTopologyReturnThePeersReply) {
  ASSERT_TRUE(server_.started());
  v1::HealthReply health;
  std::string spki = "untouched";
  ASSERT_TRUE(client_.Health(server_.address(), &health, &spki).ok());
  EXPECT_EQ(health.node_id(), "node-b");
  EXPECT_EQ(health.partition(), "node-b[0,8)");
  EXPECT_EQ(health.protocol_version(), static_cast<uint32_t>(v1::PROTOCOL_VERSION_CURRENT));
  EXPECT_EQ(spki, "");  // no certificate in insecure mode

  v1::TopologyReply topology;
  ASSERT_TRUE(client_.Topology(server_.address(), &topology).ok());
  EXPECT_EQ(topology.plan().epoch(), 9u);

  const std::vector<FakeRingService::Call> calls = service_.calls();
  ASSERT_EQ(calls.size(), 2u);
  for (const FakeRingService::Call& c : calls) {
    SCOPED_TRACE(c.method);
    EXPECT_EQ(c.claimed_node, "node-a");  // insecure mode: the caller names itself
    EXPECT_TRUE(c.has_deadline);
  }
  EXPECT_EQ(client_.channels(), 1u);  // one channel per address, reused
}

TEST_F(PeerClientTest, APeersErrorKeepsItsCodeAndNamesThePeer) {
  ASSERT_TRUE(server_.started());
  service_.set_get_model_status(grpc::Status(grpc::StatusCode::NOT_FOUND, "no model fp-x"));
  v1::GetModelRequest request;
  request.set_model_fingerprint("fp-x");
  v1::GetModelReply reply;
  const absl::Status s = client_.GetModel(server_.address(), request, &reply);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "node " + server_.address() + ": no model fp-x");

  // An RPC the peer does not implement.
  const absl::Status cancel = client_.Cancel(server_.address(), "r1#0");
  EXPECT_EQ(cancel.code(), absl::StatusCode::kUnimplemented) << cancel;
}

TEST_F(PeerClientTest, FetchTensorStreamsTheChunksInOrderFromTheOneAsked) {
  ASSERT_TRUE(server_.started());
  v1::FetchTensorRequest request;
  request.set_first_chunk(1);
  std::vector<uint64_t> numbers;
  std::string bytes;
  const absl::Status s =
      client_.FetchTensor(server_.address(), request, 12, [&](const v1::TensorChunk& c) {
        numbers.push_back(c.chunk());
        bytes += c.data();
        return true;
      });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(numbers, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(bytes, "bbbbcccc");
}

TEST_F(PeerClientTest, FetchTensorStopsWhenTheCallerSaysSoAndThatIsNoError) {
  ASSERT_TRUE(server_.started());
  service_.set_n_chunks(1000);
  std::vector<uint64_t> numbers;
  const absl::Status s = client_.FetchTensor(server_.address(), v1::FetchTensorRequest(), 4000,
                                             [&](const v1::TensorChunk& c) {
                                               numbers.push_back(c.chunk());
                                               return numbers.size() < 2;
                                             });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(numbers, (std::vector<uint64_t>{0, 1}));  // nothing handed on after the stop
}

// Ports on loopback where nothing listens: calls fail fast with UNAVAILABLE.
TEST(PeerClientRetainTest, RetainClosesTheChannelsOfForgottenPeers) {
  RpcOptions options;
  options.health_timeout = std::chrono::milliseconds(300);
  PeerClient client(options, std::nullopt, "self");
  const std::vector<std::string> peers = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"};
  for (const std::string& address : peers) {
    v1::HealthReply reply;
    absl::Status s = client.Health(address, &reply);
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr(address)) << s;
  }
  EXPECT_EQ(client.channels(), 3u);
  client.Retain({"127.0.0.1:2"});
  EXPECT_EQ(client.channels(), 1u);
  client.Retain({});
  EXPECT_EQ(client.channels(), 0u);
}

}  // namespace
}  // namespace ringlm
