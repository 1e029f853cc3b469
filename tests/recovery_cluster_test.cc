// No request lost: real ringlmd processes on loopback, a 300-token
// generation each trial, and a stage killed, stopped (hung) or a node
// joining at a random moment (before the first token, early or late in the
// reply). Every stream must complete with exactly the ids of an undisturbed
// run, greedy and seeded. Prints the pause each disturbance cost (from the
// disturbance to the next token), median and p95.
//
// RINGLM_RECOVERY_TRIALS sets the trials per scenario (default 5; the
// closing figures use 20).
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
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

int Trials() {
  const char* env = std::getenv("RINGLM_RECOVERY_TRIALS");
  const int n = env == nullptr ? 5 : std::atoi(env);
  return std::clamp(n, 1, 1000);
}

enum class Disturbance { kKill, kStop, kJoin };

// Three stages (nodes 0, 1, 2 with 4000/2000/2000 MB: layers 3, 1, 1) and,
// for joins, a fourth node that is started mid-request. `tokens` per
// generation.
void RunTrials(Disturbance what, Sampling sampling, int tokens = 300) {
  LoopbackCluster::Options options;
  options.memory_mb = {4000, 2000, 2000};
  if (what == Disturbance::kJoin) options.memory_mb.push_back(2000);
  // Fast failure detection on loopback: health calls every 500 ms.
  options.extra_args = {"--announce-interval-ms", "500", "--ctx-size", "4096"};
  LoopbackCluster cluster(options);
  auto formed3 = [&] {
    for (size_t i = 0; i < 3; ++i) {
      if (!cluster.Formed(i, 3)) return false;
    }
    return true;
  };
  if (what == Disturbance::kJoin) cluster.KillNode(3);
  ASSERT_TRUE(testing::WaitFor(formed3, 30s)) << cluster.Logs();

  GenerationStream undisturbed(cluster, sampling, tokens);
  auto [reference, reference_status] = undisturbed.Finish();
  ASSERT_TRUE(reference_status.ok()) << reference_status << cluster.Logs();
  ASSERT_EQ(reference.size(), static_cast<size_t>(tokens));
  std::printf("undisturbed: %d tokens in %.2f s after the first\n", tokens,
              undisturbed.DecodeSeconds());
  // Speculation (on by default) gives the reply of plain steps.
  Sampling plain_sampling = sampling;
  plain_sampling.speculate = false;
  GenerationStream plain(cluster, plain_sampling, tokens);
  auto [plain_ids, plain_status] = plain.Finish();
  ASSERT_TRUE(plain_status.ok()) << plain_status << cluster.Logs();
  ASSERT_EQ(plain_ids, reference) << "speculation changed the reply";

  std::mt19937 rng(20261201);
  std::vector<double> pauses;
  int changed_mid_request = 0;
  const char* phases[] = {"before the first token", "early", "late"};
  for (int trial = 0; trial < Trials(); ++trial) {
    const int phase = trial % 3;
    // Late: in the last third, short of the end.
    const int late = tokens * 2 / 3;
    const int at = phase == 0   ? 0
                   : phase == 1 ? 1 + static_cast<int>(rng() % 30)
                                : late + static_cast<int>(rng() % (tokens - late - 10));
    const size_t victim = what == Disturbance::kJoin ? 3 : 1 + rng() % 2;
    SCOPED_TRACE(
        absl::StrCat("trial ", trial, ": node ", victim, " ", phases[phase], " (token ", at, ")"));
    GenerationStream stream(cluster, sampling, tokens);
    stream.WaitFor(at);
    const int seen = stream.tokens();
    const Clock::time_point disturbed = Clock::now();
    switch (what) {
      case Disturbance::kKill:
        cluster.KillNode(victim);
        break;
      case Disturbance::kStop:
        cluster.node(victim).Signal(SIGSTOP);
        break;
      case Disturbance::kJoin:
        cluster.StartNode(victim);
        // Did the partition change while the request ran? Only then does
        // the trial test anything.
        testing::WaitFor([&] { return stream.tokens() >= tokens || cluster.Formed(0, 4); }, 30s);
        if (stream.tokens() < tokens) ++changed_mid_request;
        break;
    }
    auto [ids, status] = stream.Finish();
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(ids, reference) << "disturbed after " << seen << " tokens";
    if (seen < tokens) {
      const double pause = stream.PauseAfter(disturbed);
      pauses.push_back(pause);
      std::printf("trial %d: %s node %zu after %d tokens: next token %.3f s later\n", trial,
                  what == Disturbance::kKill   ? "killed"
                  : what == Disturbance::kStop ? "stopped"
                                               : "joined",
                  victim, seen, pause);
    }
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << cluster.Logs();
      return;
    }
    // Back to three stages for the next trial.
    switch (what) {
      case Disturbance::kKill:
        cluster.StartNode(victim);
        break;
      case Disturbance::kStop:
        cluster.node(victim).Signal(SIGCONT);
        break;
      case Disturbance::kJoin:
        cluster.KillNode(victim);
        break;
    }
    ASSERT_TRUE(testing::WaitFor(formed3, 60s)) << cluster.Logs();
  }
  // The trials speculated: drafts were checked and some accepted.
  const std::vector<PrometheusSample> metrics = cluster.Metrics(0);
  const double accepted =
      FindSample(metrics, "ringlm_speculation_accepted_tokens_total", {}).value_or(0);
  std::printf("drafts accepted: %.0f of %.0f\n", accepted,
              FindSample(metrics, "ringlm_speculation_drafted_tokens_total", {}).value_or(0));
  EXPECT_GT(accepted, 0) << "no draft was accepted: the trials did not test speculation";
  std::printf(
      "pause after the disturbance over %zu trials: median %.3f s, p95 %.3f s, max %.3f s\n",
      pauses.size(), testing::Percentile(pauses, 0.5), testing::Percentile(pauses, 0.95),
      testing::Percentile(pauses, 1.0));
  if (what == Disturbance::kJoin) {
    std::printf("the 4-node plan came while the request ran in %d of %d trials\n",
                changed_mid_request, Trials());
    EXPECT_GT(changed_mid_request, 0) << "no trial changed the partition mid-request";
  }
}

TEST(RecoveryClusterTest, KilledStagesCostAPauseNotTheReply) { RunTrials(Disturbance::kKill, {}); }

TEST(RecoveryClusterTest, HungStagesCostAPauseNotTheReply) { RunTrials(Disturbance::kStop, {}); }

// Longer replies: a joining node changes the partition 2-3 s after it
// starts, and the request must still be running then.
TEST(RecoveryClusterTest, ANodeJoiningMidRequestCostsNothingButAPause) {
  RunTrials(Disturbance::kJoin, {}, 1500);
}

TEST(RecoveryClusterTest, SeededSamplingContinuesExactlyAfterAKill) {
  RunTrials(Disturbance::kKill, {.temperature = 0.8f, .seed = 1234});
}

}  // namespace
}  // namespace ringlm
