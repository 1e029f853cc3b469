// Several models on one cluster (issue 42): three real daemons on loopback
// each serve stories260K and a synthetic tinyllama-shaped model. Each model
// gets its own plan over the three nodes within its part of each node's
// memory, and interleaved requests to both get exactly the ids one process
// gives for each model alone.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"
#include "tests/generation_stream.h"
#include "tests/local_generation.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using namespace std::chrono_literals;
using testing::GenerationStream;
using testing::LoopbackCluster;
using testing::Sampling;

constexpr int kTokens = 24;
const std::vector<std::string> kPrompts = {"Once upon a time", "Lily and Tom", "The cat",
                                           "One day"};

// The synthetic model, written once per test process.
const std::string& LargeModel() {
  static const std::string* path = [] {
    auto* p = new std::string(testing::MakeTempDir("ringlm-multi") + "/tinyllama.gguf");
    testing::CommandResult synth =
        testing::RunCommand(absl::StrCat(testing::RinglmPath(),
                                         " synth --preset tinyllama-1.1b --type q4_0 --out ", *p),
                            false);
    EXPECT_EQ(synth.exit_code, 0) << synth.output;
    return p;
  }();
  return *path;
}

class MultiModelClusterTest : public ::testing::Test {
 protected:
  static LoopbackCluster::Options Options(const std::vector<int>& memory_mb) {
    LoopbackCluster::Options options;
    options.model = "stories260K-f32.gguf";
    options.memory_mb = memory_mb;
    options.extra_args = {"--model", "large=" + LargeModel(), "--ctx-size", "256"};
    return options;
  }
};

TEST_F(MultiModelClusterTest, InterleavedRequestsToTwoModelsGetEachModelsOwnIds) {
  const std::vector<int> memory_mb = {4000, 2000, 2000};
  LoopbackCluster cluster(Options(memory_mb));
  ASSERT_TRUE(testing::WaitFor(
      [&] { return cluster.AllFormed("stories260K-f32") && cluster.AllFormed("large"); }, 60s))
      << cluster.Logs();

  // Each node's parts of memory for the two models sum to its --memory-mb,
  // and the layers each holds of each model fit its part.
  for (size_t n = 0; n < cluster.size(); ++n) {
    uint64_t offered = 0;
    for (const std::string& model : {"stories260K-f32", "large"}) {
      const nlohmann::json status = cluster.Status(n, model);
      ASSERT_TRUE(status.is_object()) << model;
      EXPECT_EQ(status["served_models"],
                nlohmann::json(std::vector<std::string>{"stories260K-f32", "large"}));
      for (const nlohmann::json& node : status["nodes"]) {
        if (!node["self"].get<bool>()) continue;
        const uint64_t usable = node["usable_memory_bytes"].get<uint64_t>();
        offered += usable;
        ASSERT_FALSE(node["layers_bytes"].is_null()) << model;
        EXPECT_LE(node["layers_bytes"].get<uint64_t>(), usable) << "node " << n << " " << model;
        std::printf("node %zu %s: layers [%d, %d), %.1f MiB of %.1f MiB\n", n, model.c_str(),
                    node["layers"][0].get<int>(), node["layers"][1].get<int>(),
                    node["layers_bytes"].get<uint64_t>() / 1048576.0, usable / 1048576.0);
      }
    }
    EXPECT_LE(offered, uint64_t(memory_mb[n]) << 20) << "node " << n;
    EXPECT_GE(offered, (uint64_t(memory_mb[n]) << 20) - 2) << "node " << n;  // rounding only
  }

  // Greedy and seeded requests to both models, all at once: each model's
  // greedy ids are one process's, and seeded ones what they are alone.
  auto stream = [&](size_t i) {
    const std::string model = i % 2 == 0 ? "stories260K-f32" : "large";
    const Sampling sampling =
        i % 4 >= 2 ? Sampling{.temperature = 0.8f, .seed = 7 + i} : Sampling{};
    return std::make_unique<GenerationStream>(cluster, sampling, kTokens, kPrompts[i / 2 % 4],
                                              model);
  };
  constexpr size_t kRequests = 8;
  std::vector<std::vector<int32_t>> alone;
  for (size_t i = 0; i < kRequests; ++i) {
    auto [ids, status] = stream(i)->Finish();
    ASSERT_TRUE(status.ok()) << "request " << i << ": " << status;
    alone.push_back(ids);
  }
  for (size_t i = 0; i < kRequests; i += 4) {
    EXPECT_EQ(alone[i], testing::LocalGreedy(testing::ModelPath("stories260K-f32.gguf"),
                                             kPrompts[i / 2 % 4], kTokens))
        << "request " << i;
    EXPECT_EQ(alone[i + 1], testing::LocalGreedy(LargeModel(), kPrompts[(i + 1) / 2 % 4], kTokens))
        << "request " << i + 1;
  }
  std::vector<std::unique_ptr<GenerationStream>> together;
  for (size_t i = 0; i < kRequests; ++i) together.push_back(stream(i));
  for (size_t i = 0; i < kRequests; ++i) {
    auto [ids, status] = together[i]->Finish();
    EXPECT_TRUE(status.ok()) << "request " << i << ": " << status;
    EXPECT_EQ(ids, alone[i]) << "request " << i;
  }
  // `ringlm generate --model NAME` reaches the model by name; an unknown
  // name is refused.
  EXPECT_EQ(cluster.Greedy(1, kPrompts[0], kTokens, "--model large"), alone[1]);
  testing::CommandResult unknown = testing::RunCommand(
      absl::StrCat(testing::RinglmPath(), " generate --cluster ", cluster.Address(0),
                   " --prompt hi -n 2 --model nope ", cluster.SecurityArgs(), " 2>&1"),
      false);
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.output.find("does not serve the model 'nope'"), std::string::npos)
      << unknown.output;
}

}  // namespace
}  // namespace ringlm
