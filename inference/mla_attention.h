// DeepSeek's multi-head latent attention (MLA) up to the attention itself:
// the projections that give every head its query, key and value, with the
// numerics of llama.cpp c392e50's build_deepseek2 on its CPU backend.
#ifndef RINGLM_INFERENCE_MLA_ATTENTION_H_
#define RINGLM_INFERENCE_MLA_ATTENTION_H_

#include <cstdint>
#include <span>

#include "inference/model_config.h"
#include "inference/ops/thread_pool.h"
#include "inference/stage_weights.h"

namespace ringlm {

// For n normed inputs x [n x n_embd] at positions pos [n], the rows
//   q [n x n_head * head_dim], k [n x n_head * head_dim], v [n x n_head * head_dim_v]
// that llama.cpp's q_states, k_states and v_states hold, in this order:
//   - Q = attn_q x, or attn_q_b RMSNorm(attn_q_a x) (q LoRA);
//   - attn_kv_a_mqa x gives the latent [kv_lora_rank] and the shared RoPE
//     key [n_rot]; attn_kv_b RMSNorm(latent) gives every head's unrotated key
//     [head_dim - n_rot] and its value [head_dim_v];
//   - the last n_rot values of every query head and the shared RoPE key are
//     rotated (normal style, YaRN as config.rope_yarn, cos and sin times
//     config.rope_attn_factor);
//   - each head's key is its unrotated key followed by the rotated shared key.
// The cache then stores K and V as llama.cpp's does (decompressed, f16):
// exact, at n_head * (head_dim + head_dim_v) values per position and layer
// where the latent and RoPE key would be kv_lora_rank + n_rot.
// A token's rows do not depend on the other tokens (row-wise kernels).
// Precondition: config.is_mla(); `w` a layer of that model; outputs do not
// overlap x. Same pool rules as MatMul.
void MlaProject(const ModelConfig& config, const LayerWeights& w, const float* x, int64_t n,
                std::span<const uint32_t> pos, float* q, float* k, float* v, ThreadPool* pool);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_MLA_ATTENTION_H_
