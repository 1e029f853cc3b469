// Real ringlmd processes on loopback: they find each other by broadcast (or
// by --peers), agree on one partition, generate exactly what a single
// process generates, survive garbage input, and finish a request through a
// dead node.
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/cluster_client.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/ringlm.grpc.pb.h"
#include "tests/daemon_harness.h"
#include "tests/generation_stream.h"
#include "tests/grpc_test_clients.h"
#include "tests/local_generation.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::LoopbackCluster;

json References() {
  std::ifstream in(std::string(RINGLM_SHARED_DIR) + "/refs/stories260k_llamacpp.json");
  return json::parse(in);
}

// The same, on a model of the shared models folder.
std::vector<int32_t> LocalGreedy(const std::string& model_file, const std::string& prompt, int n) {
  return testing::LocalGreedy(testing::ModelPath(model_file), prompt, n);
}

void ExpectSamePartitionEverywhere(LoopbackCluster& c) {
  json first = c.Status(0);
  ASSERT_TRUE(first.is_object());
  for (size_t i = 1; i < c.size(); ++i) {
    json s = c.Status(i);
    ASSERT_TRUE(s.is_object());
    EXPECT_EQ(s["plan"]["stages"], first["plan"]["stages"]) << "node " << i;
  }
  // 4000/2000/2000 MB over 5 layers: 3, 1, 1 in memory order.
  std::vector<int> counts;
  for (const json& st : first["plan"]["stages"]) {
    counts.push_back(st["last_layer"].get<int>() - st["first_layer"].get<int>());
  }
  EXPECT_EQ(counts, (std::vector<int>{3, 1, 1}));
}

class ClusterByBroadcastTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ClusterByBroadcastTest, FormsAgreesAndMatchesOneProcess) {
  LoopbackCluster::Options options;
  options.model = GetParam();
  const auto start = std::chrono::steady_clock::now();
  LoopbackCluster cluster(options);
  bool formed = testing::WaitFor([&] { return cluster.AllFormed(); }, 20s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(formed) << cluster.Logs();
  std::printf("cluster formed by broadcast in %.2f s after start\n", seconds);
  ExpectSamePartitionEverywhere(cluster);
  const std::string variant = GetParam().find("q8_0") != std::string::npos ? "q8_0" : "f32";
  for (const json& g : References()["generation"]) {
    const std::string prompt = g["prompt"];
    SCOPED_TRACE("prompt '" + prompt + "'");
    const std::vector<int32_t> local = LocalGreedy(GetParam(), prompt, 64);
    EXPECT_EQ(local, g[variant]["generated_ids"].get<std::vector<int32_t>>());
    for (size_t entry = 0; entry < cluster.size(); ++entry) {
      EXPECT_EQ(cluster.Greedy(entry, prompt, 64), local) << "via node " << entry;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BundledModels, ClusterByBroadcastTest,
                         ::testing::Values("stories260K-f32.gguf", "stories260K-q8_0.gguf"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.find("q8_0") != std::string::npos ? "Q8_0" : "F32";
                         });

TEST(ClusterTest, StaticPeersWithoutBroadcast) {
  LoopbackCluster::Options options;
  options.broadcast = false;
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 20s)) << cluster.Logs();
  ExpectSamePartitionEverywhere(cluster);
  const std::string prompt = "Once upon a time";
  const std::vector<int32_t> local = LocalGreedy("stories260K-f32.gguf", prompt, 64);
  EXPECT_EQ(cluster.Greedy(2, prompt, 64), local);
  EXPECT_EQ(cluster.Greedy(0, prompt, 64, "--hidden-dtype f16").size(), 64u);
}

TEST(ClusterTest, KillingTheMiddleNodeCostsAPauseAndTheRequestCompletes) {
  LoopbackCluster::Options options;
  options.extra_args = {"--ctx-size", "8192"};
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 20s)) << cluster.Logs();
  json status = cluster.Status(0);
  // The middle stage of the plan, and which process runs it.
  const std::string middle_address = status["plan"]["stages"][1]["address"];
  size_t middle = 0;
  for (size_t i = 0; i < cluster.size(); ++i) {
    if (cluster.Address(i) == middle_address) middle = i;
  }
  const size_t entry = middle == 0 ? 2 : 0;

  // A long generation through the ring, with a callback per token.
  v1::GenerateRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  request.set_prompt("Once upon a time");
  request.mutable_limits()->set_max_tokens(600);
  request.mutable_limits()->set_ignore_eos(true);
  auto generate = [&](std::atomic<int>* count) {
    std::vector<int32_t> ids;
    ClusterClient client(cluster.Address(entry), testing::ClientSecurityFor(cluster));
    absl::Status s = client.Generate(request, 120s, [&](const v1::GenerateEvent& e) {
      if (!e.has_token()) return;
      ids.push_back(e.token());
      ++*count;
    });
    EXPECT_TRUE(s.ok()) << s;
    return ids;
  };
  std::atomic<int> undisturbed_count{0};
  const std::vector<int32_t> undisturbed = generate(&undisturbed_count);
  ASSERT_EQ(undisturbed.size(), 600u) << cluster.Logs();

  std::atomic<int> tokens{0};
  std::vector<int32_t> ids;
  // jthread: joined even when an assertion below returns early.
  std::jthread generation([&] { ids = generate(&tokens); });
  ASSERT_TRUE(testing::WaitFor([&] { return tokens > 50; }, 20s)) << cluster.Logs();
  cluster.KillNode(middle);
  const int at_kill = tokens.load();
  generation.join();
  EXPECT_EQ(ids, undisturbed) << "killed after " << at_kill << " tokens\n" << cluster.Logs();
  std::printf("the middle node was killed after %d tokens; the request completed\n", at_kill);

  // The other two re-form without it and serve the next request.
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.Formed(entry, 2); }, 20s)) << cluster.Logs();
  const std::vector<int32_t> local = LocalGreedy("stories260K-f32.gguf", "Once upon a time", 64);
  EXPECT_EQ(cluster.Greedy(entry, "Once upon a time", 64), local);
}

