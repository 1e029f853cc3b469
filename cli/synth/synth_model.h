// Synthetic llama-architecture (and qwen2moe, qwen3, qwen3moe, gemma2, gemma3, phi3, deepseek2)
// GGUF models: real shapes, real metadata and a SentencePiece-style vocabulary (or a real one,
// converted from a Hugging Face tokenizer by hf_tokenizer.h), with random weights. For benchmarks
// and tests when the real weights are not at hand (or too large to ship).
//
// A synthetic file is a well-formed GGUF v3 that other readers (llama.cpp)
// accept: standard general.* / llama.* / tokenizer.ggml.* keys, alignment 32,
// tensors named and shaped as llama.cpp expects, and, for a quantized type,
// the per-tensor type mix llama-quantize would choose (see PlanSynthModel).
// The weights are meaningless, so the text a synthetic model writes is noise;
// only its speed and its shapes mean anything.
#ifndef RINGLM_CLI_SYNTH_SYNTH_MODEL_H_
#define RINGLM_CLI_SYNTH_SYNTH_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gguf/tensor_type.h"
#include "inference/tokenizer/hf_tokenizer.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {

// The hyperparameters of a llama-architecture model.
struct SynthPreset {
  std::string name;  // "tiny", "tinyllama-1.1b", ...
  uint32_t n_embd = 256;
  uint32_t n_layer = 4;
  uint32_t n_head = 8;
  uint32_t n_head_kv = 4;
  uint32_t n_ff = 768;
  uint32_t n_vocab = 2048;
  uint32_t n_ctx = 512;  // written as llama.context_length
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_output = false;  // no output.weight: the head reuses token_embd
  // Mixtral-style experts when n_expert > 0: every layer's feed-forward is
  // n_expert SwiGLU experts of width n_ff (3-D ffn_{gate,up,down}_exps and an
  // f32 router ffn_gate_inp), n_expert_used of them per token.
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  // The standard deviation of every matrix's random values. Larger values
  // make greedy decoding wander instead of repeating one token.
  float weight_stddev = 0.02f;
  // "llama", or "qwen2moe": Q/K/V biases, NeoX RoPE, experts of width n_ff
  // whose weights are not renormalised, and a shared expert of width
  // n_ff_shexp behind a sigmoid gate (ffn_{gate_inp,gate,up,down}_shexp).
  std::string architecture = "llama";
  uint32_t n_ff_shexp = 0;
  // "qwen3" / "qwen3moe": NeoX RoPE, no biases, a per-head RMSNorm of Q and
  // K (attn_q_norm, attn_k_norm); qwen3moe's experts renormalise their
  // weights and have no shared one. head_dim (attention.key_length) may
  // differ from n_embd / n_head; 0 means n_embd / n_head.
  uint32_t head_dim = 0;
  // "gemma2": NeoX RoPE, a tied head, post-attention and post-FFN norms,
  // a GELU-gated feed-forward, soft-capped attention scores and logits
  // (gemma2.attn_logit_softcapping, final_logit_softcapping), and a window
  // of n_swa positions (attention.sliding_window) on every other layer.
  // "gemma3": gemma2's layout plus QK-norm, no soft-caps, the window on 5 of
  // every 6 layers.
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  uint32_t n_swa = 0;
  // "phi3": NeoX RoPE, Q, K and V in one attn_qkv and gate and up in one
  // ffn_up [n_embd, 2 n_ff], the window of n_swa on every layer, and
  // LongRoPE when n_ctx_orig > 0: f32 rope_factors_long and
  // rope_factors_short (head_dim / 2 positive values each) and
  // rope.scaling.{original_context_length, attn_factor}.
  uint32_t n_ctx_orig = 0;
  float rope_attn_factor = 1.0f;
  // "deepseek2" (DeepSeek V2/V3): MLA attention and a mixture of experts.
  //   - Attention: Q from attn_q, or through a rank-q_lora_rank bottleneck
  //     (attn_q_a, attn_q_a_norm, attn_q_b) when q_lora_rank > 0; K and V
  //     from a latent of kv_lora_rank values plus one shared RoPE key
  //     (attn_kv_a_mqa, attn_kv_a_norm, attn_kv_b). A head's key is head_dim
  //     wide (attention.key_length), its last rope_dim values rotated
  //     (rope.dimension_count); its value is value_dim wide.
  //   - YaRN when yarn_factor > 0: rope.scaling.{type yarn, factor,
  //     original_context_length n_ctx_orig, yarn_log_multiplier}.
  //   - Feed-forward: the first n_dense_lead layers dense (width n_ff);
  //     the rest n_expert experts of width n_ff_exp, n_expert_used per
  //     token, plus n_expert_shared always-on experts (one matrix set of
  //     width n_ff_exp * n_expert_shared). The router's softmax (V2) or
  //     sigmoid (V3, sigmoid_gating), a selection bias exp_probs_b when
  //     probs_bias, renormalised weights when expert_weights_norm, then
  //     scaled by expert_weights_scale.
  //   llama.cpp c392e50 takes a 27-layer model for V2-Lite (plain attn_q)
  //   and any other for one with q_lora_rank.
  uint32_t q_lora_rank = 0;
  uint32_t kv_lora_rank = 0;
  uint32_t rope_dim = 0;
  uint32_t value_dim = 0;
  float yarn_factor = 0.0f;
  float yarn_log_mul = 0.0f;
  uint32_t n_dense_lead = 0;
  uint32_t n_ff_exp = 0;
  uint32_t n_expert_shared = 0;
  bool sigmoid_gating = false;
  bool probs_bias = false;
  bool expert_weights_norm = false;
  float expert_weights_scale = 1.0f;
  uint32_t HeadDim() const { return head_dim != 0 ? head_dim : n_embd / n_head; }
};

