#include "inference/model_config.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace ringlm {
namespace {

// Upper bounds that no real model reaches; they keep a corrupt header from
// asking for absurd allocations later.
constexpr uint64_t kMaxLayers = 4096;
constexpr uint64_t kMaxDim = 1u << 20;
constexpr uint64_t kMaxHeads = 4096;
constexpr uint64_t kMaxVocab = 1u << 22;
constexpr uint64_t kMaxExperts = 256;  // llama.cpp's LLAMA_MAX_EXPERTS

absl::StatusOr<uint32_t> GetBounded(const GgufFile& file, const std::string& key, uint64_t max) {
  absl::StatusOr<uint64_t> v = file.GetUint(key);
  if (!v.ok()) return v.status();
  if (*v == 0 || *v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", key, "' = ", *v, " is outside [1, ", max, "]"));
  }
  return static_cast<uint32_t>(*v);
}

// The expert keys: optional on llama (Mixtral when the count is above 0),
// required on qwen2moe and qwen3moe. Defaults as llama.cpp's loader.
absl::Status ReadDeepSeekExperts(const GgufFile& file, const std::string& p, ModelConfig& c);

absl::Status ReadExperts(const GgufFile& file, const std::string& p, ModelConfig& c) {
  const bool required =
      c.architecture == "qwen2moe" || c.architecture == "qwen3moe" || c.architecture == "deepseek2";
  const std::string count_key = p + "expert_count";
  if (!required) {
    if (file.Find(count_key) == nullptr) return absl::OkStatus();
    RINGLM_ASSIGN_OR_RETURN(const uint64_t n, file.GetUint(count_key));
    if (n == 0) return absl::OkStatus();
    if (c.architecture != "llama") {
      return absl::UnimplementedError(
          absl::StrCat("experts on architecture '", c.architecture, "' are not supported yet"));
    }
  }
  RINGLM_ASSIGN_OR_RETURN(c.n_expert, GetBounded(file, count_key, kMaxExperts));
  RINGLM_ASSIGN_OR_RETURN(c.n_expert_used, GetBounded(file, p + "expert_used_count", c.n_expert));
  if (!required) {  // Mixtral: experts as wide as feed_forward_length, weights renormalised
    c.n_ff_exp = c.n_ff;
    c.expert_weights_norm = true;
    return absl::OkStatus();
  }
  if (c.architecture == "deepseek2") return ReadDeepSeekExperts(file, p, c);
  // Qwen MoE: experts of their own width; Qwen 2's take raw softmax weights
  // and add a shared expert behind a sigmoid gate, Qwen 3's renormalise.
  c.n_ff_exp = c.n_ff / c.n_expert_used;
  if (file.Find(p + "expert_feed_forward_length") != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(c.n_ff_exp,
                            GetBounded(file, p + "expert_feed_forward_length", kMaxDim));
  }
  if (c.n_ff_exp == 0) {
    return absl::InvalidArgumentError(absl::StrCat(p, "feed_forward_length / ", p,
                                                   "expert_used_count is 0 and no ", p,
                                                   "expert_feed_forward_length is given"));
  }
  if (c.architecture == "qwen3moe") {
    c.expert_weights_norm = true;
    return absl::OkStatus();
  }
  c.n_ff_shexp = c.n_ff;
  c.shared_expert_gated = true;
  if (file.Find(p + "expert_shared_feed_forward_length") != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(c.n_ff_shexp,
                            GetBounded(file, p + "expert_shared_feed_forward_length", kMaxDim));
  }
  return absl::OkStatus();
}

// The head size: attention.key_length when given (Qwen 3's 128 with n_embd
// 1024 and 16 heads), else n_embd / n_head. Values are as wide as keys.
absl::Status ReadHeadDim(const GgufFile& file, const std::string& p, ModelConfig& c) {
  const std::string key_key = p + "attention.key_length";
  if (file.Find(key_key) == nullptr) {
    if (c.n_embd % c.n_head != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "embedding_length ", c.n_embd, " is not a multiple of head_count ", c.n_head));
    }
    c.head_dim = c.n_embd / c.n_head;
  } else {
    RINGLM_ASSIGN_OR_RETURN(c.head_dim, GetBounded(file, key_key, kMaxDim));
    if (uint64_t{c.head_dim} * c.n_head > kMaxDim) {
      return absl::InvalidArgumentError(absl::StrCat("key '", key_key, "' = ", c.head_dim,
                                                     " times head_count ", c.n_head, " exceeds ",
                                                     kMaxDim));
    }
  }
  const std::string value_key = p + "attention.value_length";
  c.head_dim_v = c.head_dim;
  if (c.architecture == "deepseek2") {      // MLA's values have a width of their own
    if (file.Find(value_key) == nullptr) {  // llama.cpp's default
      if (c.n_embd % c.n_head != 0) {
        return absl::InvalidArgumentError(absl::StrCat("embedding_length ", c.n_embd,
                                                       " is not a multiple of head_count ",
                                                       c.n_head, " and no ", value_key));
      }
      c.head_dim_v = c.n_embd / c.n_head;
      return absl::OkStatus();
    }
    RINGLM_ASSIGN_OR_RETURN(c.head_dim_v, GetBounded(file, value_key, kMaxDim));
    if (uint64_t{c.head_dim_v} * c.n_head > kMaxDim) {
      return absl::InvalidArgumentError(absl::StrCat("key '", value_key, "' = ", c.head_dim_v,
                                                     " times head_count ", c.n_head, " exceeds ",
                                                     kMaxDim));
    }
    return absl::OkStatus();
  }
  if (file.Find(value_key) != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(const uint32_t value_length, GetBounded(file, value_key, kMaxDim));
    if (value_length != c.head_dim) {
      return absl::UnimplementedError(absl::StrCat("key '", value_key, "' = ", value_length,
                                                   " differs from the key length ", c.head_dim));
    }
  }
  return absl::OkStatus();
}