// Many users at once: 16 requests of mixed prompts, lengths and sampling
// run together through a 3-node ring, each stage batches them, and each gets
// exactly the ids it gets alone.
TEST(ClusterTest, SixteenConcurrentRequestsOfMixedLengthsEachGetTheirSoloIds) {
  // A wider model than stories260K, so that compute, not the hops, takes
  // the time and steps of different requests meet in the stages' queues.
  const std::string model = testing::MakeTempDir("ringlm-batch") + "/tiny.gguf";
  testing::CommandResult synth = testing::RunCommand(
      absl::StrCat(testing::RinglmPath(), " synth --preset tiny --type q8_0 --out ", model), false);
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  LoopbackCluster::Options options;
  options.model = model;
  options.extra_args = {"--ctx-size", "1024"};
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 20s)) << cluster.Logs();
  constexpr int kRequests = 16;
  const char* openings[] = {"Once upon a time", "Lily had a red ball", "The sun was up",
                            "Tom and his dog"};
  auto stream = [&](int i) {
    const testing::Sampling sampling =
        i % 4 == 3 ? testing::Sampling{.temperature = 0.8f, .seed = static_cast<uint64_t>(i)}
                   : testing::Sampling{};
    return std::make_unique<testing::GenerationStream>(cluster, sampling, 16 + 9 * i,
                                                       openings[i % 4]);
  };
  std::vector<std::vector<int32_t>> alone;
  for (int i = 0; i < kRequests; ++i) {
    auto [ids, status] = stream(i)->Finish();
    ASSERT_TRUE(status.ok()) << status;
    alone.push_back(ids);
  }
  std::vector<std::unique_ptr<testing::GenerationStream>> together;
  for (int i = 0; i < kRequests; ++i) together.push_back(stream(i));
  for (int i = 0; i < kRequests; ++i) {
    auto [ids, status] = together[i]->Finish();
    EXPECT_TRUE(status.ok()) << "request " << i << ": " << status;
    EXPECT_EQ(ids, alone[i]) << "request " << i;
  }
  // How much the stages batched depends on timing (steps of different
  // requests must wait together); daemon/stage_runtime_test.cc asserts that
  // they do. Here it is only reported.
  for (size_t n = 0; n < cluster.size(); ++n) {
    const auto metrics = cluster.Metrics(n);
    std::printf("node %zu: %.0f steps in %.0f batches\n", n,
                FindSample(metrics, "ringlm_stage_batch_steps_sum").value_or(0),
                FindSample(metrics, "ringlm_stage_batch_steps_count").value_or(0));
  }
}

