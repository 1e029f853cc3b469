// `ringlm status` against an in-process RingNode and against a port that
// refuses connections.
#include <cstdlib>

#include "cli/commands.h"
#include "cli/test_commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using nlohmann::json;
using testing::CommandResult;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing::RunCommand;
using ::testing::StartsWith;

// A /metrics text as a node serves it: 5 + 2 + 1 requests, one of them an
// error; histograms with means of 250 ms (first token) and 62.5 ms (forward);
// 30 of 48 drafts accepted, over two requests that accepted 0.5 and 0.75.
constexpr char kMetrics[] = R"(# HELP ringlm_requests_total Requests by how they finished.
# TYPE ringlm_requests_total counter
ringlm_requests_total{finish="stop"} 5
ringlm_requests_total{finish="length"} 2
ringlm_requests_total{finish="error"} 1
# TYPE ringlm_prompt_tokens_total counter
ringlm_prompt_tokens_total 40
# TYPE ringlm_generated_tokens_total counter
ringlm_generated_tokens_total 120
# TYPE ringlm_prefix_cache_hits_total counter
ringlm_prefix_cache_hits_total 3
# TYPE ringlm_prefix_cache_misses_total counter
ringlm_prefix_cache_misses_total 4
# TYPE ringlm_prefix_cache_tokens_total counter
ringlm_prefix_cache_tokens_total 33
# TYPE ringlm_time_to_first_token_seconds histogram
ringlm_time_to_first_token_seconds_bucket{le="0.1"} 0
ringlm_time_to_first_token_seconds_bucket{le="+Inf"} 2
ringlm_time_to_first_token_seconds_sum 0.5
ringlm_time_to_first_token_seconds_count 2
# TYPE ringlm_stage_forward_seconds histogram
ringlm_stage_forward_seconds_bucket{le="0.05"} 1
ringlm_stage_forward_seconds_bucket{le="+Inf"} 4
ringlm_stage_forward_seconds_sum 0.25
ringlm_stage_forward_seconds_count 4
# TYPE ringlm_speculation_drafted_tokens_total counter
ringlm_speculation_drafted_tokens_total 48
# TYPE ringlm_speculation_accepted_tokens_total counter
ringlm_speculation_accepted_tokens_total 30
# TYPE ringlm_speculation_request_acceptance histogram
ringlm_speculation_request_acceptance_bucket{le="+Inf"} 2
ringlm_speculation_request_acceptance_sum 1.25
ringlm_speculation_request_acceptance_count 2
)";

class StatusCommandTest : public ::testing::Test {
 protected:
  void SetUp() override { ::unsetenv("RINGLM_CLUSTER_KEY_FILE"); }

  // Node "node-a" (the fake, layers [0,3) of 5 MiB, a head: its HTTP API at
  // 127.0.0.1:8080) sees itself and "node-b" (layers [3,5)) at a port that
  // refuses connections.
  v1::TopologyReply Reply(const std::string& metrics) const {
    v1::TopologyReply r;
    r.set_node_id("node-a");
    r.set_security("insecure");
    r.set_state(v1::NODE_STATE_READY);
    r.set_metrics(metrics);
    v1::ModelInfo* m = r.mutable_model();
    m->set_file_name("stories260K-f32.gguf");
    m->set_architecture("llama");
    m->set_n_layers(5);
    m->set_total_bytes(3 << 20);
    // A dense first layer of 1 MiB, then MoE layers of 2 MiB: 8 experts, 2 used.
    for (uint64_t mib : {1, 2, 2, 2, 2}) m->add_layer_bytes(mib << 20);
    m->set_n_expert(8);
    m->set_n_expert_used(2);
    v1::Plan* plan = r.mutable_plan();
    plan->set_epoch(7);
    for (auto [id, address, first, last] : {std::tuple("node-a", node_.address(), 0, 3),
                                            std::tuple("node-b", peer_.address(), 3, 5)}) {
      v1::PlanStage* s = plan->add_stages();
      s->set_node_id(id);
      s->set_address(address);
      s->set_first_layer(first);
      s->set_last_layer(last);
    }
    v1::PeerView* self = r.add_peers();
    self->set_node_id("node-a");
    self->set_address(node_.address());
    self->set_is_self(true);
    self->set_api_address("127.0.0.1:8080");
    self->mutable_capabilities()->set_usable_memory_bytes(uint64_t{2048} << 20);
    self->mutable_capabilities()->set_matmul_gflops(12.5);
    self->mutable_capabilities()->set_read_gbps(9.25);
    self->mutable_capabilities()->set_placement(v1::PLACEMENT_SPEED);
    v1::PeerView* other = r.add_peers();
    other->set_node_id("node-b");
    other->set_address(peer_.address());
    other->set_last_seen_ms_ago(1500);
    other->mutable_capabilities()->set_usable_memory_bytes(uint64_t{1024} << 20);
    r.mutable_cache()->add_sessions();
    r.mutable_cache()->add_sessions()->set_busy(true);
    r.mutable_cache()->set_used_bytes(uint64_t{3} << 20);
    r.mutable_cache()->set_budget_bytes(uint64_t{64} << 20);
    return r;
  }