// A positive, finite float key, or `fallback` when it is absent.
absl::StatusOr<float> GetPositive(const GgufFile& file, const std::string& key, float fallback) {
  if (file.Find(key) == nullptr) return fallback;
  RINGLM_ASSIGN_OR_RETURN(const float v, file.GetFloat(key));
  if (!(v > 0 && std::isfinite(v))) {
    return absl::InvalidArgumentError(absl::StrCat("key '", key, "' = ", v, " is not positive"));
  }
  return v;
}

// DeepSeek's experts (llama.cpp c392e50's DEEPSEEK2 hparams, all keys it
// requires required here): their width, the dense lead, the shared experts
// (at least one: llama.cpp always loads their tensors), the gating (absent or
// 0 is softmax, as llama.cpp keeps for V2 files) and the weights' scale and
// normalisation.
absl::Status ReadDeepSeekExperts(const GgufFile& file, const std::string& p, ModelConfig& c) {
  RINGLM_ASSIGN_OR_RETURN(c.n_ff_exp, GetBounded(file, p + "expert_feed_forward_length", kMaxDim));
  const std::string lead_key = p + "leading_dense_block_count";
  RINGLM_ASSIGN_OR_RETURN(const uint64_t lead, file.GetUint(lead_key));
  if (lead > c.n_layer) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", lead_key, "' = ", lead, " exceeds block_count ", c.n_layer));
  }
  c.n_layer_dense_lead = static_cast<uint32_t>(lead);
  RINGLM_ASSIGN_OR_RETURN(const uint32_t n_shared,
                          GetBounded(file, p + "expert_shared_count", kMaxExperts));
  c.n_ff_shexp = c.n_ff_exp * n_shared;
  if (uint64_t{c.n_ff_exp} * n_shared > kMaxDim) {
    return absl::InvalidArgumentError(absl::StrCat(p, "expert_shared_count ", n_shared, " times ",
                                                   p, "expert_feed_forward_length ", c.n_ff_exp,
                                                   " exceeds ", kMaxDim));
  }
  const std::string scale_key = p + "expert_weights_scale";
  if (file.Find(scale_key) == nullptr) {
    return absl::NotFoundError(absl::StrCat("key '", scale_key, "' not found"));
  }
  RINGLM_ASSIGN_OR_RETURN(c.expert_weights_scale, GetPositive(file, scale_key, 1.0f));
  const std::string norm_key = p + "expert_weights_norm";
  if (file.Find(norm_key) != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(c.expert_weights_norm, file.GetBool(norm_key));
  }
  const std::string gating_key = p + "expert_gating_func";
  if (file.Find(gating_key) != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(const uint64_t gating, file.GetUint(gating_key));
    if (gating > 2) {
      return absl::InvalidArgumentError(absl::StrCat("key '", gating_key, "' = ", gating,
                                                     " is not 0 or 1 (softmax) or 2 (sigmoid)"));
    }
    c.sigmoid_gating = gating == 2;
  }
  return absl::OkStatus();
}

