// Paged, shared KV on a real 3-node cluster: conversations that share a
// system prompt hold it once on every stage, and a budget too small for the
// conversations costs cache hits, never tokens.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/metrics.h"
#include "gtest/gtest.h"
#include "inference/kv_cache.h"
#include "nlohmann/json.hpp"
#include "tests/chat_client.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::LoopbackCluster;

constexpr int kMaxTokens = 24;
constexpr int kBlockTokens = static_cast<int>(kKvBlockTokens);

using Reply = testing::ChatReply;

Reply Chat(uint16_t port, const json& messages) {
  return testing::Chat(port, messages, kMaxTokens);
}

LoopbackCluster::Options Options(std::vector<std::string> all_args,
                                 std::vector<std::string> head_args = {}) {
  LoopbackCluster::Options o;
  o.api = true;
  o.extra_args = {"--ctx-size", "1024"};
  o.extra_args.insert(o.extra_args.end(), all_args.begin(), all_args.end());
  o.head_extra_args = std::move(head_args);
  return o;
}

double Sample(const LoopbackCluster& cluster, size_t node, const std::string& name,
              const MetricLabels& labels = {}) {
  return FindSample(cluster.Metrics(node), name, labels).value_or(-1);
}

// 16 conversations, one after another, open with the same long system
// prompt. From the second on, each forks the first one's session at the
// shared prefix: it reuses at least those 300 tokens, and every stage holds
// them once, in blocks all 16 sessions refer to.
TEST(KvSharingClusterTest, ConversationsSharingASystemPromptHoldItOnceOnEveryStage) {
  LoopbackCluster cluster(Options({}));
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  const json system = {{"role", "system"}, {"content", testing::StoryText(210, 0)}};
  int longest = 0;
  for (int c = 0; c < 16; ++c) {
    SCOPED_TRACE(absl::StrCat("conversation ", c));
    const json messages = json::array(
        {system, {{"role", "user"}, {"content", testing::StoryText(6 + c % 5, 100 + c)}}});
    Reply r = Chat(cluster.api_port(), messages);
    ASSERT_EQ(r.status, 200) << r.content << cluster.Logs();
    std::printf("conversation %d: %d prompt tokens, %d cached\n", c, r.prompt_tokens, r.cached);
    if (c == 0) {
      EXPECT_EQ(r.cached, 0);
    } else {
      EXPECT_GE(r.cached, 300);
      EXPECT_LT(r.cached, r.prompt_tokens);
    }
    longest = std::max(longest, r.prompt_tokens + r.completion_tokens);
  }
  for (size_t node = 0; node < cluster.size(); ++node) {
    SCOPED_TRACE(absl::StrCat("stage on node ", node));
    const double used = Sample(cluster, node, "ringlm_kv_blocks", {{"state", "used"}});
    const double shared = Sample(cluster, node, "ringlm_kv_blocks", {{"state", "shared"}});
    const double bytes = Sample(cluster, node, "ringlm_kv_cache_bytes");
    const double logical = Sample(cluster, node, "ringlm_kv_cache_logical_bytes");
    std::printf("node %zu: %.0f blocks (%.0f shared), %.0f bytes held, %.0f unshared\n", node, used,
                shared, bytes, logical);
    // The prefix once: its 300 / 16 whole blocks are shared, and the rest
    // is each conversation's own tail of at most (longest - 300) positions
    // plus the block the fork copied.
    EXPECT_GE(shared, 300 / kBlockTokens);
    const int tail_blocks = (longest - 300 + kBlockTokens - 1) / kBlockTokens + 1;
    EXPECT_LE(used, 300.0 / kBlockTokens + 1 + 16 * tail_blocks);
    EXPECT_GE(logical, 16 * 300.0 / kBlockTokens * (bytes / used));
    EXPECT_LT(bytes * 3, logical);
    EXPECT_EQ(Sample(cluster, node, "ringlm_kv_blocks_evicted_total"), 0);
  }
}

// Ten long conversations, turn by turn in turns, through a 1 MiB budget per
// stage that holds only a few of them: stages evict, the head's claims then
// miss and are recomputed, and every reply is the cache-off cluster's.
TEST(KvSharingClusterTest, ABudgetTooSmallCostsHitsNeverTokens) {
  LoopbackCluster small(Options({"--kv-cache-mb", "1"}));
  LoopbackCluster off(Options({}, {"--no-prefix-cache"}));
  ASSERT_TRUE(testing::WaitFor([&] { return small.AllFormed() && off.AllFormed(); }, 30s))
      << small.Logs() << off.Logs();
  constexpr int kConversations = 10;
  std::vector<json> chats;
  for (int c = 0; c < kConversations; ++c) {
    chats.push_back(
        json::array({{{"role", "system"}, {"content", testing::StoryText(220, 200 + c)}}}));
  }
  int hits = 0;
  for (int turn = 0; turn < 3; ++turn) {
    for (int c = 0; c < kConversations; ++c) {
      SCOPED_TRACE(absl::StrCat("conversation ", c, ", turn ", turn + 1));
      chats[c].push_back(
          {{"role", "user"}, {"content", testing::StoryText(8, 300 + 10 * c + turn)}});
      Reply a = Chat(small.api_port(), chats[c]);
      Reply b = Chat(off.api_port(), chats[c]);
      ASSERT_EQ(a.status, 200) << a.content << small.Logs();
      ASSERT_EQ(b.status, 200) << b.content << off.Logs();
      EXPECT_EQ(a.content, b.content);
      EXPECT_EQ(b.cached, 0);
      if (a.cached > 0) ++hits;
      chats[c].push_back({{"role", "assistant"}, {"content", a.content}});
    }
  }
  double evicted = 0;
  for (size_t node = 0; node < small.size(); ++node) {
    evicted += std::max(0.0, Sample(small, node, "ringlm_kv_blocks_evicted_total"));
    EXPECT_LE(Sample(small, node, "ringlm_kv_cache_bytes"), 1 << 20);
  }
  std::printf("%d of %d turns hit the cache; %.0f blocks evicted\n", hits, 3 * kConversations,
              evicted);
  EXPECT_GT(evicted, 0);
  EXPECT_GT(Sample(small, 0, "ringlm_prefix_cache_misses_total"), 0);
}

}  // namespace
}  // namespace ringlm
