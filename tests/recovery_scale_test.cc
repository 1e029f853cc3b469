// Scale: 24 ringlmd processes on loopback (run alone: they take both cores).
#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon_harness.h"
#include "tests/generation_stream.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::GenerationStream;
using testing::LoopbackCluster;
using testing::Sampling;

// Scale: 24 daemons on loopback, one thread each, over a 48-layer model
// with stories260K's widths. They agree on one 24-stage plan; then 6 of them
// are killed at random under 4 running requests, the other 18 re-form, and
// every request completes with its undisturbed ids. Prints the times.
TEST(RecoveryScaleTest, TwentyFourNodesAgreeAndSurviveSixKillsMidRequest) {
  constexpr size_t kNodes = 24;
  constexpr size_t kKilled = 6;
  constexpr int kScaleTokens = 120;
  const std::string model = testing::MakeTempDir("ringlm-s48") + "/stories-48.gguf";
  testing::CommandResult synth =
      testing::RunCommand(absl::StrCat(testing::RinglmPath(),
                                       " synth --preset stories-48 --type "
                                       "f32 --out ",
                                       testing::ShellQuote(model)));
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  LoopbackCluster::Options options;
  options.model = model;
  options.memory_mb.assign(kNodes, 2000);
  const auto start = Clock::now();
  LoopbackCluster cluster(options);
  auto all_formed = [&](const std::vector<size_t>& nodes, size_t n) {
    for (size_t i : nodes) {
      if (!cluster.Formed(i, n)) return false;
    }
    return true;
  };
  std::vector<size_t> everyone(kNodes);
  for (size_t i = 0; i < kNodes; ++i) everyone[i] = i;
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.Formed(0, kNodes); }, 120s)) << cluster.Logs();
  ASSERT_TRUE(testing::WaitFor([&] { return all_formed(everyone, kNodes); }, 60s))
      << cluster.Logs();
  const double formed_s = std::chrono::duration<double>(Clock::now() - start).count();
  const nlohmann::json plan = cluster.Status(0)["plan"]["stages"];
  for (size_t i = 1; i < kNodes; ++i) {
    EXPECT_EQ(cluster.Status(i)["plan"]["stages"], plan) << "node " << i;
  }
  std::printf("%zu nodes agreed on one %zu-stage plan %.2f s after start\n", kNodes, plan.size(),
              formed_s);

  const std::vector<Sampling> requests = {{}, {.temperature = 0.8f, .seed = 1}, {}, {}};
  std::vector<std::vector<int32_t>> undisturbed;
  for (const Sampling& s : requests) {
    GenerationStream stream(cluster, s, kScaleTokens);
    auto [ids, status] = stream.Finish();
    ASSERT_TRUE(status.ok()) << status;
    std::printf("undisturbed: %d tokens in %.2f s after the first\n", kScaleTokens,
                stream.DecodeSeconds());
    undisturbed.push_back(ids);
  }
  std::vector<std::unique_ptr<GenerationStream>> streams;
  for (const Sampling& s : requests) {
    streams.push_back(std::make_unique<GenerationStream>(cluster, s, kScaleTokens));
  }
  for (auto& stream : streams) stream->WaitFor(10);
  std::vector<size_t> others(everyone.begin() + 1, everyone.end());
  std::shuffle(others.begin(), others.end(), std::mt19937(24));
  const std::vector<size_t> killed(others.begin(), others.begin() + kKilled);
  const auto kill_time = Clock::now();
  for (size_t i : killed) cluster.KillNode(i);
  const bool head_reformed =
      testing::WaitFor([&] { return cluster.Formed(0, kNodes - kKilled); }, 60s);
  const double reformed_s = std::chrono::duration<double>(Clock::now() - kill_time).count();
  EXPECT_TRUE(head_reformed);
  std::printf("the head saw the %zu others agree on a plan %.2f s after the kills\n",
              kNodes - kKilled - 1, reformed_s);
  for (size_t r = 0; r < streams.size(); ++r) {
    auto [ids, status] = streams[r]->Finish();
    EXPECT_TRUE(status.ok()) << "request " << r << ": " << status;
    EXPECT_EQ(ids, undisturbed[r]) << "request " << r;
    std::printf("request %zu: longest pause after the kills %.2f s\n", r,
                streams[r]->PauseAfter(kill_time));
  }
  const std::vector<size_t> survivors(others.begin() + kKilled, others.end());
  std::vector<size_t> rest = {0};
  rest.insert(rest.end(), survivors.begin(), survivors.end());
  ASSERT_TRUE(testing::WaitFor([&] { return all_formed(rest, kNodes - kKilled); }, 60s))
      << cluster.Logs();
  std::printf("every survivor reported the %zu-node plan %.2f s after the kills\n",
              kNodes - kKilled, std::chrono::duration<double>(Clock::now() - kill_time).count());
  if (::testing::Test::HasFailure()) ADD_FAILURE() << cluster.Logs();
}

}  // namespace
}  // namespace ringlm