// DeepSeek's attention (llama.cpp c392e50's DEEPSEEK2 hparams and
// build_deepseek2): the MLA ranks, one KV head per query head, a rotated
// part narrower than the key, and the RoPE scaling as the GGUF gives it
// (none, linear or yarn; llama.cpp's default linear), with the pre-scaled
// kq_scale and rope attention factor llama.cpp computes for YaRN. Plain
// float arithmetic (this file is built without FMA contraction), as
// libllama's.
absl::Status ReadDeepSeekAttention(const GgufFile& file, const std::string& p, ModelConfig& c) {
  RINGLM_ASSIGN_OR_RETURN(c.kv_lora_rank, GetBounded(file, p + "attention.kv_lora_rank", kMaxDim));
  const std::string q_rank_key = p + "attention.q_lora_rank";
  if (file.Find(q_rank_key) != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(c.q_lora_rank, GetBounded(file, q_rank_key, kMaxDim));
  }
  if (c.n_head_kv != c.n_head) {
    return absl::InvalidArgumentError(absl::StrCat("deepseek2: attention.head_count_kv ",
                                                   c.n_head_kv, " must be head_count ", c.n_head,
                                                   " (MLA gives every head its own K and V)"));
  }
  if (c.n_rot >= c.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat("deepseek2: rope.dimension_count ", c.n_rot,
                                                   " must be below attention.key_length ",
                                                   c.head_dim));
  }
  std::string type = "linear";
  const std::string type_key = p + "rope.scaling.type";
  if (file.Find(type_key) != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(type, file.GetString(type_key));
  }
  if (type != "none" && type != "linear" && type != "yarn") {
    return absl::UnimplementedError(absl::StrCat("key '", type_key, "' = '", type,
                                                 "': RoPE scaling other than yarn or linear"));
  }
  const std::string factor_key = p + "rope.scaling.factor";
  float factor = 0.0f;
  if (file.Find(factor_key) != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(factor, file.GetFloat(factor_key));
    if (!(factor >= 0 && std::isfinite(factor))) {
      return absl::InvalidArgumentError(
          absl::StrCat("key '", factor_key, "' = ", factor, " is negative or not finite"));
    }
  }
  RopeYarn& yarn = c.rope_yarn;
  yarn.freq_scale = type == "none" || factor == 0.0f ? 1.0f : 1.0f / factor;
  yarn.ext_factor = type == "yarn" ? 1.0f : 0.0f;
  c.n_ctx_orig = c.n_ctx_train;
  const std::string orig_key = p + "rope.scaling.original_context_length";
  if (file.Find(orig_key) != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(c.n_ctx_orig, GetBounded(file, orig_key, 1u << 24));
  }
  YarnCorrDims(static_cast<int>(c.n_rot), c.n_ctx_orig, c.rope_freq_base, 32.0f, 1.0f,
               &yarn.corr_low, &yarn.corr_high);
  const std::string log_mul_key = p + "rope.scaling.yarn_log_multiplier";
  RINGLM_ASSIGN_OR_RETURN(const float log_mul, file.GetFloat(log_mul_key));
  if (!std::isfinite(log_mul)) {
    return absl::InvalidArgumentError(absl::StrCat("key '", log_mul_key, "' is not finite"));
  }
  RINGLM_ASSIGN_OR_RETURN(const float attn_factor,
                          GetPositive(file, p + "rope.scaling.attn_factor", 1.0f));
  // build_deepseek2's pre-scaling, in its order of operations.
  const float ln_stretch = std::log(1.0f / yarn.freq_scale);
  const float mscale = attn_factor * (1.0f + log_mul * ln_stretch);
  c.kq_scale = 1.0f * mscale * mscale / std::sqrt(static_cast<float>(c.head_dim));
  c.rope_attn_factor = 1.0f / (1.0f + 0.1f * ln_stretch);
  return absl::OkStatus();
}

