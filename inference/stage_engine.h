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

// One session's part of a batched pass: its cache, its new positions, and
// where its result goes (as Forward's `output`).
struct StageBatchItem {
  KvCache* cache = nullptr;
  StageInput input;
  std::vector<float>* output = nullptr;
  // With LogitsMode::kLastPosition on the last stage: logits of this many
  // last new positions (a step that verifies drafts), 1 to the item's count.
  uint32_t logit_rows = 1;
};

enum class LogitsMode {
  // Logits of the last new position only: [n_vocab] (in a batch, of each
  // item's last logit_rows positions: [logit_rows x n_vocab]).
  kLastPosition,
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
  // Several sessions' new positions in one pass: every weight matrix is
  // read once for all their tokens stacked, and attention runs per session
  // over its own cache. Each item's output and cache come out bit-identical
  // to a Forward of that item alone, whatever else is in the batch (every
  // kernel's per-row arithmetic is independent of the other rows). The
  // caches must be distinct. Errors as Forward, for any item; then no cache
  // changes.
  absl::Status ForwardBatch(std::span<const StageBatchItem> items, LogitsMode mode) const;
  // What Forward would refuse `input` for, without running it: bad input,
  // or a full context.
  absl::Status Check(const KvCache& cache, const StageInput& input) const;

  const ModelConfig& config() const { return config_; }
  const StageWeights& weights() const { return weights_; }

 private:
  // Where each stacked token of a batch belongs.
  struct Layout {
    std::vector<KvCache*> caches;  // [items]
    std::vector<uint32_t> item;    // [tokens]: its item
    std::vector<uint32_t> pos;     // [tokens]: its absolute position
    uint32_t max_keys = 0;         // the most positions any token attends to
  };
  void Embed(std::span<const int32_t> tokens, float* x) const;
  void Attention(const Layout& layout, uint32_t layer, const float* q, float* out) const;

  const ModelConfig& config_;
  const StageWeights& weights_;
  ThreadPool* pool_;
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_STAGE_ENGINE_H_
