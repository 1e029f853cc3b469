// Test-only: a scripted GenerationBackend. Each request runs on a thread of its
// own and emits the tokens its script gives, one every `delay`; scripts can
// fail Submit, end with an error event, report cached_tokens, and the fake
// records every submitted request, every cancel of a running request and
// every Ready() call. Its model id and topology are settable, so that two
// fakes can stand for two models. Thread-safe; outlives the server that uses
// it.
#ifndef RINGLM_API_FAKE_BACKEND_FOR_TEST_H_
#define RINGLM_API_FAKE_BACKEND_FOR_TEST_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "api/generation_backend.h"

namespace ringlm::testing {

struct FakeScript {
  std::vector<int32_t> tokens = {};  // emitted in order, at most max_tokens of them
  absl::Status submit_error = {};    // returned by Submit when not OK
  absl::Status error = {};           // when not OK: an error event after the tokens
  // cached_tokens of the first event; -1 = echo request.reuse.reuse_len.
  int64_t cached_tokens = -1;
  absl::Duration delay = absl::ZeroDuration();  // before each event
  // With token i when the request asks for logprobs (and i < size).
  std::vector<TokenLogprobs> logprobs = {};
};

class FakeBackend : public GenerationBackend {
 public:
  FakeBackend(const Tokenizer& tokenizer, uint32_t context_size = 512,
              std::string model_id = "stories260K")
      : tokenizer_(tokenizer), context_size_(context_size), model_id_(std::move(model_id)) {}
  ~FakeBackend() override {
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

  // Decides each request's script; the default emits nothing and stops.
  void SetScript(std::function<FakeScript(const GenerationRequest&)> script) {
    absl::MutexLock lock(&mu_);
    script_ = std::move(script);
  }
  void SetReady(absl::Status ready) {
    absl::MutexLock lock(&mu_);
    ready_ = std::move(ready);
  }
  // The GGUF chat template the server picks its format from (default "": plain).
  void SetChatTemplate(std::string jinja) {
    absl::MutexLock lock(&mu_);
    chat_template_ = std::move(jinja);
  }
  // What TopologyJson() returns (default {"nodes":[{"id":"n1"}]}).
  void SetTopologyJson(std::string json) {
    absl::MutexLock lock(&mu_);
    topology_json_ = std::move(json);
  }
  // How often readiness was asked: Ready(), or Submit, which checks it first.
  int ready_calls() const { return ready_calls_.load(); }

  std::vector<GenerationRequest> submitted() const {
    absl::MutexLock lock(&mu_);
    return submitted_;
  }
  // Cancels that arrived while the request was still emitting.
  int cancels() const { return cancels_.load(); }
  std::vector<std::string> dropped_sessions() const {
    absl::MutexLock lock(&mu_);
    return dropped_;
  }

  absl::StatusOr<std::unique_ptr<GenerationHandle>> Submit(
      GenerationRequest request, std::function<void(const GenerationEvent&)> on_event) override {
    ready_calls_++;
    absl::MutexLock lock(&mu_);
    if (!ready_.ok()) return ready_;  // as ClusterBackend: a cluster that does not serve
    submitted_.push_back(request);
    FakeScript script = script_ ? script_(request) : FakeScript{};
    if (!script.submit_error.ok()) return script.submit_error;
    auto run = std::make_shared<Run>();
    run->backend = this;
    threads_.emplace_back([run, request = std::move(request), script = std::move(script),
                           on_event = std::move(on_event)] {
      const uint32_t cached = script.cached_tokens >= 0
                                  ? static_cast<uint32_t>(script.cached_tokens)
                                  : request.reuse.reuse_len;
      size_t n = std::min<size_t>(script.tokens.size(), request.max_tokens);
      for (size_t i = 0; i < n; ++i) {
        absl::SleepFor(script.delay);
        if (run->cancelled) return;
        GenerationEvent event;
        event.has_token = true;
        event.token = script.tokens[i];
        event.cached_tokens = i == 0 ? cached : 0;
        if (request.logprobs && i < script.logprobs.size()) event.logprobs = script.logprobs[i];
        if (i + 1 == n && script.error.ok()) {
          event.finish = n == static_cast<size_t>(request.max_tokens) ? FinishReason::kLength
                                                                      : FinishReason::kStop;
        }
        if (event.finish != FinishReason::kNone) run->done = true;
        on_event(event);
      }
      if (n > 0 && script.error.ok()) return;
      absl::SleepFor(script.delay);
      if (run->cancelled) return;
      run->done = true;
      GenerationEvent last;
      last.cached_tokens = n == 0 ? cached : 0;
      last.finish = script.error.ok() ? FinishReason::kStop : FinishReason::kError;
      last.error = script.error;
      on_event(last);
    });
    return std::unique_ptr<GenerationHandle>(new Handle(run));
  }

  absl::Status Ready() const override {
    ready_calls_++;
    absl::MutexLock lock(&mu_);
    return ready_;
  }
  void DropSession(const std::string& session_id) override {
    absl::MutexLock lock(&mu_);
    dropped_.push_back(session_id);
  }
  const Tokenizer& tokenizer() const override { return tokenizer_; }
  std::string model_id() const override { return model_id_; }
  std::string chat_template() const override {
    absl::MutexLock lock(&mu_);
    return chat_template_;
  }
  uint32_t context_size() const override { return context_size_; }
  std::string TopologyJson() const override {
    absl::MutexLock lock(&mu_);
    return topology_json_;
  }

 private:
  struct Run {
    FakeBackend* backend = nullptr;
    std::atomic<bool> cancelled{false};
    std::atomic<bool> done{false};
  };
  class Handle : public GenerationHandle {
   public:
    explicit Handle(std::shared_ptr<Run> run) : run_(std::move(run)) {}
    ~Handle() override { Cancel(); }
    void Cancel() override {
      if (!run_->done && !run_->cancelled.exchange(true)) run_->backend->cancels_++;
    }

   private:
    std::shared_ptr<Run> run_;
  };

  const Tokenizer& tokenizer_;
  const uint32_t context_size_;
  const std::string model_id_;
  mutable absl::Mutex mu_;
  std::function<FakeScript(const GenerationRequest&)> script_ ABSL_GUARDED_BY(mu_);
  absl::Status ready_ ABSL_GUARDED_BY(mu_);
  std::string chat_template_ ABSL_GUARDED_BY(mu_);
  std::string topology_json_ ABSL_GUARDED_BY(mu_) = R"({"nodes":[{"id":"n1"}]})";
  mutable std::atomic<int> ready_calls_{0};
  std::vector<GenerationRequest> submitted_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> dropped_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> cancels_{0};
};

}  // namespace ringlm::testing

#endif  // RINGLM_API_FAKE_BACKEND_FOR_TEST_H_
