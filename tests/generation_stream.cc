#include "tests/generation_stream.h"

#include <algorithm>

#include "cli/cluster_client.h"
#include "tests/grpc_test_clients.h"

namespace ringlm::testing {
namespace {
constexpr char kPrompt[] = "Once upon a time, there was a little girl named Lily. She";
}  // namespace

GenerationStream::GenerationStream(const LoopbackCluster& cluster, Sampling sampling, int tokens,
                                   std::string prompt, std::string model)
    : thread_(
          [this, &cluster, sampling, tokens, prompt = std::move(prompt), model = std::move(model)] {
            Run(cluster, sampling, tokens, prompt.empty() ? kPrompt : prompt, model);
          }) {}

GenerationStream::~GenerationStream() {
  if (thread_.joinable()) thread_.join();
}

void GenerationStream::WaitFor(int tokens) {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return done_ || (started_ && static_cast<int>(ids_.size()) >= tokens);
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(60));
}

std::pair<std::vector<int32_t>, absl::Status> GenerationStream::Finish() {
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  return {ids_, status_};
}

double GenerationStream::PauseAfter(Clock::time_point t) {
  absl::MutexLock lock(&mu_);
  double longest = -1;
  Clock::time_point previous = t;
  for (Clock::time_point at : arrivals_) {
    if (at <= t) continue;
    longest = std::max(longest, std::chrono::duration<double>(at - previous).count());
    previous = at;
  }
  return longest;
}

double GenerationStream::DecodeSeconds() {
  absl::MutexLock lock(&mu_);
  return arrivals_.size() < 2
             ? 0
             : std::chrono::duration<double>(arrivals_.back() - arrivals_.front()).count();
}

int GenerationStream::tokens() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(ids_.size());
}

void GenerationStream::Run(const LoopbackCluster& cluster, Sampling sampling, int tokens,
                           const std::string& prompt, const std::string& model) {
  v1::GenerateRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  request.set_prompt(prompt);
  request.mutable_limits()->set_max_tokens(tokens);
  request.mutable_limits()->set_ignore_eos(true);
  request.mutable_sampling()->set_temperature(sampling.temperature);
  request.mutable_sampling()->set_seed(sampling.seed);
  request.set_no_speculation(!sampling.speculate);
  ClusterClient client(cluster.Address(0), ClientSecurityFor(cluster), model);
  absl::Status s =
      client.Generate(request, std::chrono::seconds(120), [&](const v1::GenerateEvent& e) {
        absl::MutexLock lock(&mu_);
        started_ = true;
        if (!e.has_token()) return;
        ids_.push_back(e.token());
        arrivals_.push_back(Clock::now());
      });
  absl::MutexLock lock(&mu_);
  status_ = s;
  done_ = true;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

}  // namespace ringlm::testing
