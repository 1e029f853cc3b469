#include "daemon/rpc/peer_client.h"

#include "gtest/gtest.h"
#include "security/grpc_test_environment.h"

namespace ringlm {
namespace {

// Ports on loopback where nothing listens: calls fail fast with UNAVAILABLE.
TEST(PeerClientTest, RetainClosesTheChannelsOfForgottenPeers) {
  RpcOptions options;
  options.health_timeout = std::chrono::milliseconds(300);
  PeerClient client(options, std::nullopt, "self");
  const std::vector<std::string> peers = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"};
  for (const std::string& address : peers) {
    v1::HealthReply reply;
    absl::Status s = client.Health(address, &reply);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(address), absl::string_view::npos) << s;
  }
  EXPECT_EQ(client.channels(), 3u);
  client.Retain({"127.0.0.1:2"});
  EXPECT_EQ(client.channels(), 1u);
  client.Retain({});
  EXPECT_EQ(client.channels(), 0u);
}

}  // namespace
}  // namespace ringlm