  testing::FakeRingNode node_;
  testing::RefusingPort peer_;
};

TEST_F(StatusCommandTest, HelpListsTheFlags) {
  CommandResult r = RunCommand(RunStatus, {"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--node", "--json", "--cluster-key", "--insecure"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
  EXPECT_THAT(r.err, IsEmpty());
}

TEST_F(StatusCommandTest, BadFlagsAndAMissingKeyFail) {
  CommandResult bad = RunCommand(RunStatus, {"--bogus"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "ringlm: unknown option --bogus (see --help)\n");
  CommandResult no_key = RunCommand(RunStatus, {"--node", node_.address()});
  EXPECT_EQ(no_key.exit_code, 1);
  EXPECT_THAT(no_key.err, StartsWith("ringlm: FAILED_PRECONDITION: no cluster key"));
  EXPECT_THAT(no_key.out, IsEmpty());
}

TEST_F(StatusCommandTest, AnUnreachableNodeFailsWithTheConnectionError) {
  CommandResult r = RunCommand(RunStatus, {"--insecure", "--node", peer_.address()});
  EXPECT_EQ(r.exit_code, 1);
  // UNAVAILABLE, not DEADLINE_EXCEEDED: a refused connection fails at once.
  EXPECT_THAT(r.err, StartsWith("ringlm: UNAVAILABLE: node " + peer_.address() + ": "));
  EXPECT_THAT(r.err, HasSubstr("Connection refused"));
  EXPECT_THAT(r.out, IsEmpty());
}

TEST_F(StatusCommandTest, JsonHasEveryNodeAndTheMetricsFigures) {
  node_.SetTopology(Reply(kMetrics));
  CommandResult r = RunCommand(RunStatus, {"--insecure", "--node", node_.address(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json d = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(d.is_object()) << r.out;
  EXPECT_EQ(d["node_id"], "node-a");
  EXPECT_EQ(d["model"]["n_layers"], 5);
  EXPECT_EQ(d["plan"]["epoch"], 7);
  ASSERT_EQ(d["plan"]["stages"].size(), 2u);
  ASSERT_EQ(d["nodes"].size(), 2u);

  const json& a = d["nodes"][0];
  EXPECT_EQ(a["state"], "ready");
  EXPECT_EQ(a["layers"], json::parse("[0, 3]"));
  EXPECT_EQ(a["layers_bytes"], 5 << 20);
  EXPECT_EQ(a["cache"]["sessions"], 2);
  EXPECT_EQ(a["cache"]["busy_sessions"], 1);
  const json& m = a["metrics"];
  EXPECT_EQ(m["requests"], 8.0);
  EXPECT_EQ(m["drafted_tokens"], 48.0);
  EXPECT_EQ(m["accepted_draft_tokens"], 30.0);
  EXPECT_EQ(m["mean_request_acceptance"], 0.625);
  EXPECT_EQ(m["errors"], 1.0);
  EXPECT_EQ(m["prompt_tokens"], 40.0);
  EXPECT_EQ(m["generated_tokens"], 120.0);
  EXPECT_EQ(m["cache_hits"], 3.0);
  EXPECT_EQ(m["cache_misses"], 4.0);
  EXPECT_EQ(m["cached_tokens"], 33.0);
  EXPECT_EQ(m["mean_ttft_ms"], 250.0);
  EXPECT_EQ(m["mean_forward_ms"], 62.5);
  EXPECT_EQ(m["mean_ms_per_token"], 0.0);  // no such histogram in the text

  const json& b = d["nodes"][1];
  EXPECT_EQ(b["state"], "unreachable");
  EXPECT_EQ(b["layers"], json::parse("[3, 5]"));
  EXPECT_EQ(b["layers_bytes"], 4 << 20);
  EXPECT_EQ(d["model"]["n_expert"], 8);
  EXPECT_EQ(d["model"]["n_expert_used"], 2);
  EXPECT_EQ(d["model"]["layer_bytes"].size(), 5u);
  EXPECT_THAT(b["error"].get<std::string>(), StartsWith("node " + peer_.address()));
  EXPECT_FALSE(b.contains("metrics"));
}

// Nodes are listed in ring order (the plan's stages, first to last), not as
// the node that answers lists its peers; and the models its daemon serves.
TEST_F(StatusCommandTest, NodesComeInRingOrderAndTheServedModelsAreListed) {
  v1::TopologyReply reply = Reply(kMetrics);
  reply.mutable_plan()->mutable_stages()->SwapElements(0, 1);
  reply.add_served_models("stories");
  reply.add_served_models("large");
  node_.SetTopology(reply);
  CommandResult r = RunCommand(RunStatus, {"--insecure", "--node", node_.address(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json d = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_EQ(d["nodes"].size(), 2u) << r.out;
  EXPECT_EQ(d["nodes"][0]["node_id"], "node-b");
  EXPECT_EQ(d["nodes"][1]["node_id"], "node-a");
  EXPECT_EQ(d["served_models"], json::parse(R"(["stories", "large"])"));
  r = RunCommand(RunStatus, {"--insecure", "--node", node_.address()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("models served: stories, large"));
  const std::string table = r.out.substr(r.out.find("NODE "));
  EXPECT_LT(table.find("node-b"), table.find("node-a")) << r.out;
}

TEST_F(StatusCommandTest, JsonListsTheHeadsAndEachNodesApi) {
  node_.SetTopology(Reply(kMetrics));
  CommandResult r = RunCommand(RunStatus, {"--insecure", "--node", node_.address(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json d = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(d.is_object()) << r.out;
  EXPECT_EQ(d["heads"], json::parse(R"([{"node_id": "node-a", "api_address": "127.0.0.1:8080"}])"));
  EXPECT_EQ(d["nodes"][0]["api_address"], "127.0.0.1:8080");
  EXPECT_TRUE(d["nodes"][1]["api_address"].is_null());  // unreachable: it cannot say

  v1::TopologyReply no_head = Reply(kMetrics);
  no_head.mutable_peers(0)->clear_api_address();
  node_.SetTopology(no_head);
  r = RunCommand(RunStatus, {"--insecure", "--node", node_.address(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json none = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(none.is_object()) << r.out;
  EXPECT_EQ(none["heads"], json::array());
  EXPECT_TRUE(none["nodes"][0]["api_address"].is_null());
}

TEST_F(StatusCommandTest, MetricsThatDoNotParseAreLeftOut) {
  // A histogram without its +Inf bucket: ParsePrometheusText refuses it.
  node_.SetTopology(Reply("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n"));
  CommandResult r = RunCommand(RunStatus, {"--insecure", "--node", node_.address(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json d = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(d.is_object()) << r.out;
  EXPECT_TRUE(d["nodes"][0]["metrics"].is_null()) << d["nodes"][0];
}

TEST_F(StatusCommandTest, TableShowsTheModelPlanAndNodes) {
  node_.SetTopology(Reply(kMetrics));
  CommandResult r = RunCommand(RunStatus, {"--insecure", "--node", node_.address()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("security: INSECURE (no cluster key: any host on the network "
                                "can join)\nmodel: stories260K-f32.gguf (llama, 5 layers, 3 MiB)\n"
                                "experts: 8, 2 used per token\n"
                                "plan epoch 7: 2 stage(s)\n"
                                "placement: by memory (asked for by node-b)\n"
                                "heads: node-a at http://127.0.0.1:8080\n"));
  EXPECT_THAT(r.out, HasSubstr("NODE"));
  EXPECT_THAT(r.out, HasSubstr("API"));
  EXPECT_THAT(r.out, HasSubstr("CACHE"));
  EXPECT_THAT(r.out, HasSubstr("WEIGHTS"));
  // node-a: itself, 2048 MiB, 12.5 GFLOPS, 9.2 GB/s, [0,3) of 5 MiB, ready, 8 requests, 120
  // tokens, 62.50 ms per forward, 30 of 48 drafts accepted, 2 cached sessions.
  EXPECT_THAT(r.out,
              ::testing::ContainsRegex("node-a \\* +127\\.0\\.0\\.1:[0-9]+ +127\\.0\\.0\\.1:8080 "
                                       "+2048 MiB +12\\.5 +9\\.2 +\\[0,3\\) +5 MiB +ready "
                                       "+- +8 +120 +62\\.50 +30/48  2 sessions, 3 MiB / 64 MiB"));
  EXPECT_THAT(r.out,
              ::testing::ContainsRegex("node-b +127\\.0\\.0\\.1:[0-9]+ +- +1024 MiB +0\\.0 +0\\.0 "
                                       "+\\[3,5\\) +4 MiB +unreachable +1\\.5s ago"));
}

TEST_F(StatusCommandTest, ADenseModelOrAnOlderNodeShowsNoExpertsOrWeights) {
  v1::TopologyReply reply = Reply(kMetrics);
  reply.mutable_model()->clear_layer_bytes();  // a node from before the field
  reply.mutable_model()->set_n_expert(0);
  reply.mutable_model()->set_n_expert_used(0);
  node_.SetTopology(reply);
  CommandResult r = RunCommand(RunStatus, {"--insecure", "--node", node_.address()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("experts:")));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\\[0,3\\) +- +ready"));
}

TEST_F(StatusCommandTest, TableShowsAClusterKeyAndAMissingPlan) {
  v1::TopologyReply reply = Reply("");
  reply.set_security("mutual-tls");
  reply.set_cluster_id("0123456789abcdef");
  reply.clear_plan();
  reply.set_partition_error("the nodes hold 2 MiB of the 3 MiB the model needs");
  reply.mutable_peers(0)->clear_api_address();
  node_.SetTopology(reply);
  CommandResult r = RunCommand(RunStatus, {"--insecure", "--node", node_.address()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("security: mutual TLS, cluster 0123456789abcdef\n"));
  EXPECT_THAT(r.out, HasSubstr("\nno plan: the nodes hold 2 MiB of the 3 MiB the model needs\n"
                               "placement: by memory (asked for by node-b)\n"
                               "heads: none (no node serves the HTTP API: start one with "
                               "--api-port)\n"));
}

}  // namespace
}  // namespace ringlm