// The built-in presets: tiny, tinyllama-1.1b, llama-3.2-1b, llama-3-8b,
// moe-tiny (tiny's attention, 8 experts, 2 used), qwen2moe-tiny (12
// experts, 4 used, a shared expert), qwen3-tiny, qwen3moe-tiny (16 experts,
// 4 used), gemma2-tiny, gemma3-tiny, phi3-tiny, deepseek2-lite-tiny (V2-Lite: 27 layers, plain Q,
// softmax router), deepseek3-tiny (V3: Q LoRA, sigmoid router with a selection bias),
// mixtral-bench (2.3 GB of q8_0, 8 experts, 2 used),
// and micro (64 dims, 1 layer, tied head: a real vocabulary's random model that stays small, e.g.
// 17 MiB of q8_0 weights for Gemma 3's 262,145 pieces).
const std::vector<SynthPreset>& SynthPresets();
// InvalidArgument naming the known presets when `name` is not one of them.
absl::StatusOr<SynthPreset> FindSynthPreset(const std::string& name);

// The weight types `--type` accepts: f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k,
// q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs. InvalidArgument for any other name. (q3_k, q4_k and q5_k
// mean llama.cpp's Q3_K_M, Q4_K_M and Q5_K_M mixes; q2_k its Q2_K mix.)
absl::StatusOr<TensorType> ParseSynthType(const std::string& name);
// llama.cpp's LLAMA_FTYPE number for a base type (general.file_type):
// f32 0, f16 1, q4_0 2, q4_1 3, q8_0 7, q5_0 8, q5_1 9, q2_k 10, q3_k 12 (Q3_K_M),
// q4_k 15 (Q4_K_M), q5_k 17 (Q5_K_M), q6_k 18, iq4_nl 25, iq4_xs 30.
// Precondition: `type` is one ParseSynthType returns.
uint32_t LlamaFileType(TensorType type);

// One tensor of the file, in file order.
struct SynthTensor {
  std::string name;            // "blk.3.attn_v.weight"
  std::vector<uint64_t> dims;  // GGUF order: ne[0] (row length) first
  TensorType type = TensorType::kF32;
  float stddev = 0;  // of the random values; 0 means "all ones" (norms)
  float mean = 0;    // added to every value (LongRoPE factors stay positive)
  uint64_t n_elements() const;
  uint64_t n_bytes() const;
};

// Every tensor of a model and its type.
struct SynthPlan {
  SynthPreset preset;
  TensorType base_type = TensorType::kF32;  // what --type named
  std::vector<SynthTensor> tensors;
  uint64_t n_params() const;
  uint64_t data_bytes() const;  // tensor bytes, padding not counted
};