// Sends raw datagrams to the shared discovery port.
void SendUdp(uint16_t port, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(port);
  sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
  close(fd);
}

TEST(ClusterTest, GarbageUdpAndBadStageMessagesAreRejectedAndNodesStayUp) {
  LoopbackCluster cluster({});
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 20s)) << cluster.Logs();

  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string junk(1 + rng() % 1500, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    if (i % 10 == 0) junk = "RLMA" + junk.substr(0, 20);  // right magic, wrong rest
    SendUdp(cluster.discovery_port(), junk);
  }
  SendUdp(cluster.discovery_port(), std::string(60000, 'x'));  // oversized

  // Bad StageStep messages straight to node 0's gRPC port, from a member
  // (node 1's own certificate): well authenticated, badly formed.
  auto stub = testing::MemberStub(cluster, 1, cluster.Address(0));
  json status = cluster.Status(0);
  v1::Plan plan;
  plan.set_model_fingerprint(status["model"]["fingerprint"].get<std::string>());
  plan.set_n_layers(5);
  for (const json& st : status["plan"]["stages"]) {
    v1::PlanStage* s = plan.add_stages();
    s->set_node_id(st["node_id"].get<std::string>());
    s->set_address(st["address"].get<std::string>());
    s->set_first_layer(st["first_layer"].get<uint32_t>());
    s->set_last_layer(st["last_layer"].get<uint32_t>());
  }
  size_t stage_of_node0 = 0;
  for (int i = 0; i < plan.stages_size(); ++i) {
    if (plan.stages(i).address() == cluster.Address(0)) stage_of_node0 = i;
  }
  auto base = [&] {
    v1::StageStepRequest r;
    r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    r.set_request_id("bad-1");
    r.set_session_id("bad-1");
    r.set_origin("nobody");
    *r.mutable_plan() = plan;
    r.set_stage_index(stage_of_node0);
    r.add_tokens(1);
    r.add_tokens(2);
    if (stage_of_node0 > 0) {
      v1::Tensor* h = r.mutable_hidden();
      h->set_dtype(v1::DTYPE_F32);
      h->add_shape(2);
      h->add_shape(64);
      h->set_data(std::string(2 * 64 * 4, '\0'));
    }
    return r;
  };
  auto expect_rejected = [&](const v1::StageStepRequest& r, const std::string& words) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::StageStepReply reply;
    grpc::Status s = stub->StageStep(&ctx, r, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find(words), std::string::npos) << s.error_message();
  };
  {
    v1::StageStepRequest r = base();
    r.set_tokens(1, 100000);
    expect_rejected(r, "outside the vocabulary");
  }
  {
    v1::StageStepRequest r = base();
    r.mutable_plan()->mutable_stages(r.plan().stages_size() - 1)->set_last_layer(99);
    expect_rejected(r, "layers");
  }
  {
    v1::StageStepRequest r = base();
    r.set_protocol_version(99);
    expect_rejected(r, "protocol version");
  }
  {
    v1::StageStepRequest r = base();
    if (stage_of_node0 == 0) {
      v1::Tensor* h = r.mutable_hidden();
      h->add_shape(2);
      h->add_shape(64);
      expect_rejected(r, "token ids, not hidden states");
    } else {
      r.mutable_hidden()->set_shape(1, 63);
      expect_rejected(r, "shape");
    }
  }
  {
    v1::StageStepRequest r = base();
    r.set_stage_index(7);
    expect_rejected(r, "stage_index");
  }

  // Everyone is still up, still agrees, and still generates correctly.
  for (size_t i = 0; i < cluster.size(); ++i) EXPECT_TRUE(cluster.node(i).Running()) << i;
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.Formed(1, 3); }, 10s)) << cluster.Logs();
  EXPECT_EQ(cluster.Greedy(1, "Once upon a time", 32),
            LocalGreedy("stories260K-f32.gguf", "Once upon a time", 32));
  EXPECT_NE(cluster.node(0).Log().find("discovery: ignoring"), std::string::npos) << cluster.Logs();
}