// Gemma 2 (llama.cpp c392e50's build_gemma2 and its hparams): soft-caps
// (50 and 30 when absent), the sliding window (4096 when absent) on even layers, the embedding
// scale, and Q scaled after RoPE by 1 / sqrt(head_dim), or by 1 / sqrt(n_embd / n_head) for the
// 46-layer 27B (llama.cpp picks by layer count; the GGUF carries no query_pre_attn_scalar).
//
// Gemma 3 (upstream llama.cpp's gemma3.cpp, iswa): no soft-caps, a window
// it requires on 5 of every 6 layers, those rotated with base 10000, and Q
// scaled the same way (at 62 layers, the 27B, by 1 / sqrt(n_embd / n_head)).
absl::Status ReadGemma(const GgufFile& file, const std::string& p, ModelConfig& c) {
  const bool gemma2 = c.architecture == "gemma2";
  const std::string window_key = p + "attention.sliding_window";
  if (gemma2) {
    RINGLM_ASSIGN_OR_RETURN(c.attn_softcap, GetPositive(file, p + "attn_logit_softcapping", 50.0f));
    RINGLM_ASSIGN_OR_RETURN(c.final_softcap,
                            GetPositive(file, p + "final_logit_softcapping", 30.0f));
    c.n_swa = 4096;
  }
  if (!gemma2 || file.Find(window_key) != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(c.n_swa, GetBounded(file, window_key, 1u << 24));
  }
  c.swa_period = gemma2 ? 2 : 6;
  if (!gemma2) c.rope_freq_base_swa = 10000.0f;
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.has_post_norms = true;
  c.gelu_ffn = true;
  c.kq_scale = 1.0f;
  const uint32_t big_layers = gemma2 ? 46 : 62;  // the 27B
  const uint32_t scale_dim = c.n_layer == big_layers ? c.n_embd / c.n_head : c.head_dim;
  c.q_scale = 1.0f / std::sqrt(static_cast<float>(scale_dim));
  return absl::OkStatus();
}

