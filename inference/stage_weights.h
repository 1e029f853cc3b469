// The weights of one contiguous layer range of a model, as views into the
// memory-mapped GGUF file.
#ifndef RINGLM_INFERENCE_STAGE_WEIGHTS_H_
#define RINGLM_INFERENCE_STAGE_WEIGHTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "gguf/gguf_file.h"
#include "gguf/tensor_type.h"
#include "inference/model_config.h"
#include "inference/ops/weight_layout.h"

namespace ringlm {

// A 2-D weight: `rows` output features of `cols` input values each, rows
// contiguous (GGUF's ne0 = cols) as in the file, or in another layout once
// packed (StageWeights::Pack).
struct WeightMatrix {
  TensorType type = TensorType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  WeightLayout layout = WeightLayout::kGguf;

  // Rows [first, first + count) as a matrix of their own: a fused tensor's
  // parts (Phi-3's attn_qkv, ffn_up). Each output row is computed alone, so
  // a part gives what a separate tensor of those rows would.
  // Precondition: 0 <= first, first + count <= rows; for kQ4_0x8 both
  // multiples of 8.
  WeightMatrix Rows(int64_t first, int64_t count) const;
};

// A 3-D expert weight: n_expert matrices of `rows` x `cols`, stored one
// after another (GGUF dims [cols, rows, n_expert]), so expert e's matrix is a
// contiguous block of rows (in `layout`, each expert's its own).
struct ExpertMatrices {
  TensorType type = TensorType::kF32;
  int64_t n_expert = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  WeightLayout layout = WeightLayout::kGguf;

  // Expert e's matrix. Precondition: 0 <= e < n_expert.
  WeightMatrix Expert(int64_t e) const;
};

// The mixture-of-experts feed-forward of a block (ModelConfig::IsMoeLayer).
// The shared expert is there when ModelConfig::n_ff_shexp > 0 (qwen2moe,
// deepseek2), its gate vector when shared_expert_gated (qwen2moe).
struct MoeWeights {
  WeightMatrix router;                     // ffn_gate_inp: [n_embd -> n_expert]
  const float* probs_bias = nullptr;       // exp_probs_b: f32 [n_expert]; DeepSeek V3 only
  ExpertMatrices gate;                     // ffn_gate_exps: n_expert x [n_embd -> n_ff_exp]
  ExpertMatrices up;                       // ffn_up_exps: n_expert x [n_embd -> n_ff_exp]
  ExpertMatrices down;                     // ffn_down_exps: n_expert x [n_ff_exp -> n_embd]
  const float* shared_gate_inp = nullptr;  // ffn_gate_inp_shexp: f32 [n_embd]
  WeightMatrix shared_gate;                // ffn_gate_shexp: [n_embd -> n_ff_shexp]
  WeightMatrix shared_up;                  // ffn_up_shexp: [n_embd -> n_ff_shexp]
  WeightMatrix shared_down;                // ffn_down_shexp: [n_ff_shexp -> n_embd]
};

// One transformer block. Norm weights and biases are f32 vectors.
struct LayerWeights {
  const float* attn_norm = nullptr;  // [n_embd]
  WeightMatrix wq;                   // [n_embd -> n_head * head_dim]; Phi-3: attn_qkv's rows
  WeightMatrix wk;                   // [n_embd -> n_head_kv * head_dim]
  WeightMatrix wv;                   // [n_embd -> n_head_kv * head_dim]
  const float* bq = nullptr;         // qwen2 only, [n_head * head_dim]
  const float* bk = nullptr;         // qwen2 only, [n_head_kv * head_dim]
  const float* bv = nullptr;         // qwen2 only, [n_head_kv * head_dim]
  const float* q_norm = nullptr;     // qwen3 only, [head_dim]: per-head RMSNorm of Q
  const float* k_norm = nullptr;     // qwen3 only, [head_dim]: per-head RMSNorm of K
  // DeepSeek's MLA (ModelConfig::is_mla()) instead of wk and wv, and wq
  // only without q LoRA:
  WeightMatrix wq_a;                 // attn_q_a: [n_embd -> q_lora_rank]
  const float* q_a_norm = nullptr;   // attn_q_a_norm: [q_lora_rank]
  WeightMatrix wq_b;                 // attn_q_b: [q_lora_rank -> n_head * head_dim]
  WeightMatrix wkv_a;                // attn_kv_a_mqa: [n_embd -> kv_lora_rank + n_rot]
  const float* kv_a_norm = nullptr;  // attn_kv_a_norm: [kv_lora_rank]
  WeightMatrix wkv_b;  // attn_kv_b: [kv_lora_rank -> n_head * (head_dim - n_rot + head_dim_v)]
  WeightMatrix wo;     // [n_head * head_dim_v -> n_embd]
  const float* ffn_norm = nullptr;  // [n_embd]
  WeightMatrix gate;  // [n_embd -> n_ff]; dense layers only; Phi-3: ffn_up's first half
  WeightMatrix up;    // [n_embd -> n_ff]; dense layers only; Phi-3: ffn_up's second half
  WeightMatrix down;  // [n_ff -> n_embd]; dense layers only
  MoeWeights moe;     // MoE layers only
  // Gemma 2 only, [n_embd]: the norms of the attention and feed-forward
  // outputs, before each joins the residual.
  const float* attn_post_norm = nullptr;  // post_attention_norm
  const float* ffn_post_norm = nullptr;   // post_ffw_norm
};

// Half-open layer range [first, last) of a model with n_layer layers.
struct LayerRange {
  uint32_t first = 0;
  uint32_t last = 0;
  uint32_t size() const { return last - first; }
};

class PackedWeights;

// Called while weights are packed or paged in: bytes done and bytes in all.
using LoadProgress = std::function<void(uint64_t done, uint64_t total)>;

// Weights of the layers [range.first, range.last), plus the token embedding
// when the range starts at layer 0 and the output norm and head when it ends
// at the last layer. Views into the mapped file after Load; Pack then points
// matrices at copies in the kernels' fastest layout. Immutable after that
// and shared by all sessions; the GgufFile it was loaded from must outlive
// it. Thread-safe (read-only) once it is shared.
class StageWeights {
 public:
  // Checks that every needed tensor exists with the shape the config implies
  // and a type the kernels support, then views it. Touches no tensor data.
  static absl::StatusOr<StageWeights> Load(const GgufFile& file, const ModelConfig& config,
                                           LayerRange range);

