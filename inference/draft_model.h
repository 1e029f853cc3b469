// A small model that guesses the target model's next tokens for speculative
// decoding (docs/speculation.md): the last stage runs it after each token it
// samples, and the next step checks its guesses in one trip of the ring.
#ifndef RINGLM_INFERENCE_DRAFT_MODEL_H_
#define RINGLM_INFERENCE_DRAFT_MODEL_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inference/kv_cache.h"
#include "inference/model.h"
#include "inference/ops/thread_pool.h"
#include "inference/stage_engine.h"

namespace ringlm {

// OK when `draft` spells every token id as `target` does (the same count,
// the same pieces): its guesses are then the target's ids. Otherwise
// InvalidArgument naming the first difference.
absl::Status CheckSameVocabulary(const Tokenizer& target, const Tokenizer& draft);

// A whole model, loaded once, that drafts greedily: Draft(key, history, k)
// brings the cache it keeps for `key` to `history` (reusing the longest
// common prefix it holds, so a continuing request computes only what is
// new) and runs k greedy steps from there. Keeps at most `max_sessions`
// caches; past that the least recently used goes (its key then starts
// over, costing time, never a different guess: drafts depend only on the
// history). Not thread-safe: one thread (the stage worker) uses it. The pool
// must outlive it; its kernels follow the target's numerics, but a draft
// never needs to be exact, only cheap.
class DraftModel {
 public:
  // Loads `path` with every layer, for contexts of `context_size`
  // positions, and checks that its vocabulary is `target`'s.
  static absl::StatusOr<std::unique_ptr<DraftModel>> Load(const std::string& path,
                                                          const Tokenizer& target,
                                                          uint32_t context_size, ThreadPool* pool,
                                                          size_t max_sessions = 8);

  // Up to `k` greedy guesses of what follows `history`; fewer when the
  // context is full. An error only for input the model refuses (a token id
  // outside its vocabulary, which CheckSameVocabulary rules out).
  absl::StatusOr<std::vector<int32_t>> Draft(const std::string& key,
                                             std::span<const int32_t> history, uint32_t k);
  // Drops the cache kept for `key`, if any.
  void Forget(const std::string& key) { sessions_.erase(key); }
  size_t sessions() const { return sessions_.size(); }
  const Model& model() const { return *model_; }

 private:
  DraftModel(std::unique_ptr<Model> model, uint32_t context_size, ThreadPool* pool,
             size_t max_sessions);
  struct Session {
    KvCache cache;
    std::chrono::steady_clock::time_point last_used;
  };
  Session& SessionFor(const std::string& key);

  std::unique_ptr<Model> model_;
  StageEngine engine_;
  const uint32_t context_size_;
  const size_t max_sessions_;
  std::map<std::string, Session> sessions_;
  std::vector<float> logits_;  // [n_vocab] of the last position
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_DRAFT_MODEL_H_
