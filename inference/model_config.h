// Hyperparameters of a transformer model, read from GGUF metadata.
#ifndef RINGLM_INFERENCE_MODEL_CONFIG_H_
#define RINGLM_INFERENCE_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "gguf/gguf_file.h"
#include "inference/ops/norm_rope.h"

namespace ringlm {

// Everything the forward pass needs to know about the model's shape. Plain
// data; `FromGguf` is the only place that interprets architecture keys.
struct ModelConfig {
  std::string architecture;  // "llama" or "qwen2"
  std::string name;          // general.name, may be empty
  uint32_t n_layer = 0;
  uint32_t n_embd = 0;
  uint32_t n_ff = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;  // n_embd / n_head
  uint32_t n_vocab = 0;
  uint32_t n_ctx_train = 0;  // {arch}.context_length
  uint32_t n_rot = 0;        // {arch}.rope.dimension_count
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::kNormal;
  bool has_qkv_bias = false;  // qwen2

  uint32_t n_embd_kv() const { return n_head_kv * head_dim; }

  // Reads and checks the hyperparameters. Unimplemented for an architecture
  // other than llama/qwen2; NotFound for a missing key; InvalidArgument for
  // values that contradict each other (e.g. heads that do not divide n_embd).
  static absl::StatusOr<ModelConfig> FromGguf(const GgufFile& file);
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_MODEL_CONFIG_H_
