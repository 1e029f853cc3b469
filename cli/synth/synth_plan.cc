// Presets, the per-tensor type choice (llama-quantize's rules) and the
// synthetic vocabulary.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "cli/synth/synth_model.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

constexpr uint32_t kQkK = 256;  // K-quant super-block size
constexpr const char* kSynthTypeList =
    "f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs";

// llama.cpp's use_more_bits: the first and last eighth of the layers, and
// every third layer in between, get the bigger type in Q4_K_M/Q5_K_M.
bool UseMoreBits(int i_layer, int n_layer) {
  return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

// llama-quantize's fallback when the type's block does not divide the row
// length (see PlanSynthModel's contract for where we differ).
TensorType FitRowLength(TensorType type, uint64_t ne0) {
  if (ne0 % TraitsOf(type).block_size == 0) return type;
  if (type == TensorType::kIQ4_XS && ne0 % 32 == 0) return TensorType::kIQ4_NL;
  if (ne0 % 32 == 0) return TensorType::kQ8_0;
  return TensorType::kF16;
}

// The Q6_K choices of llama.cpp's mix, while the kernels may still lack Q6_K.
TensorType Q6KOrFallback() {
  return IsComputeSupported(TensorType::kQ6_K) ? TensorType::kQ6_K : TensorType::kQ8_0;
}

bool IsSynthType(TensorType t) {
  switch (t) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kIQ4_NL:
    case TensorType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

enum class Role { kTokenEmbd, kOutput, kAttnV, kAttnQkv, kAttnOutput, kFfnDown, kOtherMatrix };

// llama_tensor_get_type for a dense, non-Falcon model below 70B, without an
// importance matrix; the K-quant bases stand for the mixes Q2_K, Q3_K_M,
// Q4_K_M and Q5_K_M.
TensorType ChooseType(TensorType base, Role role, int layer, int n_layer, int n_gqa, uint64_t ne0) {
  using T = TensorType;
  if (base == T::kF32 || base == T::kF16) return base;
  const bool more_bits = UseMoreBits(layer, n_layer);
  const bool iq4 = base == T::kIQ4_NL || base == T::kIQ4_XS;
  TensorType t = base;
  switch (role) {
    case Role::kOutput:
      if (ne0 % kQkK != 0) return FitRowLength(T::kQ8_0, ne0);
      if (base != T::kQ8_0) t = Q6KOrFallback();
      break;
    case Role::kAttnV:
      if (base == T::kQ2_K) {
        t = n_gqa >= 4 ? T::kQ4_K : T::kQ3_K;
      } else if (base == T::kQ3_K) {
        t = layer < 2 ? T::kQ5_K : T::kQ4_K;
      } else if ((base == T::kQ4_K || base == T::kQ5_K) && more_bits) {
        t = Q6KOrFallback();
      } else if (iq4 && n_gqa >= 4) {
        t = T::kQ5_K;
      }
      break;
    case Role::kFfnDown:
      if (base == T::kQ2_K) {
        t = T::kQ3_K;
      } else if (base == T::kQ3_K) {
        t = layer < n_layer / 16 ? T::kQ5_K : T::kQ4_K;
      } else if ((base == T::kQ4_K || base == T::kQ5_K) && more_bits) {
        t = Q6KOrFallback();
      } else if (iq4 && layer < n_layer / 8) {
        t = T::kQ5_K;
      }
      break;
    case Role::kAttnQkv:  // Phi-3's fused attention
      if (base == T::kQ3_K) t = T::kQ4_K;
      if (base == T::kQ4_K) t = T::kQ5_K;
      if (base == T::kQ5_K) t = Q6KOrFallback();
      break;
    case Role::kAttnOutput:
      if (base == T::kQ2_K) t = T::kQ3_K;
      if (base == T::kQ3_K) t = T::kQ4_K;
      break;
    default:
      break;
  }
  return FitRowLength(t, ne0);
}

absl::StatusOr<SynthPlan> PlanChecked(const SynthPreset& p, TensorType base, uint32_t min_vocab);

// The architectures synth writes, and whether they have experts.
bool ArchitectureFits(const SynthPreset& p) {
  if (p.architecture == "llama") return true;
  if (p.architecture == "qwen3" || p.architecture == "gemma2" || p.architecture == "gemma3" ||
      p.architecture == "phi3") {
    return p.n_expert == 0;
  }
  if (p.architecture == "deepseek2") {
    // MLA: a latent, rotated dims that leave some unrotated, a value width,
    // one KV head per query head; experts after the dense layers, and at
    // least one shared expert (llama.cpp requires the shared tensors).
    return p.n_expert > 0 && p.kv_lora_rank > 0 && p.rope_dim > 0 && p.rope_dim % 2 == 0 &&
           p.rope_dim < p.HeadDim() && p.value_dim > 0 && p.n_head_kv == p.n_head &&
           p.n_dense_lead < p.n_layer && p.n_ff_exp > 0 && p.n_expert_shared > 0;
  }
  return (p.architecture == "qwen2moe" || p.architecture == "qwen3moe") && p.n_expert > 0;
}

// DeepSeek's layout scaled down (see SynthPreset): n_embd 256, 4 heads of
// 64 key values (32 rotated) and 32 value values, a latent of 128, YaRN
// stretching an original context of 128 four times, one dense layer of
// width 512, then experts of width 64 and 2 (V2) or 1 (V3) shared ones.
SynthPreset DeepSeekPreset(std::string name, uint32_t n_layer, bool v3) {
  SynthPreset p;
  p.name = std::move(name);
  p.architecture = "deepseek2";
  p.n_embd = 256;
  p.n_layer = n_layer;
  p.n_head = 4;
  p.n_head_kv = 4;
  p.n_ff = 512;
  p.n_vocab = 2048;
  p.n_ctx = 512;
  p.rms_eps = 1e-6f;
  p.head_dim = 64;
  p.rope_dim = 32;
  p.value_dim = 32;
  p.kv_lora_rank = 128;
  p.q_lora_rank = v3 ? 128 : 0;
  p.yarn_factor = 4.0f;
  p.n_ctx_orig = 128;
  p.yarn_log_mul = v3 ? 0.1f : 0.0707f;
  p.n_dense_lead = 1;
  p.n_expert = v3 ? 32 : 16;
  p.n_expert_used = 4;
  p.n_ff_exp = 64;
  p.n_expert_shared = v3 ? 1 : 2;
  p.sigmoid_gating = v3;
  p.probs_bias = v3;
  p.expert_weights_norm = v3;
  p.expert_weights_scale = v3 ? 2.5f : 1.0f;
  p.weight_stddev = 0.05f;
  return p;
}

}  // namespace

const std::vector<SynthPreset>& SynthPresets() {
  static const std::vector<SynthPreset>* presets = new std::vector<SynthPreset>{
      // name, n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx, rope base, eps, tied
      {"tiny", 256, 4, 8, 4, 768, 2048, 512, 10000.0f, 1e-5f, false},
      // Rows of two 256-value blocks: wide enough that quantized types show
      // an order that differs from llama.cpp's (issue 40's exactness shape).
      {"small", 512, 4, 8, 4, 1536, 2048, 512, 10000.0f, 1e-5f, false},
      {"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f, 1e-5f, false},
      // The real model also has llama3 rope scaling (factor 32, rope_freqs),
      // which the engine does not implement; positions past 8192 would differ.
      {"llama-3.2-1b", 2048, 16, 32, 8, 8192, 128256, 131072, 500000.0f, 1e-5f, true},
      {"llama-3-8b", 4096, 32, 32, 8, 14336, 128256, 8192, 500000.0f, 1e-5f, false},
      // Not a real model: the smallest sensible shape, to carry a real
      // vocabulary (--tokenizer) in a file of a few tens of MiB at most.
      {"micro", 64, 1, 2, 1, 128, 32000, 4096, 10000.0f, 1e-5f, true},
      // stories260K's widths, 48 layers deep: rings of many stages (a
      // 24-node recovery test) at almost no compute.
      {"stories-48", 64, 48, 8, 4, 192, 512, 1024, 10000.0f, 1e-5f, false},
      // Mixtral's layout scaled down: 8 experts of width 512, 2 used per token,
      // weights wide enough that greedy ids wander. Untested against
      // llama-quantize for q4_k (its mix has rules of its own for 8 experts).
      {"moe-tiny", 256, 4, 8, 4, 512, 2048, 512, 10000.0f, 1e-5f, false, 8, 2, 0.05f},
      // Qwen1.5-MoE's layout scaled down: experts of width 128, 4 of 12 used
      // (12 is not a multiple of 8: the router's softmax has a libm tail), and
      // a shared expert of width 512.
      {"qwen2moe-tiny", 256, 4, 8, 8, 128, 2048, 512, 1000000.0f, 1e-6f, false, 12, 4, 0.05f,
       "qwen2moe", 512},
      // Qwen3-0.6B's layout scaled down: heads of 64 with n_embd 256 and 8
      // heads (key_length is not n_embd / n_head), QK-norm, a tied head.
      {"qwen3-tiny", 256, 4, 8, 4, 768, 2048, 512, 1000000.0f, 1e-6f, true, 0, 0, 0.05f, "qwen3", 0,
       64},
      // For benchmarks: Mixtral 8x7B's layout at a width that fits a small
      // machine, 2.2 B parameters (2.3 GB of q8_0), of which 0.7 B are read
      // per token (2 of 8 experts).
      {"mixtral-bench", 2048, 8, 16, 8, 5632, 32000, 4096, 1000000.0f, 1e-5f, false, 8, 2},
      // Qwen3-30B-A3B's layout scaled down: 16 experts of width 128, 4 used.
      {"qwen3moe-tiny", 256, 4, 8, 4, 128, 2048, 512, 1000000.0f, 1e-6f, false, 16, 4, 0.05f,
       "qwen3moe", 0, 64},
      // Gemma 2 2B's layout scaled down: its 26 layers (llama.cpp c392e50
      // knows Gemma 2 only at 26, 42 and 46 layers), heads narrower than
      // n_embd / n_head (4 x 48 at n_embd 256), soft-caps 50 and 30, and a
      // window of 16 positions on the even layers, shorter than a prompt
      // and its 32 generated tokens.
      {"gemma2-tiny", 256, 26, 4,     2,        768, 2048, 512,   10000.0f, 1e-6f,
       true,          0,   0,  0.05f, "gemma2", 0,   48,   50.0f, 30.0f,    16},
      // Gemma 3 1B's layout scaled down: 12 layers (local 0-4 and 6-10 with
      // a window of 16 and RoPE base 10000, global 5 and 11 with 1e6), one
      // KV head of 64, QK-norm, no soft-caps.
      {"gemma3-tiny", 256, 12, 4,     1,        768, 2048, 512,  1000000.0f, 1e-6f,
       true,          0,   0,  0.03f, "gemma3", 0,   64,   0.0f, 0.0f,       16},
      // Phi-3 mini 128k's layout scaled down: heads of n_embd / n_head, as
      // many KV heads, fused QKV and gate-up, a context of 1024 stretched by
      // LongRoPE from an original 128 (the real 131072 from 4096), its
      // attention factor sqrt(1 + ln(1024/128) / ln 128), and a window of
      // 24 on every layer (the 4k model's 2047), shorter than a prompt and
      // its 32 generated tokens.
      {"phi3-tiny", 256, 4,     8,      8, 768, 2048, 1024, 10000.0f, 1e-5f, false,
       0,           0,   0.05f, "phi3", 0, 0,   0.0f, 0.0f, 24,       128,   1.1952286f},
      // DeepSeek-V2-Lite's layout scaled down: 27 layers (llama.cpp c392e50
      // takes 27 for V2-Lite: plain attn_q), 16 experts, 4 used, 2 shared,
      // a softmax router with raw weights.
      DeepSeekPreset("deepseek2-lite-tiny", 27, /*v3=*/false),
      // DeepSeek-V3's layout scaled down: Q through a rank-128 bottleneck,
      // 32 experts, 4 used, 1 shared, a sigmoid router whose bias steers the
      // choice only, renormalised weights scaled by 2.5.
      DeepSeekPreset("deepseek3-tiny", 4, /*v3=*/true),
  };
  return *presets;
}

absl::StatusOr<SynthPreset> FindSynthPreset(const std::string& name) {
  std::vector<std::string> names;
  for (const SynthPreset& p : SynthPresets()) {
    if (p.name == name) return p;
    names.push_back(p.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown preset '", name, "' (known: ", absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<TensorType> ParseSynthType(const std::string& name) {
  static constexpr std::pair<const char*, TensorType> kTypes[] = {
      {"f32", TensorType::kF32},       {"f16", TensorType::kF16},       {"q8_0", TensorType::kQ8_0},
      {"q4_0", TensorType::kQ4_0},     {"q4_1", TensorType::kQ4_1},     {"q5_0", TensorType::kQ5_0},
      {"q5_1", TensorType::kQ5_1},     {"q2_k", TensorType::kQ2_K},     {"q3_k", TensorType::kQ3_K},
      {"q4_k", TensorType::kQ4_K},     {"q5_k", TensorType::kQ5_K},     {"q6_k", TensorType::kQ6_K},
      {"iq4_nl", TensorType::kIQ4_NL}, {"iq4_xs", TensorType::kIQ4_XS},
  };
  for (const auto& [n, t] : kTypes) {
    if (name == n) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown type '", name, "' (known: ", kSynthTypeList, ")"));
}

uint32_t LlamaFileType(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return 0;  // LLAMA_FTYPE_ALL_F32
    case TensorType::kF16:
      return 1;  // LLAMA_FTYPE_MOSTLY_F16
    case TensorType::kQ4_0:
      return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case TensorType::kQ4_1:
      return 3;  // LLAMA_FTYPE_MOSTLY_Q4_1
    case TensorType::kQ8_0:
      return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case TensorType::kQ5_0:
      return 8;  // LLAMA_FTYPE_MOSTLY_Q5_0
    case TensorType::kQ5_1:
      return 9;  // LLAMA_FTYPE_MOSTLY_Q5_1
    case TensorType::kIQ4_NL:
      return 25;  // LLAMA_FTYPE_MOSTLY_IQ4_NL
    case TensorType::kIQ4_XS:
      return 30;  // LLAMA_FTYPE_MOSTLY_IQ4_XS
    case TensorType::kQ2_K:
      return 10;  // LLAMA_FTYPE_MOSTLY_Q2_K
    case TensorType::kQ3_K:
      return 12;  // LLAMA_FTYPE_MOSTLY_Q3_K_M
    case TensorType::kQ4_K:
      return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    case TensorType::kQ5_K:
      return 17;  // LLAMA_FTYPE_MOSTLY_Q5_K_M
    case TensorType::kQ6_K:
      return 18;  // LLAMA_FTYPE_MOSTLY_Q6_K
    default:
      return 0;
  }
}

uint64_t SynthTensor::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

uint64_t SynthTensor::n_bytes() const {
  const TensorTypeTraits t = TraitsOf(type);
  return n_elements() / t.block_size * t.block_bytes;
}

uint64_t SynthPlan::n_params() const {
  uint64_t n = 0;
  for (const SynthTensor& t : tensors) n += t.n_elements();
  return n;
}

uint64_t SynthPlan::data_bytes() const {
  uint64_t n = 0;
  for (const SynthTensor& t : tensors) n += t.n_bytes();
  return n;
}

absl::StatusOr<SynthPlan> PlanSynthModel(const SynthPreset& p, TensorType base) {
  return PlanChecked(p, base, /*min_vocab=*/260);
}

absl::StatusOr<SynthPlan> PlanSynthModel(const SynthOptions& options) {
  RINGLM_ASSIGN_OR_RETURN(SynthPreset preset, FindSynthPreset(options.preset));
  if (options.tokenizer == nullptr) return PlanChecked(preset, options.type, 260);
  preset.n_vocab = static_cast<uint32_t>(options.tokenizer->vocab.pieces.size());
  return PlanChecked(preset, options.type, 1);
}

namespace {

absl::StatusOr<SynthPlan> PlanChecked(const SynthPreset& p, TensorType base, uint32_t min_vocab) {
  if (!IsSynthType(base)) {
    return absl::InvalidArgumentError(
        absl::StrCat("type ", std::string(TraitsOf(base).name), " is not one of ", kSynthTypeList));
  }
  if (p.n_embd == 0 || p.n_layer == 0 || p.n_head == 0 || p.n_head_kv == 0 || p.n_ff == 0 ||
      p.n_ctx == 0 || p.n_embd % p.n_head != 0 || p.n_head % p.n_head_kv != 0 ||
      p.HeadDim() % 2 != 0 || p.n_vocab < min_vocab ||
      (p.n_expert > 0 && (p.n_expert_used == 0 || p.n_expert_used > p.n_expert)) ||
      !ArchitectureFits(p)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preset '", p.name, "' is inconsistent: need n_head | n_embd, n_head_kv | n_head, ",
        "an even head size, non-zero sizes, 1 <= n_expert_used <= n_expert with experts ",
        "(which qwen2moe, qwen3moe and deepseek2 need, and qwen3 and gemma refuse), ",
        "architecture llama, qwen2moe, qwen3, qwen3moe, gemma2, gemma3, phi3 or deepseek2 (its ",
        "MLA and expert sizes consistent) and n_vocab >= ", min_vocab));
  }
  SynthPlan plan;
  plan.preset = p;
  plan.base_type = base;
  const int n_layer = static_cast<int>(p.n_layer);
  const uint64_t q_dim = uint64_t{p.HeadDim()} * p.n_head;
  const uint64_t n_embd_kv = uint64_t{p.HeadDim()} * p.n_head_kv;
  const int n_gqa = static_cast<int>(p.n_head / p.n_head_kv);
  auto matrix = [&](std::string name, uint64_t ne0, uint64_t ne1, Role role, int layer) {
    plan.tensors.push_back(SynthTensor{std::move(name),
                                       {ne0, ne1},
                                       ChooseType(base, role, layer, n_layer, n_gqa, ne0),
                                       p.weight_stddev});
  };
  // A 3-D expert tensor: n_expert matrices [ne0, ne1], typed like a matrix.
  auto experts = [&](std::string name, uint64_t ne0, uint64_t ne1, Role role, int layer) {
    plan.tensors.push_back(SynthTensor{std::move(name),
                                       {ne0, ne1, p.n_expert},
                                       ChooseType(base, role, layer, n_layer, n_gqa, ne0),
                                       p.weight_stddev});
  };
  auto norm = [&](std::string name) {
    plan.tensors.push_back(SynthTensor{std::move(name), {p.n_embd}, TensorType::kF32, 0.0f});
  };
  // A random f32 vector (a bias, the shared expert's gate).
  auto vector = [&](std::string name, uint64_t n) {
    plan.tensors.push_back(SynthTensor{std::move(name), {n}, TensorType::kF32, p.weight_stddev});
  };
  const bool qwen = p.architecture == "qwen2moe";
  const bool gemma = p.architecture == "gemma2" || p.architecture == "gemma3";
  const bool phi3 = p.architecture == "phi3";
  const bool deepseek = p.architecture == "deepseek2";
  const bool qk_norm =
      p.architecture == "qwen3" || p.architecture == "qwen3moe" || p.architecture == "gemma3";
  // A tied head: llama-quantize types token_embd by the output rule.
  matrix("token_embd.weight", p.n_embd, p.n_vocab, p.tied_output ? Role::kOutput : Role::kTokenEmbd,
         0);
  if (phi3 && p.n_ctx_orig != 0) {  // LongRoPE factors: long ones in [1, 15], short in [0.5, 2.5]
    plan.tensors.push_back(
        SynthTensor{"rope_factors_long.weight", {p.HeadDim() / 2}, TensorType::kF32, 2.0f, 8.0f});
    plan.tensors.push_back(
        SynthTensor{"rope_factors_short.weight", {p.HeadDim() / 2}, TensorType::kF32, 0.3f, 1.5f});
  }
  for (int i = 0; i < n_layer; ++i) {
    const std::string b = absl::StrCat("blk.", i, ".");
    norm(b + "attn_norm.weight");
    if (phi3) {  // convert_hf_to_gguf's Phi-3 order
      matrix(b + "attn_qkv.weight", p.n_embd, q_dim + 2 * n_embd_kv, Role::kAttnQkv, i);
      matrix(b + "attn_output.weight", q_dim, p.n_embd, Role::kAttnOutput, i);
      norm(b + "ffn_norm.weight");
      matrix(b + "ffn_up.weight", p.n_embd, 2 * uint64_t{p.n_ff}, Role::kOtherMatrix, i);
      matrix(b + "ffn_down.weight", p.n_ff, p.n_embd, Role::kFfnDown, i);
      continue;
    }
    if (deepseek) {  // MLA, then a dense or a mixture-of-experts feed-forward
      const uint64_t nope = p.HeadDim() - p.rope_dim;
      auto ones = [&](std::string name, uint64_t n) {
        plan.tensors.push_back(SynthTensor{std::move(name), {n}, TensorType::kF32, 0.0f});
      };
      if (p.q_lora_rank > 0) {
        matrix(b + "attn_q_a.weight", p.n_embd, p.q_lora_rank, Role::kOtherMatrix, i);
        ones(b + "attn_q_a_norm.weight", p.q_lora_rank);
        matrix(b + "attn_q_b.weight", p.q_lora_rank, q_dim, Role::kOtherMatrix, i);
      } else {
        matrix(b + "attn_q.weight", p.n_embd, q_dim, Role::kOtherMatrix, i);
      }
      matrix(b + "attn_kv_a_mqa.weight", p.n_embd, p.kv_lora_rank + p.rope_dim, Role::kOtherMatrix,
             i);
      ones(b + "attn_kv_a_norm.weight", p.kv_lora_rank);
      matrix(b + "attn_kv_b.weight", p.kv_lora_rank, p.n_head * (nope + p.value_dim),
             Role::kOtherMatrix, i);
      matrix(b + "attn_output.weight", uint64_t{p.n_head} * p.value_dim, p.n_embd,
             Role::kAttnOutput, i);
      norm(b + "ffn_norm.weight");
      if (static_cast<uint32_t>(i) < p.n_dense_lead) {
        matrix(b + "ffn_gate.weight", p.n_embd, p.n_ff, Role::kOtherMatrix, i);
        matrix(b + "ffn_up.weight", p.n_embd, p.n_ff, Role::kOtherMatrix, i);
        matrix(b + "ffn_down.weight", p.n_ff, p.n_embd, Role::kFfnDown, i);
        continue;
      }
      const uint64_t n_ff_shexp = uint64_t{p.n_ff_exp} * p.n_expert_shared;
      plan.tensors.push_back(SynthTensor{
          b + "ffn_gate_inp.weight", {p.n_embd, p.n_expert}, TensorType::kF32, p.weight_stddev});
      if (p.probs_bias) vector(b + "exp_probs_b.bias", p.n_expert);
      experts(b + "ffn_gate_exps.weight", p.n_embd, p.n_ff_exp, Role::kOtherMatrix, i);
      experts(b + "ffn_up_exps.weight", p.n_embd, p.n_ff_exp, Role::kOtherMatrix, i);
      experts(b + "ffn_down_exps.weight", p.n_ff_exp, p.n_embd, Role::kFfnDown, i);
      matrix(b + "ffn_gate_shexp.weight", p.n_embd, n_ff_shexp, Role::kOtherMatrix, i);
      matrix(b + "ffn_up_shexp.weight", p.n_embd, n_ff_shexp, Role::kOtherMatrix, i);
      matrix(b + "ffn_down_shexp.weight", n_ff_shexp, p.n_embd, Role::kFfnDown, i);
      continue;
    }
    matrix(b + "attn_q.weight", p.n_embd, q_dim, Role::kOtherMatrix, i);
    matrix(b + "attn_k.weight", p.n_embd, n_embd_kv, Role::kOtherMatrix, i);
    matrix(b + "attn_v.weight", p.n_embd, n_embd_kv, Role::kAttnV, i);
    if (qwen) {  // convert_hf_to_gguf's order: the biases after the matrices
      vector(b + "attn_q.bias", q_dim);
      vector(b + "attn_k.bias", n_embd_kv);
      vector(b + "attn_v.bias", n_embd_kv);
    }
    matrix(b + "attn_output.weight", q_dim, p.n_embd, Role::kAttnOutput, i);
    if (qk_norm) {
      plan.tensors.push_back(
          SynthTensor{b + "attn_k_norm.weight", {p.HeadDim()}, TensorType::kF32, 0.0f});
      plan.tensors.push_back(
          SynthTensor{b + "attn_q_norm.weight", {p.HeadDim()}, TensorType::kF32, 0.0f});
    }
    if (gemma) norm(b + "post_attention_norm.weight");
    norm(b + "ffn_norm.weight");
    if (p.n_expert > 0) {
      // The router stays f32 (convert_hf_to_gguf writes it so, and
      // llama-quantize never quantizes ffn_gate_inp).
      plan.tensors.push_back(SynthTensor{
          b + "ffn_gate_inp.weight", {p.n_embd, p.n_expert}, TensorType::kF32, p.weight_stddev});
      experts(b + "ffn_gate_exps.weight", p.n_embd, p.n_ff, Role::kOtherMatrix, i);
      experts(b + "ffn_up_exps.weight", p.n_embd, p.n_ff, Role::kOtherMatrix, i);
      experts(b + "ffn_down_exps.weight", p.n_ff, p.n_embd, Role::kFfnDown, i);
      if (p.n_ff_shexp > 0) {
        vector(b + "ffn_gate_inp_shexp.weight", p.n_embd);
        matrix(b + "ffn_gate_shexp.weight", p.n_embd, p.n_ff_shexp, Role::kOtherMatrix, i);
        matrix(b + "ffn_up_shexp.weight", p.n_embd, p.n_ff_shexp, Role::kOtherMatrix, i);
        matrix(b + "ffn_down_shexp.weight", p.n_ff_shexp, p.n_embd, Role::kFfnDown, i);
      }
      continue;
    }
    matrix(b + "ffn_gate.weight", p.n_embd, p.n_ff, Role::kOtherMatrix, i);
    matrix(b + "ffn_up.weight", p.n_embd, p.n_ff, Role::kOtherMatrix, i);
    matrix(b + "ffn_down.weight", p.n_ff, p.n_embd, Role::kFfnDown, i);
    if (gemma) norm(b + "post_ffw_norm.weight");
  }
  norm("output_norm.weight");
  if (!p.tied_output) matrix("output.weight", p.n_embd, p.n_vocab, Role::kOutput, 0);
  return plan;
}

}  // namespace

Vocabulary SynthVocabulary(uint32_t n_vocab) {
  Vocabulary v;
  v.model = "llama";
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  auto add = [&](std::string piece, float score, TokenType type) {
    v.pieces.push_back(std::move(piece));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0.0f, TokenType::kUnknown);
  add("<s>", 0.0f, TokenType::kControl);
  add("</s>", 0.0f, TokenType::kControl);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    add(buf, 0.0f, TokenType::kByte);
  }
  // Normal pieces, most "frequent" (highest score) first: "▁", then every
  // single character with and without the space mark, then lowercase words
  // of 2, 3, ... letters. All distinct by construction.
  const std::string kSpace = "\xE2\x96\x81";  // U+2581
  float score = 0.0f;
  auto add_normal = [&](const std::string& piece) {
    if (v.pieces.size() < n_vocab) add(piece, score -= 1.0f, TokenType::kNormal);
  };
  add_normal(kSpace);
  const std::string singles =
      "etaoinshrdlucmfwypvbgkjqxzETAOINSHRDLUCMFWYPVBGKJQXZ0123456789.,!?'\"-:;()";
  for (char c : singles) {
    add_normal(kSpace + c);
    add_normal(std::string(1, c));
  }
  for (int len = 2; v.pieces.size() < n_vocab; ++len) {
    uint64_t count = 1;
    for (int i = 0; i < len; ++i) count *= 26;
    for (uint64_t k = 0; k < count && v.pieces.size() < n_vocab; ++k) {
      std::string word(len, 'a');
      uint64_t x = k;
      for (int i = len - 1; i >= 0; --i, x /= 26) word[i] = static_cast<char>('a' + x % 26);
      add_normal(kSpace + word);
      add_normal(word);
    }
  }
  return v;
}

}  // namespace ringlm
