// Many long prompts at once on a real 3-node cluster: the origin keeps their
// chunks in flight within its bound, so no stage's queue overflows however
// many prompts wait, and every reply is the one the prompt gets alone.

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/chat_client.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::LoopbackCluster;

constexpr int kMaxTokens = 8;

// 40 prompts of about 600 tokens start at once. Beside each other they go in
// 16-token chunks: 1,500 steps, more than a stage queues (1,024). Each
// stage sees only what the origin's in-flight bound lets through, and every
// reply equals the same prompt's reply on its own.
TEST(PromptFlowClusterTest, ManyLongPromptsAtOnceAllGetTheirSoloReplies) {
  LoopbackCluster::Options o;
  o.api = true;
  o.extra_args = {"--ctx-size", "1024"};
  o.head_extra_args = {"--no-prefix-cache"};
  LoopbackCluster cluster(o);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  constexpr int kChats = 40;
  std::vector<json> chats;
  for (int c = 0; c < kChats; ++c) {
    chats.push_back(json::array({{{"role", "user"}, {"content", testing::StoryText(380, c)}}}));
  }
  std::vector<testing::ChatReply> together(kChats);
  {
    std::vector<std::thread> clients;
    for (int c = 0; c < kChats; ++c) {
      clients.emplace_back(
          [&, c] { together[c] = testing::Chat(cluster.api_port(), chats[c], kMaxTokens); });
    }
    for (std::thread& t : clients) t.join();
  }
  int positions = 0;
  for (int c = 0; c < kChats; ++c) {
    SCOPED_TRACE(absl::StrCat("chat ", c));
    ASSERT_EQ(together[c].status, 200) << together[c].content << cluster.Logs();
    positions += together[c].prompt_tokens;
    const testing::ChatReply alone = testing::Chat(cluster.api_port(), chats[c], kMaxTokens);
    ASSERT_EQ(alone.status, 200) << alone.content;
    EXPECT_EQ(together[c].content, alone.content);
  }
  std::printf("%d chats, %d prompt positions at once\n", kChats, positions);
  EXPECT_GT(positions / 16, 1024)
      << "too few prompt steps to have overflowed a stage queue without the bound";
}

}  // namespace
}  // namespace ringlm