// Chooses each tensor's type as llama-quantize (llama.cpp src/llama-quant.cpp,
// llama_tensor_get_type) does for the matching ftype:
//   - 1-D norm weights stay f32;
//   - f32/f16: every matrix in that type (as convert_hf_to_gguf writes them);
//   - quantized types: the output head (token_embd when tied) is Q6_K unless
//     the base is Q8_0 (Q8_0 when its rows are not a multiple of 256);
//     token_embd otherwise keeps the base type;
//   - q4_k (Q4_K_M), q5_k (Q5_K_M): attn_v and ffn_down are Q6_K on the
//     layers where use_more_bits(i, n) = i < n/8 || i >= 7n/8 ||
//     (i - n/8) % 3 == 2; everything else the base type;
//   - q3_k (Q3_K_M): attn_v Q5_K on layers 0 and 1, else Q4_K; ffn_down Q5_K
//     on layers i < n/16, else Q4_K; attn_output Q4_K; the rest Q3_K;
//   - q2_k (Q2_K): attn_v Q4_K when n_head / n_head_kv >= 4, else Q3_K;
//     ffn_down and attn_output Q3_K; the rest Q2_K;
//   - iq4_nl, iq4_xs (no importance matrix): attn_v Q5_K when n_head /
//     n_head_kv >= 4, ffn_down Q5_K on layers i < n/8; the rest the base;
//   - q4_1, q5_0, q5_1: everything but the head in the base type.
// A type whose block size does not divide the row length falls back:
// Q6_K -> Q8_0 (as llama.cpp), IQ4_XS -> IQ4_NL (as llama.cpp), Q2_K..Q5_K
// -> Q8_0 (llama.cpp picks IQ4_NL, Q5_0 or Q5_1), then -> F16 when 32
// does not divide it either
// (llama.cpp would refuse Q8_0/Q4_0 there). A Q6_K choice becomes Q8_0 while
// the kernels lack Q6_K (IsComputeSupported), so q4_0 files stay loadable.
// InvalidArgument for a preset whose dims contradict each other (n_vocab
// must be at least 260, the size SynthVocabulary needs) or a base type
// ParseSynthType does not name. Pure: plans types the kernels may not
// implement yet (WriteSynthModel refuses those).
absl::StatusOr<SynthPlan> PlanSynthModel(const SynthPreset& preset, TensorType base_type);

// The vocabulary of a synthetic model: <unk>, <s>, </s>, the 256 byte pieces
// <0x00>..<0xFF>, then unique synthetic pieces ("▁", "▁a", "a", ..., "▁ab",
// "ab", ...) with descending scores, n_vocab in all. BOS 1, EOS 2, UNK 0.
// Precondition: n_vocab >= 260.
Vocabulary SynthVocabulary(uint32_t n_vocab);

struct SynthOptions {
  std::string preset = "tiny";
  TensorType type = TensorType::kF32;
  uint64_t seed = 1;  // the same seed (and preset, type) gives the same bytes
  int threads = 0;    // generation and quantization threads; 0 = DefaultThreadCount()
  // When set, the model carries this vocabulary (tokens, merges, scores,
  // types, special ids, chat template) and its size replaces the preset's
  // n_vocab; otherwise SynthVocabulary(n_vocab). Shared, never modified.
  std::shared_ptr<const SynthTokenizer> tokenizer;
};

// The plan WriteSynthModel(options, ...) writes: FindSynthPreset, n_vocab
// from options.tokenizer when set (which may then be below 260), then
// PlanSynthModel. Errors: theirs.
absl::StatusOr<SynthPlan> PlanSynthModel(const SynthOptions& options);

// Called as tensor data is written: bytes done and bytes in all.
using SynthProgress = std::function<void(uint64_t done, uint64_t total)>;

// Writes the model to `path` (via `path.tmp.<pid>`, renamed when complete).
// Weights are N(0, preset.weight_stddev)-like (a scaled sum of four uniforms, so bounded at
// 3.5 sigma), norms 1.0: activations stay in the range of a trained net.
// Every row's values derive from (seed, tensor, row) alone, so the bytes do
// not depend on the thread count. Tensors are generated and written a few
// MiB at a time: memory stays small even for llama-3-8b.
// Errors: those of FindSynthPreset and PlanSynthModel; Unimplemented when a
// planned tensor type has no quantizer and kernels yet (q4_k and q6_k until
// the K-quants land); the errno status of a failed create/write/rename.
absl::Status WriteSynthModel(const SynthOptions& options, const std::string& path,
                             const SynthProgress& progress = nullptr);

}  // namespace ringlm

#endif  // RINGLM_CLI_SYNTH_SYNTH_MODEL_H_
