// Every architecture issue 39 added, on a real 3-node loopback ring, in
// Q8_0: the mixture-of-experts ones (qwen3moe-tiny: 16 experts, 4 used,
// QK-norm, 4 layers split 2, 1, 1; deepseek3-tiny: MLA, a dense first layer,
// 32 experts, 4 used, a shared one; moe-tiny: llama with Mixtral's experts;
// qwen2moe-tiny: a gated shared expert), split so that every stage routes
// its tokens through experts too, and the dense ones (qwen3, gemma2, gemma3,
// phi3). The ring gives the ids of one process (which synth_reference_test
// holds equal to llama.cpp's), for each prompt alone and for all of them at
// once, and a second turn gives the same reply from its cached prefix as
// from a head without a prefix cache.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/chat_client.h"
#include "tests/daemon_harness.h"
#include "tests/local_generation.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::LoopbackCluster;

const std::vector<std::string> kPrompts = {"Once upon a time",
                                           "The quick brown fox jumps over the lazy dog",
                                           "In a hole in the ground there lived"};
constexpr int kTokens = 32;

struct MoePreset {
  std::string name;
  int dense_lead = 0;  // leading dense layers (-1: a dense model)
};

class MoeClusterTest : public ::testing::TestWithParam<MoePreset> {
 protected:
  void SetUp() override {
    LoopbackCluster::Options options;
    const std::string preset = GetParam().name;
    model_ = testing::MakeTempDir("ringlm-moe-cluster") + "/" + preset + "-q8_0.gguf";
    const testing::CommandResult synth =
        testing::RunCommand(absl::StrCat(testing::RinglmPath(), " synth --preset ", preset,
                                         " --type q8_0 --seed 1 --out ", model_),
                            false);
    ASSERT_EQ(synth.exit_code, 0) << synth.output;
    options.model = model_;
    options.api = true;
    options.api_nodes = {1};
    options.head_extra_args = {"--no-prefix-cache"};  // node 0: the uncached head
    options.extra_args = {"--ctx-size", "512"};
    cluster_ = std::make_unique<LoopbackCluster>(options);
    ASSERT_TRUE(testing::WaitFor([&] { return cluster_->AllFormed(); }, 30s)) << cluster_->Logs();
    std::vector<int> lasts;
    const json status = cluster_->Status(0);
    for (const json& st : status["plan"]["stages"]) lasts.push_back(st["last_layer"].get<int>());
    ASSERT_EQ(lasts.size(), 3u);
    for (int last : lasts) {
      ASSERT_GT(last, GetParam().dense_lead) << "every stage holds MoE layers (or any layers)";
    }
  }

  std::string model_;
  std::unique_ptr<LoopbackCluster> cluster_;
};

TEST_P(MoeClusterTest, TheRingGivesTheIdsOfOneProcessAloneAndAllAtOnce) {
  std::vector<std::vector<int32_t>> local;
  for (const std::string& prompt : kPrompts) {
    local.push_back(testing::LocalGreedy(model_, prompt, kTokens));
    ASSERT_EQ(local.back().size(), static_cast<size_t>(kTokens));
  }
  for (size_t p = 0; p < kPrompts.size(); ++p) {
    EXPECT_EQ(cluster_->Greedy(p % cluster_->size(), kPrompts[p], kTokens), local[p])
        << "alone: '" << kPrompts[p] << "'";
  }
  // All at once, twice over, through every node: the stages batch them.
  std::vector<std::vector<int32_t>> together(2 * kPrompts.size());
  {
    std::vector<std::thread> clients;
    for (size_t i = 0; i < together.size(); ++i) {
      clients.emplace_back([&, i] {
        together[i] =
            cluster_->Greedy(i % cluster_->size(), kPrompts[i % kPrompts.size()], kTokens);
      });
    }
    for (std::thread& t : clients) t.join();
  }
  for (size_t i = 0; i < together.size(); ++i) {
    EXPECT_EQ(together[i], local[i % kPrompts.size()])
        << "at once: '" << kPrompts[i % kPrompts.size()] << "'";
  }
}

TEST_P(MoeClusterTest, ACachedContinuationGivesTheUncachedReply) {
  const json hello = json::array({{{"role", "user"}, {"content", "Hi"}}});
  for (size_t head : {0, 1}) {
    ASSERT_TRUE(testing::WaitFor(
        [&] { return testing::Chat(cluster_->api_port(head), hello, 1).status == 200; }, 30s))
        << "head " << head << "\n"
        << cluster_->Logs();
  }
  // The first turn, on the caching head. The second turn's assistant text
  // is given, not that reply: a head splices its own replies back in by
  // their token ids, and a head without a cache tokenizes the text.
  json messages = json::array({{{"role", "user"}, {"content", "Tell me a story."}}});
  const testing::ChatReply first = testing::Chat(cluster_->api_port(1), messages, 16);
  ASSERT_EQ(first.status, 200) << first.content;
  messages.push_back({{"role", "assistant"}, {"content", "Once upon a time, a fox found a key."}});
  messages.push_back({{"role", "user"}, {"content", "And then?"}});
  const testing::ChatReply cached = testing::Chat(cluster_->api_port(1), messages, 16);
  ASSERT_EQ(cached.status, 200) << cached.content;
  EXPECT_GT(cached.cached, 0) << "the second turn reuses the first one's prefix";
  const testing::ChatReply uncached = testing::Chat(cluster_->api_port(0), messages, 16);
  ASSERT_EQ(uncached.status, 200) << uncached.content;
  EXPECT_EQ(uncached.cached, 0);
  EXPECT_EQ(cached.prompt_tokens, uncached.prompt_tokens);
  EXPECT_EQ(cached.content, uncached.content);
  EXPECT_EQ(cached.completion_tokens, uncached.completion_tokens);
}

INSTANTIATE_TEST_SUITE_P(Presets, MoeClusterTest,
                         ::testing::Values(MoePreset{"qwen3moe-tiny"},
                                           MoePreset{"deepseek3-tiny", 1}, MoePreset{"moe-tiny"},
                                           MoePreset{"qwen2moe-tiny"}, MoePreset{"qwen3-tiny", -1},
                                           MoePreset{"gemma2-tiny", -1},
                                           MoePreset{"gemma3-tiny", -1},
                                           MoePreset{"phi3-tiny", -1}),
                         [](const ::testing::TestParamInfo<MoePreset>& info) {
                           std::string name = info.param.name;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace ringlm
