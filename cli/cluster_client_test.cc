#include "cli/cluster_client.h"

#include <sys/stat.h>

#include <cstdlib>

#include "base/testing/temp_dir.h"
#include "cli/test_commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/cluster_key.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class ReadClientSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override { ::unsetenv("RINGLM_CLUSTER_KEY_FILE"); }
  void TearDown() override { ::unsetenv("RINGLM_CLUSTER_KEY_FILE"); }

  // `args` parsed by a parser with the client security flags.
  absl::StatusOr<ClientSecurity> Read(const std::vector<std::string>& args) {
    ArgParser p("test", "");
    AddClientSecurityFlags(p);
    if (absl::Status s = p.Parse(args); !s.ok()) return s;
    return ReadClientSecurity(p);
  }

  // A fresh key written to a new directory with `mode`.
  std::string WriteKey(mode_t mode) {
    const std::string path = testing::MakeTempDir("cluster-client") + "/cluster.key";
    absl::StatusOr<ClusterKey> key = ClusterKey::Generate();
    EXPECT_TRUE(key.ok()) << key.status();
    EXPECT_TRUE(key->WriteFile(path, /*overwrite=*/false).ok());
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }
};

TEST_F(ReadClientSecurityTest, InsecureMeansPlaintext) {
  absl::StatusOr<ClientSecurity> s = Read({"--insecure"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->identity.has_value());
}

TEST_F(ReadClientSecurityTest, NeitherKeyNorInsecureIsRefused) {
  absl::StatusOr<ClientSecurity> s = Read({});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("--cluster-key FILE"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("--insecure"));
}

TEST_F(ReadClientSecurityTest, AKeyFileGivesAClientIdentity) {
  const std::string key = WriteKey(0600);
  absl::StatusOr<ClientSecurity> s = Read({"--cluster-key", key});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->identity.has_value());

  ::setenv("RINGLM_CLUSTER_KEY_FILE", key.c_str(), 1);
  absl::StatusOr<ClientSecurity> from_env = Read({});
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_TRUE(from_env->identity.has_value());
}

TEST_F(ReadClientSecurityTest, InsecureAndAKeyExcludeEachOther) {
  const std::string key = WriteKey(0600);
  EXPECT_EQ(Read({"--insecure", "--cluster-key", key}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ::setenv("RINGLM_CLUSTER_KEY_FILE", key.c_str(), 1);
  EXPECT_EQ(Read({"--insecure"}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ReadClientSecurityTest, KeyFileErrorsPassThrough) {
  EXPECT_EQ(Read({"--cluster-key", "/nonexistent/cluster.key"}).status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<ClientSecurity> readable = Read({"--cluster-key", WriteKey(0644)});
  EXPECT_EQ(readable.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(readable.status().message()), HasSubstr("chmod 600"));
}

constexpr auto kTimeout = std::chrono::seconds(10);

TEST(ClusterClientTest, TopologyReturnsTheNodesReply) {
  testing::FakeRingNode node;
  v1::TopologyReply reply;
  reply.set_node_id("node-a");
  reply.mutable_model()->set_n_layers(5);
  node.SetTopology(reply);
  ClusterClient client(node.address(), ClientSecurity{});
  EXPECT_EQ(client.address(), node.address());
  absl::StatusOr<v1::TopologyReply> got = client.Topology(kTimeout);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->node_id(), "node-a");
  EXPECT_EQ(got->model().n_layers(), 5u);
}

TEST(ClusterClientTest, ARefusedConnectionIsUnavailableAndNamesTheNode) {
  testing::RefusingPort port;
  ClusterClient client(port.address(), ClientSecurity{});
  absl::StatusOr<v1::TopologyReply> got = client.Topology(kTimeout);
  // Refused at once, not left to run into the deadline.
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_THAT(std::string(got.status().message()), StartsWith("node " + port.address() + ": "));

  absl::Status generated =
      client.Generate(v1::GenerateRequest(), kTimeout, [](const v1::GenerateEvent&) {});
  EXPECT_EQ(generated.code(), absl::StatusCode::kUnavailable) << generated;
}

v1::GenerateEvent TokenEvent(int32_t token, const std::string& text) {
  v1::GenerateEvent e;
  e.set_token(token);
  e.set_has_token(true);
  e.set_text(text);
  return e;
}

TEST(ClusterClientTest, GenerateHandsOverEveryEventInOrder) {
  testing::FakeRingNode node;
  v1::GenerateEvent first;
  first.add_prompt_ids(1);
  first.set_request_id("r1");
  v1::GenerateEvent last;
  last.set_finish_reason(v1::FINISH_REASON_STOP);
  node.SetGenerate({first, TokenEvent(432, ","), TokenEvent(383, " there"), last});

  ClusterClient client(node.address(), ClientSecurity{});
  v1::GenerateRequest request;
  request.set_prompt("Once");
  std::vector<v1::GenerateEvent> seen;
  absl::Status s =
      client.Generate(request, kTimeout, [&](const v1::GenerateEvent& e) { seen.push_back(e); });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(node.last_generate_request().prompt(), "Once");
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].request_id(), "r1");
  EXPECT_EQ(seen[1].token(), 432);
  EXPECT_EQ(seen[2].text(), " there");
  EXPECT_EQ(seen[3].finish_reason(), v1::FINISH_REASON_STOP);
}

TEST(ClusterClientTest, GenerateReturnsTheErrorTheClusterReported) {
  testing::FakeRingNode node;
  v1::GenerateEvent failed;
  failed.set_finish_reason(v1::FINISH_REASON_ERROR);
  failed.set_error("no KV cache memory left");
  failed.set_error_code(static_cast<int32_t>(absl::StatusCode::kResourceExhausted));
  node.SetGenerate({TokenEvent(7, "x"), failed});  // the call itself ends OK
  ClusterClient client(node.address(), ClientSecurity{});
  int events = 0;
  absl::Status s =
      client.Generate(v1::GenerateRequest(), kTimeout, [&](const v1::GenerateEvent&) { ++events; });
  EXPECT_EQ(events, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "no KV cache memory left");
}

TEST(ClusterClientTest, GenerateReturnsTheCallsErrorNamingTheNode) {
  testing::FakeRingNode node;
  node.SetGenerate({}, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "prompt too long"));
  ClusterClient client(node.address(), ClientSecurity{});
  absl::Status s =
      client.Generate(v1::GenerateRequest(), kTimeout, [](const v1::GenerateEvent&) {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "node " + node.address() + ": prompt too long");
}

}  // namespace
}  // namespace ringlm
