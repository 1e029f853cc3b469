// A streamed Generate call on its own thread, for tests that disturb a
// cluster mid-request: each token's arrival time, and the pauses.
#ifndef RINGLM_TESTS_GENERATION_STREAM_H_
#define RINGLM_TESTS_GENERATION_STREAM_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "tests/loopback_cluster.h"

namespace ringlm::testing {

struct Sampling {
  float temperature = 0;  // 0 = greedy
  uint64_t seed = 0;
  bool speculate = true;  // false: GenerateRequest.no_speculation
};

// Generates `tokens` tokens (past EOS) from `prompt` (a fixed story opening
// by default) through node 0 of `cluster`, which must outlive it, with
// `model` (a name node 0 serves; empty = its first). Finish()
// joins; call it before the destructor. Thread-safe.
class GenerationStream {
 public:
  using Clock = std::chrono::steady_clock;
  GenerationStream(const LoopbackCluster& cluster, Sampling sampling, int tokens,
                   std::string prompt = "", std::string model = "");
  ~GenerationStream();
  GenerationStream(const GenerationStream&) = delete;
  GenerationStream& operator=(const GenerationStream&) = delete;

  // Blocks until the request is in (the first event, the prompt echo) and
  // `tokens` tokens arrived, or the stream ended (60 s at most).
  void WaitFor(int tokens);
  // Waits for the end; the ids and the status of the call.
  std::pair<std::vector<int32_t>, absl::Status> Finish();
  // The longest wait for a token after `t`, counting from `t` (-1 when none
  // came): the pause a disturbance at `t` cost the reader.
  double PauseAfter(Clock::time_point t);
  // Seconds from the first token to the last.
  double DecodeSeconds();
  int tokens();

 private:
  void Run(const LoopbackCluster& cluster, Sampling sampling, int tokens, const std::string& prompt,
           const std::string& model);

  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int32_t> ids_ ABSL_GUARDED_BY(mu_);
  std::vector<Clock::time_point> arrivals_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: started once the rest exists
};

// The p-quantile (0..1) of `v`, nearest rank; -1 when empty.
double Percentile(std::vector<double> v, double p);

}  // namespace ringlm::testing

#endif  // RINGLM_TESTS_GENERATION_STREAM_H_