TEST(ClusterTest, ATakenDefaultMetricsPortDoesNotStopANode) {
  // Something else listens on gRPC port + 1000, the default metrics port.
  uint16_t grpc_port = 0;
  int blocker = -1;
  for (int attempt = 0; attempt < 20 && blocker < 0; ++attempt) {
    grpc_port = testing::FreeTcpPort();
    if (grpc_port == 0 || grpc_port > 65535 - 1000) continue;
    blocker = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(grpc_port + 1000);
    if (bind(blocker, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(blocker, 1) != 0) {
      close(blocker);
      blocker = -1;
    }
  }
  ASSERT_GE(blocker, 0);
  const std::string dir = testing::MakeTempDir("metrics-port");
  auto node = ChildProcess::Start(
      {testing::RinglmdPath(), "--model", testing::ModelPath("stories260K-f32.gguf"), "--grpc-host",
       "127.0.0.1", "--grpc-port", std::to_string(grpc_port), "--discovery-port",
       std::to_string(testing::FreeUdpPort()), "--loopback-only", "--insecure", "--state-dir",
       dir + "/state", "--threads", "1"},
      dir + "/node.log");
  ASSERT_TRUE(node.ok());
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        return (*node)->Log().find("serving /metrics on a free port instead") != std::string::npos;
      },
      20s))
      << (*node)->Log();
  EXPECT_TRUE(testing::WaitFor(
      [&] { return (*node)->Log().find("serving gRPC") != std::string::npos; }, 20s))
      << (*node)->Log();
  EXPECT_TRUE((*node)->Running());
  close(blocker);
}

// A second daemon on a port a first one holds must fail to start, for each
// of its listeners: sharing the port would split the first one's calls.
TEST(ClusterTest, ADaemonOnATakenPortFailsToStartInsteadOfSharingIt) {
  const std::string dir = testing::MakeTempDir("taken-port");
  const uint16_t grpc = testing::FreeTcpPort(), api = testing::FreeTcpPort(),
                 metrics = testing::FreeTcpPort(), udp = testing::FreeUdpPort();
  auto args = [&](const std::string& name, uint16_t g, uint16_t a, uint16_t m) {
    return std::vector<std::string>{
        testing::RinglmdPath(), "--model",          testing::ModelPath("stories260K-f32.gguf"),
        "--grpc-host",          "127.0.0.1",        "--grpc-port",
        std::to_string(g),      "--api-host",       "127.0.0.1",
        "--api-port",           std::to_string(a),  "--metrics-port",
        std::to_string(m),      "--discovery-port", std::to_string(udp),
        "--loopback-only",      "--insecure",       "--state-dir",
        dir + "/" + name,       "--threads",        "1"};
  };
  auto first = ChildProcess::Start(args("first", grpc, api, metrics), dir + "/first.log");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(
      testing::WaitFor([&] { return (*first)->Log().find("API at") != std::string::npos; }, 20s))
      << (*first)->Log();
  struct Case {
    const char* name;
    uint16_t grpc, api, metrics;
    const char* error;
  };
  for (const Case& c :
       {Case{"grpc", grpc, testing::FreeTcpPort(), testing::FreeTcpPort(), "(is the port in use?)"},
        Case{"api", testing::FreeTcpPort(), api, testing::FreeTcpPort(), "cannot bind the API"},
        Case{"metrics", testing::FreeTcpPort(), testing::FreeTcpPort(), metrics,
             "cannot listen for /metrics"}}) {
    SCOPED_TRACE(c.name);
    auto second =
        ChildProcess::Start(args(c.name, c.grpc, c.api, c.metrics), dir + "/" + c.name + ".log");
    ASSERT_TRUE(second.ok());
    EXPECT_TRUE((*second)->Wait(20s)) << "it shares the port\n" << (*second)->Log();
    EXPECT_NE((*second)->Log().find(c.error), std::string::npos) << (*second)->Log();
  }
  EXPECT_TRUE((*first)->Running());
}

}  // namespace
}  // namespace ringlm