// Phi-3 (llama.cpp c392e50's PHI3 hparams and build_phi3): the fused
// tensors, Q scaled after RoPE, the sliding window on every layer (the
// 4k and 128k models' defaults by shape when the key is absent, as llama.cpp
// keeps for old files), and LongRoPE's original context and attention factor.
absl::Status ReadPhi3(const GgufFile& file, const std::string& p, ModelConfig& c) {
  if (c.head_dim * c.n_head != c.n_embd) {
    return absl::InvalidArgumentError(
        absl::StrCat("phi3: head_count ", c.n_head, " times the head size ", c.head_dim,
                     " must be embedding_length ", c.n_embd, " (attn_qkv holds Q as n_embd rows)"));
  }
  c.fused_qkv = true;
  c.fused_gate_up = true;
  c.swa_every_layer = true;
  c.kq_scale = 1.0f;
  c.q_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const std::string window_key = p + "attention.sliding_window";
  if (file.Find(window_key) != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(const uint64_t window, file.GetUint(window_key));
    if (window > (1u << 24)) {
      return absl::InvalidArgumentError(
          absl::StrCat("key '", window_key, "' = ", window, " is above ", 1u << 24));
    }
    c.n_swa = static_cast<uint32_t>(window);  // 0: none (Phi-4)
  } else if ((c.n_layer == 32 || c.n_layer == 40) && c.n_ctx_train == 4096) {
    c.n_swa = 2047;  // Phi-3 mini and medium 4k
  } else if (c.n_layer == 32 && c.n_head_kv == 32 && c.n_ctx_train == 131072) {
    c.n_swa = 262144;  // Phi-3 mini 128k
  } else if (c.n_layer == 40 && c.n_ctx_train == 131072) {
    c.n_swa = 131072;  // Phi-3 medium 128k
  } else {
    return absl::NotFoundError(absl::StrCat("key '", window_key, "' not found"));
  }
  c.n_ctx_orig = c.n_ctx_train;
  const std::string orig_key = p + "rope.scaling.original_context_length";
  if (file.Find(orig_key) != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(c.n_ctx_orig, GetBounded(file, orig_key, 1u << 24));
  }
  RINGLM_ASSIGN_OR_RETURN(c.rope_attn_factor,
                          GetPositive(file, p + "rope.scaling.attn_factor", 1.0f));
  // A frequency scale would stretch every angle; no Phi-3 file sets one.
  const std::string scale_key = p + "rope.scaling.factor";
  if (file.Find(scale_key) != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(const float factor, file.GetFloat(scale_key));
    if (factor != 0.0f && factor != 1.0f) {
      return absl::UnimplementedError(
          absl::StrCat("key '", scale_key, "' = ", factor, ": RoPE frequency scaling"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfig::FromGguf(const GgufFile& file) {
  ModelConfig c;
  absl::StatusOr<std::string> arch = file.GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  c.architecture = *arch;
  if (c.architecture == "llama") {
    c.rope_style = RopeStyle::kNormal;
  } else if (c.architecture == "qwen2" || c.architecture == "qwen2moe") {
    c.rope_style = RopeStyle::kNeox;
    c.has_qkv_bias = true;
  } else if (c.architecture == "qwen3" || c.architecture == "qwen3moe") {
    c.rope_style = RopeStyle::kNeox;
    c.has_qk_norm = true;
  } else if (c.architecture == "gemma2") {
    c.rope_style = RopeStyle::kNeox;
  } else if (c.architecture == "gemma3") {
    c.rope_style = RopeStyle::kNeox;
    c.has_qk_norm = true;
  } else if (c.architecture == "phi3") {
    c.rope_style = RopeStyle::kNeox;
  } else if (c.architecture == "deepseek2") {
    c.rope_style = RopeStyle::kNormal;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("unsupported architecture '", c.architecture,
                     "' (supported: llama, qwen2, qwen2moe, qwen3, qwen3moe, gemma2, gemma3, "
                     "phi3, deepseek2)"));
  }
  if (absl::StatusOr<std::string> name = file.GetString("general.name"); name.ok()) {
    c.name = *name;
  }
  const std::string p = c.architecture + ".";

  RINGLM_ASSIGN_OR_RETURN(c.n_layer, GetBounded(file, p + "block_count", kMaxLayers));
  RINGLM_ASSIGN_OR_RETURN(c.n_embd, GetBounded(file, p + "embedding_length", kMaxDim));
  RINGLM_ASSIGN_OR_RETURN(c.n_ff, GetBounded(file, p + "feed_forward_length", kMaxDim));
  RINGLM_ASSIGN_OR_RETURN(c.n_head, GetBounded(file, p + "attention.head_count", kMaxHeads));
  RINGLM_ASSIGN_OR_RETURN(c.n_ctx_train, GetBounded(file, p + "context_length", 1u << 24));
  c.n_head_kv = c.n_head;
  if (file.Find(p + "attention.head_count_kv") != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(c.n_head_kv,
                            GetBounded(file, p + "attention.head_count_kv", kMaxHeads));
  }
  if (c.n_head % c.n_head_kv != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("head_count ", c.n_head, " is not a multiple of head_count_kv ", c.n_head_kv));
  }
  RINGLM_RETURN_IF_ERROR(ReadHeadDim(file, p, c));
  c.kq_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.n_rot = c.head_dim;
  if (file.Find(p + "rope.dimension_count") != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(c.n_rot, GetBounded(file, p + "rope.dimension_count", c.head_dim));
  }
  if (c.n_rot % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("rope.dimension_count ", c.n_rot, " is odd"));
  }
  if (file.Find(p + "rope.freq_base") != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(c.rope_freq_base, file.GetFloat(p + "rope.freq_base"));
    if (!(c.rope_freq_base > 0)) {
      return absl::InvalidArgumentError("rope.freq_base must be positive");
    }
  }
  if (file.Find(p + "attention.layer_norm_rms_epsilon") != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(c.rms_eps, file.GetFloat(p + "attention.layer_norm_rms_epsilon"));
    if (!(c.rms_eps > 0 && c.rms_eps < 1)) {
      return absl::InvalidArgumentError("attention.layer_norm_rms_epsilon must be in (0, 1)");
    }
  }
  RINGLM_RETURN_IF_ERROR(ReadExperts(file, p, c));
  if (c.architecture == "gemma2" || c.architecture == "gemma3") {
    RINGLM_RETURN_IF_ERROR(ReadGemma(file, p, c));
  }
  if (c.architecture == "phi3") RINGLM_RETURN_IF_ERROR(ReadPhi3(file, p, c));
  if (c.architecture == "deepseek2") RINGLM_RETURN_IF_ERROR(ReadDeepSeekAttention(file, p, c));
  // The vocabulary size is the embedding's row count; the tokenizer checks
  // that its own list agrees.
  absl::StatusOr<const GgufTensorInfo*> embd = file.RequireTensor("token_embd.weight");
  if (!embd.ok()) return embd.status();
  if ((*embd)->dims.size() != 2 || (*embd)->dims[0] != c.n_embd) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor 'token_embd.weight' must be [", c.n_embd, ", n_vocab]"));
  }
  if ((*embd)->dims[1] > kMaxVocab) {
    return absl::InvalidArgumentError("token_embd.weight has an absurd vocabulary size");
  }
  c.n_vocab = static_cast<uint32_t>((*embd)->dims[1]);
  return c;
}

}  // namespace ringlm