  LayerRange range() const { return range_; }
  bool is_first() const { return range_.first == 0; }
  bool is_last() const { return is_last_; }
  const LayerWeights& layer(uint32_t absolute_layer) const {
    return layers_[absolute_layer - range_.first];
  }
  const WeightMatrix& token_embd() const { return token_embd_; }  // first stage only
  // LongRoPE's per-pair factors for a context of `context_size` positions
  // (ModelConfig::UsesLongRopeFactors), n_rot / 2 floats; null when the model
  // has none.
  const float* rope_factors(const ModelConfig& config, uint32_t context_size) const {
    return config.UsesLongRopeFactors(context_size) ? rope_long_ : rope_short_;
  }
  const float* output_norm() const { return output_norm_; }  // last stage only
  const WeightMatrix& output() const { return output_; }     // last stage only
  bool tied_output() const { return tied_output_; }
  // Bytes of tensor data this stage reads (its share of the file).
  uint64_t bytes() const { return bytes_; }
  // The tensors this stage reads, from the file or from packed copies.
  const std::vector<const GgufTensorInfo*>& tensors() const { return tensors_; }

  // Points every matrix the kernels read faster in another layout
  // (FastestLayout: Q4_0 of a multiple of 8 rows, on x86) at a copy in that
  // layout from `store` (made now, or shared with another stage of the
  // model), reading those tensors' bytes from the file. Touches nothing
  // else, and then (if it copied any) the f32 vectors too. The token
  // embedding, which is also read row by row, stays; so does a head tied to
  // it. Call before the weights are shared. `progress` gets
  // bytes packed of the bytes to pack; `copied_whole` each tensor as soon as
  // all its bytes are copied, for the caller to hand its pages back.
  absl::Status Pack(PackedWeights& store, const LoadProgress& progress = nullptr,
                    const std::function<void(const GgufTensorInfo&)>& copied_whole = nullptr);
  // The tensors still read through the file's mapping (all of tensors()
  // until Pack), for paging in.
  const std::vector<const GgufTensorInfo*>& mapped_tensors() const { return mapped_tensors_; }

 private:
  // A matrix Pack copies (experts: all of a tensor's as one matrix).
  struct PackItem {
    WeightMatrix* matrix = nullptr;
    ExpertMatrices* experts = nullptr;
    WeightMatrix whole;
    WeightLayout layout = WeightLayout::kGguf;  // the one to pack it in
  };
  std::vector<PackItem> PackableMatrices();
  // Copies the f32 vectors, counting their tensors in `copied`.
  void CopyVectors(absl::flat_hash_map<const GgufTensorInfo*, uint64_t>& copied,
                   const std::function<void(const GgufTensorInfo&)>& copied_whole);

  LayerRange range_;
  bool is_last_ = false;
  bool tied_output_ = false;
  std::vector<LayerWeights> layers_;
  WeightMatrix token_embd_;
  const float* output_norm_ = nullptr;
  WeightMatrix output_;
  const float* rope_long_ = nullptr;   // rope_factors_long (Phi-3)
  const float* rope_short_ = nullptr;  // rope_factors_short (Phi-3)
  uint64_t bytes_ = 0;
  std::vector<const GgufTensorInfo*> tensors_;
  std::vector<const GgufTensorInfo*> mapped_tensors_;
  std::vector<std::shared_ptr<const void>> packed_;  // the copies Pack points at
};

// Bytes of weights per layer and at either end, for planning a partition
// without loading anything.
struct WeightFootprint {
  std::vector<uint64_t> layer_bytes;  // each block's tensors, n_layer of them
  uint64_t max_layer_bytes = 0;       // the largest block
  uint64_t embedding_bytes = 0;       // token_embd
  uint64_t head_bytes = 0;            // output_norm + output (token_embd again when tied)
  uint64_t total_bytes = 0;           // every tensor in the file
};
absl::StatusOr<WeightFootprint> ComputeFootprint(const GgufFile& file, const ModelConfig& config);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_STAGE_WEIGHTS_H_
