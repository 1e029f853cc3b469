// A GGUF model opened for one stage: file, config, tokenizer and the weights
// of a layer range.
#ifndef RINGLM_INFERENCE_MODEL_H_
#define RINGLM_INFERENCE_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "gguf/gguf_file.h"
#include "inference/model_config.h"
#include "inference/packed_weights.h"
#include "inference/stage_weights.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {

struct ModelOptions {
  // Layers to hold; nullopt = all of them (a single-node run), an empty
  // range = none (a node that only tokenizes, or picks its range later with
  // LoadStage).
  std::optional<LayerRange> layers;
  // Context size in positions; 0 = the model's context_length. Larger than
  // context_length is allowed, with a warning from the caller (see
  // `context_above_training`).
  uint32_t context_size = 0;
};

// Owns the mapped GGUF file and everything derived from it. Immutable after
// Load; thread-safe for concurrent readers.
class Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path,
                                                     const ModelOptions& options);

  // Packs `weights` for the kernels (StageWeights::Pack) through this
  // model's one store, dropping from memory the file's pages of each tensor
  // once it is read from a copy. Call before the weights are shared.
  absl::Status Pack(StageWeights& weights, const LoadProgress& progress = nullptr) const;
  // Reads every page `weights` still reads from the file so the first
  // request does not pay for page faults. Reports progress when `progress`
  // is set.
  void PageIn(const StageWeights& weights, const LoadProgress& progress = nullptr) const;
  // Pack and PageIn of this model's own weights, with one progress over
  // both. Precondition: has_weights(), and they are not shared yet.
  absl::Status LoadIntoMemory(const LoadProgress& progress = nullptr);
  // Drops from memory the pages of tensors `old` uses and `keep` does not,
  // so a node holds about its own share of the weights after a re-partition.
  void Release(const StageWeights& old, const StageWeights* keep) const;

  const std::string& path() const { return path_; }
  const GgufFile& file() const { return *file_; }
  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // Precondition: has_weights().
  const StageWeights& weights() const { return *weights_; }
  bool has_weights() const { return weights_.has_value(); }
  // Weights of another layer range of the same file (views, cheap). The
  // Model must outlive them.
  absl::StatusOr<StageWeights> LoadStage(LayerRange range) const {
    return StageWeights::Load(*file_, config_, range);
  }
  uint32_t context_size() const { return context_size_; }
  bool context_above_training() const { return context_size_ > config_.n_ctx_train; }
  // Identifies the model for peers: a hash of its metadata and tensor table
  // (not of the data, which would take a full read).
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  Model() = default;

  std::string path_;
  std::unique_ptr<GgufFile> file_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<StageWeights> weights_;
  std::unique_ptr<PackedWeights> packed_ = std::make_unique<PackedWeights>();
  uint32_t context_size_ = 0;
  std::string fingerprint_;
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_MODEL_H_
