// The forward pass of one pipeline stage: a contiguous block of layers.
#ifndef RINGLM_INFERENCE_STAGE_ENGINE_H_
#define RINGLM_INFERENCE_STAGE_ENGINE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "inference/kv_cache.h"
#include "inference/model_config.h"
#include "inference/ops/thread_pool.h"
#include "inference/stage_weights.h"

namespace ringlm {

// The new positions of one step: their token ids always (every stage records
// them beside its KV), and on every stage but the first, the hidden states
// the previous stage produced for them.
struct StageInput {
  std::span<const int32_t> tokens;  // [n]
  std::span<const float> hidden;    // [n x n_embd]; empty on the first stage
};

enum class LogitsMode {
  kLastPosition,  // logits of the last new position only: [n_vocab]
  kAllPositions,  // logits of every new position: [n x n_vocab]
};

// Runs layers [first, last) of the model over new positions appended to a
// session's KV cache. The first stage embeds token ids; every other stage
// takes hidden states. A middle stage outputs hidden states [n x n_embd]; the
// last stage applies the final norm and output head and outputs logits.
//
// Holds references to the config, weights and pool, which must outlive it.
// Forward may be called from several threads on different caches; kernels
// share the pool, which serializes them.
class StageEngine {
 public:
  StageEngine(const ModelConfig& config, const StageWeights& weights, ThreadPool* pool);

  // A fresh, empty cache for this stage's layers.
  KvCache NewCache(uint32_t context_size) const;

  // Appends input.tokens to `cache`, running this stage's layers on them, and
  // fills `output`. InvalidArgument for bad input (shape, empty, token ids
  // outside the vocabulary); ResourceExhausted when the context is full. On
  // error the cache is unchanged.
  absl::Status Forward(KvCache& cache, const StageInput& input, LogitsMode mode,
                       std::vector<float>* output) const;

  const ModelConfig& config() const { return config_; }
  const StageWeights& weights() const { return weights_; }

 private:
  absl::Status CheckInput(const KvCache& cache, const StageInput& input) const;
  void Embed(std::span<const int32_t> tokens, float* x) const;
  void Attention(const KvCache& cache, uint32_t layer, uint32_t n_past, int64_t n, const float* q,
                 float* out) const;

  const ModelConfig& config_;
  const StageWeights& weights_;
  ThreadPool* pool_;
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_STAGE_ENGINE_H_
