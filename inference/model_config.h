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
  std::string architecture;  // "llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "gemma2",
                             // "gemma3", "phi3", "deepseek2"
  std::string name;          // general.name, may be empty
  uint32_t n_layer = 0;
  uint32_t n_embd = 0;
  uint32_t n_ff = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;    // attention.key_length, else n_embd / n_head
  uint32_t head_dim_v = 0;  // attention.value_length (deepseek2 only may differ), else head_dim
  uint32_t n_vocab = 0;
  uint32_t n_ctx_train = 0;  // {arch}.context_length
  uint32_t n_rot = 0;        // {arch}.rope.dimension_count
  float rope_freq_base = 10000.0f;
  float rope_freq_base_swa = 0.0f;  // gemma3's sliding layers (10000); 0: rope_freq_base
  float rms_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::kNormal;
  bool has_qkv_bias = false;  // qwen2, qwen2moe
  bool has_qk_norm = false;   // qwen3, qwen3moe: RMSNorm of each Q and K head before RoPE
  // Mixture of experts ({arch}.expert_count > 0): every layer's feed-forward
  // is n_expert experts of width n_ff_exp, n_expert_used of them per token,
  // chosen by a softmax router (llama.cpp's llm_build_moe_ffn), plus on
  // qwen2moe a shared expert of width n_ff_shexp behind a sigmoid gate.
  // llama and qwen3moe renormalise the chosen weights; qwen2moe does not.
  // DeepSeek (deepseek2): the first n_layer_dense_lead layers are dense
  // (width n_ff); the router's gating is a softmax (V2) or a sigmoid (V3),
  // an optional per-layer bias (exp_probs_b) is added to the probabilities
  // to choose the experts but not to weigh them, the weights are then
  // multiplied by expert_weights_scale, and n_expert_shared experts of
  // width n_ff_exp (one matrix set of width n_ff_shexp) always run, ungated.
  uint32_t n_expert = 0;              // {arch}.expert_count; 0 for a dense model
  uint32_t n_expert_used = 0;         // {arch}.expert_used_count
  uint32_t n_ff_exp = 0;              // an expert's width: n_ff on llama (Mixtral)
  uint32_t n_ff_shexp = 0;            // the shared expert's width; 0: none
  bool shared_expert_gated = false;   // qwen2moe: sigmoid(ffn_gate_inp_shexp . x) times it
  bool expert_weights_norm = false;   // the chosen weights are rescaled to sum 1
  uint32_t n_layer_dense_lead = 0;    // {arch}.leading_dense_block_count
  bool sigmoid_gating = false;        // {arch}.expert_gating_func 2; else softmax
  float expert_weights_scale = 1.0f;  // {arch}.expert_weights_scale (x1 is exact elsewhere)
  // DeepSeek's MLA (llama.cpp c392e50's build_deepseek2): Q from attn_q, or
  // when q_lora_rank > 0 from attn_q_b(RMSNorm(attn_q_a x)); K and V from a
  // latent of kv_lora_rank values (attn_kv_a_mqa's first rows, RMSNorm'd by
  // attn_kv_a_norm, through attn_kv_b) and one rotated key of n_rot values
  // (attn_kv_a_mqa's last rows) that every head shares. A head's key is
  // head_dim wide: head_dim - n_rot unrotated values, then n_rot rotated;
  // its value is head_dim_v wide. n_head_kv == n_head. YaRN (rope_yarn)
  // stretches the angles; llama.cpp pre-scales for it: rope_attn_factor is
  // 1 / (1 + 0.1 ln(1 / freq_scale)) and kq_scale is mscale^2 / sqrt(head_dim),
  // mscale = attn_factor * (1 + yarn_log_multiplier * ln(1 / freq_scale)).
  uint32_t kv_lora_rank = 0;  // {arch}.attention.kv_lora_rank; > 0: MLA
  uint32_t q_lora_rank = 0;   // {arch}.attention.q_lora_rank; 0: plain attn_q (V2-Lite)
  RopeYarn rope_yarn;         // rope.scaling.{type, factor, original_context_length}
  // Attention scaling: llama.cpp multiplies K.Q by kq_scale in the softmax;
  // Gemma 2 instead multiplies Q by q_scale after RoPE (then kq_scale is 1).
  float kq_scale = 1.0f;  // 1 / sqrt(head_dim) but on gemma2
  float q_scale = 1.0f;   // gemma2: 1 / sqrt(head_dim), or n_embd / n_head at 46 layers
  // Gemma 2 and 3: the embeddings are multiplied by embd_scale (sqrt(n_embd));
  // every block has post-attention and post-FFN norms and a GELU-gated
  // feed-forward; attention scores and logits are soft-capped
  // (cap * tanh(x / cap); 0: none); the layers il with (il + 1) % swa_period
  // != 0 attend only to the last n_swa positions (swa_period 0: none).
  // Gemma 3 adds QK-norm, has no soft-caps, and rotates its sliding layers
  // with rope_freq_base_swa.
  float embd_scale = 1.0f;
  bool has_post_norms = false;
  bool gelu_ffn = false;
  float attn_softcap = 0.0f;   // {arch}.attn_logit_softcapping
  float final_softcap = 0.0f;  // {arch}.final_logit_softcapping
  uint32_t n_swa = 0;          // {arch}.attention.sliding_window
  uint32_t swa_period = 0;     // gemma2: 2 (even layers slide); gemma3: 6 (5 slide, then 1)
  // Phi-3 (llama.cpp c392e50's build_phi3): Q, K and V come from one matrix
  // (attn_qkv, rows Q then K then V) and gate and up from one (ffn_up, gate
  // rows first); Q is scaled by q_scale after RoPE; every layer slides when
  // n_swa > 0 (Phi-4: 0). LongRoPE: each rotated pair's angle is divided by
  // a per-pair factor, from rope_factors_long when the context is above
  // n_ctx_orig and rope_factors_short otherwise (tensors a model may lack),
  // and cos and sin are multiplied by rope_attn_factor.
  bool fused_qkv = false;
  bool fused_gate_up = false;
  bool swa_every_layer = false;
  uint32_t n_ctx_orig = 0;        // {arch}.rope.scaling.original_context_length, else n_ctx_train
  float rope_attn_factor = 1.0f;  // {arch}.rope.scaling.attn_factor

  uint32_t n_embd_kv() const { return n_head_kv * head_dim; }   // a cache row of keys
  uint32_t n_embd_v() const { return n_head_kv * head_dim_v; }  // a cache row of values
  // What a KV cache holds per layer and position: a row of keys and one of
  // values, in f16.
  uint64_t kv_bytes_per_position() const {
    return (uint64_t{n_embd_kv()} + n_embd_v()) * sizeof(uint16_t);
  }
  bool is_moe() const { return n_expert > 0; }
  bool is_mla() const { return kv_lora_rank > 0; }
  // Whether layer il's feed-forward is the mixture of experts (else dense).
  bool IsMoeLayer(uint32_t il) const { return is_moe() && il >= n_layer_dense_lead; }
  // Whether layer il attends only to a window of n_swa positions.
  bool IsSlidingLayer(uint32_t il) const {
    if (swa_every_layer) return n_swa > 0;
    return swa_period != 0 && (il + 1) % swa_period != 0;
  }
  // Whether a context of `context_size` positions rotates with the long
  // LongRoPE factors (llama.cpp's build_rope_factors).
  bool UsesLongRopeFactors(uint32_t context_size) const { return context_size > n_ctx_orig; }
  // The RoPE base of layer il.
  float RopeBase(uint32_t il) const {
    return rope_freq_base_swa > 0 && IsSlidingLayer(il) ? rope_freq_base_swa : rope_freq_base;
  }

  // Reads and checks the hyperparameters. Unimplemented for an architecture
  // other than llama/qwen2/qwen2moe/qwen3/qwen3moe/gemma2/gemma3/phi3/deepseek2 (or
  // experts on the dense ones but llama, or values as wide as keys but on
  // deepseek2, or a RoPE scaling type it does not know); NotFound for a
  // missing key; InvalidArgument, naming the key, for values that contradict
  // each other (heads that do not divide n_embd, more experts used than
  // exist, a soft-cap or sliding window that is not positive, ...).
  static absl::StatusOr<ModelConfig> FromGguf(const GgufFile& file);
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_MODEL_CONFIG_H_
