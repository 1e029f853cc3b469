// Speculative decoding on a real 3-node loopback ring (issue 41), with n-gram
// drafts and with a draft model: every reply is the same with and without
// drafts, greedy and seeded, one at a time and eight at once, and equals one
// process's; the head's metrics show drafts checked and accepted. (Recovery with speculation:
// recovery_cluster_test, whose trials speculate.)
#include <memory>
#include <string>
#include <vector>

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

constexpr int kTokens = 120;
const std::vector<std::string> kPrompts = {"Lily and Tom", "Once upon a time", "The cat",
                                           "One day"};

std::vector<int32_t> Generate(const LoopbackCluster& cluster, const std::string& prompt,
                              Sampling sampling) {
  GenerationStream stream(cluster, sampling, kTokens, prompt);
  auto [ids, status] = stream.Finish();
  EXPECT_TRUE(status.ok()) << status;
  return ids;
}

// With n-gram drafts (the default), or with a draft model on every node
// (the Q8_0 copy of the F32 target: most of its guesses match, not all).
class SpeculationClusterTest : public ::testing::TestWithParam<bool> {};

TEST_P(SpeculationClusterTest, RepliesAreTheSameWithAndWithoutDraftsAloneAndAtOnce) {
  LoopbackCluster::Options options;
  if (GetParam()) {
    options.extra_args = {"--draft-model", testing::ModelPath("stories260K-q8_0.gguf")};
  }
  LoopbackCluster cluster(options);
  ASSERT_TRUE(testing::WaitFor([&] { return cluster.AllFormed(); }, 30s)) << cluster.Logs();
  // Request i: prompt i % 4, greedy for even i, seeded for odd ones.
  auto sampling = [](size_t i, bool speculate) {
    return i % 2 == 0 ? Sampling{.speculate = speculate}
                      : Sampling{.temperature = 0.8f, .seed = 7 + i, .speculate = speculate};
  };
  constexpr size_t kRequests = 8;
  std::vector<std::vector<int32_t>> plain(kRequests);
  for (size_t i = 0; i < kRequests; ++i) {
    plain[i] = Generate(cluster, kPrompts[i % kPrompts.size()], sampling(i, false));
    ASSERT_EQ(plain[i].size(), static_cast<size_t>(kTokens)) << cluster.Logs();
  }
  // One process's greedy ids, for the greedy prompts.
  const std::string model = testing::ModelPath("stories260K-f32.gguf");
  for (size_t i = 0; i < kPrompts.size(); i += 2) {
    EXPECT_EQ(plain[i], testing::LocalGreedy(model, kPrompts[i], kTokens)) << kPrompts[i];
  }
  for (size_t i = 0; i < kRequests; ++i) {
    EXPECT_EQ(Generate(cluster, kPrompts[i % kPrompts.size()], sampling(i, true)), plain[i])
        << "alone, speculating: request " << i;
  }
  // All eight at once, speculating: the stages batch their steps.
  std::vector<std::unique_ptr<GenerationStream>> streams;
  for (size_t i = 0; i < kRequests; ++i) {
    streams.push_back(std::make_unique<GenerationStream>(cluster, sampling(i, true), kTokens,
                                                         kPrompts[i % kPrompts.size()]));
  }
  for (size_t i = 0; i < kRequests; ++i) {
    auto [ids, status] = streams[i]->Finish();
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(ids, plain[i]) << "at once, speculating: request " << i;
  }
  const std::vector<PrometheusSample> metrics = cluster.Metrics(0);
  const double drafted =
      FindSample(metrics, "ringlm_speculation_drafted_tokens_total", {}).value_or(0);
  const double accepted =
      FindSample(metrics, "ringlm_speculation_accepted_tokens_total", {}).value_or(0);
  std::printf("drafts accepted: %.0f of %.0f\n", accepted, drafted);
  EXPECT_GT(accepted, 0) << "no draft was accepted: nothing was tested";
  EXPECT_LT(accepted, drafted) << "no draft was rejected: nothing was tested";
}

INSTANTIATE_TEST_SUITE_P(Drafts, SpeculationClusterTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "DraftModel" : "Ngram";
                         });

}  // namespace
}  // namespace ringlm
