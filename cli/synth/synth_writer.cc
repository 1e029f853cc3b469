// WriteSynthModel: the GGUF header through GgufWriter, then tensor data
// generated, quantized and appended a few MiB at a time.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <span>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "cli/synth/synth_model.h"
#include "gguf/gguf_writer.h"
#include "inference/ops/quant.h"
#include "inference/ops/thread_pool.h"

namespace ringlm {
namespace {

constexpr uint32_t kAlignment = 32;
constexpr uint64_t kChunkBytes = 8ull << 20;  // output bytes generated per write

uint64_t Mix64(uint64_t x) {  // splitmix64's finalizer
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Fills row `row` of tensor `tensor_index` with values of mean 0 and standard
// deviation `stddev`: each value is a centred sum of four 16-bit uniforms
// (Irwin-Hall, close to normal, bounded at ±2*sqrt(3) sigma), drawn from a
// splitmix64 stream seeded by (seed, tensor, row) only.
void FillRow(uint64_t seed, uint64_t tensor_index, uint64_t row, float stddev, float* out,
             int64_t n) {
  if (stddev == 0.0f) {  // a norm weight
    for (int64_t i = 0; i < n; ++i) out[i] = 1.0f;
    return;
  }
  uint64_t state = Mix64(Mix64(seed * 0x9E3779B97F4A7C15ull + tensor_index) ^ (row + 1));
  const float scale = stddev * std::sqrt(3.0f) / 65536.0f;
  for (int64_t i = 0; i < n; ++i) {
    state += 0x9E3779B97F4A7C15ull;
    const uint64_t r = Mix64(state);
    const int64_t sum = static_cast<int64_t>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) +
                                             ((r >> 32) & 0xFFFF) + (r >> 48));
    out[i] = static_cast<float>(sum - 131070) * scale;  // 131070 = 4 * 65535 / 2
  }
}

absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot write '", path, "'"));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

void PutLe(std::string* out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t Padding(uint64_t n) { return (kAlignment - n % kAlignment) % kAlignment; }

// The tokenizer.ggml.* keys (and the chat template) of `t`, as llama.cpp's
// converter writes them: scores only for "llama", merges and pre only for
// "gpt2", special ids only when there is one.
void SetTokenizer(const SynthTokenizer& t, GgufWriter& w) {
  const Vocabulary& v = t.vocab;
  w.SetString("tokenizer.ggml.model", v.model);
  if (v.model == "gpt2") w.SetString("tokenizer.ggml.pre", v.pre);
  w.SetStringArray("tokenizer.ggml.tokens", v.pieces);
  if (v.model != "gpt2") w.SetFloatArray("tokenizer.ggml.scores", v.scores);
  std::vector<int32_t> types(v.types.size());
  for (size_t i = 0; i < types.size(); ++i) types[i] = static_cast<int32_t>(v.types[i]);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  if (v.model == "gpt2") w.SetStringArray("tokenizer.ggml.merges", v.merges);
  auto id = [&](const char* key, int32_t value) {
    if (value >= 0) w.SetUint32(key, static_cast<uint32_t>(value));
  };
  id("tokenizer.ggml.bos_token_id", v.bos_id);
  id("tokenizer.ggml.eos_token_id", v.eos_id);
  id("tokenizer.ggml.unknown_token_id", v.unk_id);
  id("tokenizer.ggml.padding_token_id", v.pad_id);
  id("tokenizer.ggml.eot_token_id", v.eot_id);
  id("tokenizer.ggml.eom_token_id", v.eom_id);
  w.SetBool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.SetBool("tokenizer.ggml.add_eos_token", v.add_eos);
  w.SetBool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  if (!t.chat_template.empty()) w.SetString("tokenizer.chat_template", t.chat_template);
}

// The built-in SentencePiece-style vocabulary (SynthVocabulary). A phi3
// model's last piece is Phi-3's control token <|endoftext|>: llama.cpp
// c392e50 looks it up in any model named like Phi-3, and fails without it.
void SetSynthVocabulary(uint32_t n_vocab, const std::string& architecture, GgufWriter& w) {
  Vocabulary v = SynthVocabulary(n_vocab);
  if (architecture == "phi3") {
    v.pieces.back() = "<|endoftext|>";
    v.scores.back() = 0.0f;
    v.types.back() = TokenType::kControl;
  }
  w.SetString("tokenizer.ggml.model", v.model);
  w.SetStringArray("tokenizer.ggml.tokens", v.pieces);
  w.SetFloatArray("tokenizer.ggml.scores", v.scores);
  std::vector<int32_t> types(v.types.size());
  for (size_t i = 0; i < types.size(); ++i) types[i] = static_cast<int32_t>(v.types[i]);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
  w.SetUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
  w.SetUint32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk_id));
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetBool("tokenizer.ggml.add_eos_token", false);
}

// DeepSeek's keys (convert_hf_to_gguf's DeepseekV2Model): the MLA ranks,
// the dense lead, the shared experts, the router's gating and weights
// (gating 1 softmax, 2 sigmoid: llama.cpp's llama_expert_gating_func_type),
// and YaRN.
void SetDeepSeekMetadata(const SynthPreset& p, GgufWriter& w) {
  const std::string a = p.architecture + ".";
  w.SetUint32(a + "leading_dense_block_count", p.n_dense_lead);
  if (p.q_lora_rank > 0) w.SetUint32(a + "attention.q_lora_rank", p.q_lora_rank);
  w.SetUint32(a + "attention.kv_lora_rank", p.kv_lora_rank);
  w.SetUint32(a + "expert_feed_forward_length", p.n_ff_exp);
  w.SetUint32(a + "expert_shared_count", p.n_expert_shared);
  w.SetFloat32(a + "expert_weights_scale", p.expert_weights_scale);
  w.SetBool(a + "expert_weights_norm", p.expert_weights_norm);
  w.SetUint32(a + "expert_gating_func", p.sigmoid_gating ? 2 : 1);
  if (p.yarn_factor > 0) {
    w.SetString(a + "rope.scaling.type", "yarn");
    w.SetFloat32(a + "rope.scaling.factor", p.yarn_factor);
    w.SetUint32(a + "rope.scaling.original_context_length", p.n_ctx_orig);
  }
  w.SetFloat32(a + "rope.scaling.yarn_log_multiplier", p.yarn_log_mul);
}

// The metadata of the model, in the order llama.cpp's converter writes it.
void SetMetadata(const SynthPlan& plan, uint64_t seed, const SynthTokenizer* tokenizer,
                 GgufWriter& w) {
  const SynthPreset& p = plan.preset;
  const std::string a = p.architecture + ".";
  w.SetString("general.architecture", p.architecture);
  w.SetString("general.type", "model");
  w.SetString("general.name", "synth-" + p.name);
  // Files of other seeds hold other weights: their headers, hence their
  // fingerprints, must differ too.
  w.SetUint64("ringlm.synth.seed", seed);
  w.SetUint32(a + "block_count", p.n_layer);
  w.SetUint32(a + "context_length", p.n_ctx);
  w.SetUint32(a + "embedding_length", p.n_embd);
  w.SetUint32(a + "feed_forward_length", p.n_ff);
  w.SetUint32(a + "attention.head_count", p.n_head);
  w.SetUint32(a + "attention.head_count_kv", p.n_head_kv);
  if (p.n_expert > 0) {
    w.SetUint32(a + "expert_count", p.n_expert);
    w.SetUint32(a + "expert_used_count", p.n_expert_used);
  }
  if (p.architecture == "qwen2moe" || p.architecture == "qwen3moe") {
    w.SetUint32(a + "expert_feed_forward_length", p.n_ff);
  }
  if (p.architecture == "qwen2moe") {
    w.SetUint32(a + "expert_shared_feed_forward_length", p.n_ff_shexp);
  }
  w.SetFloat32(a + "rope.freq_base", p.rope_freq_base);
  w.SetFloat32(a + "attention.layer_norm_rms_epsilon", p.rms_eps);
  w.SetUint32("general.file_type", LlamaFileType(plan.base_type));
  w.SetUint32(a + "vocab_size", p.n_vocab);
  const bool deepseek = p.architecture == "deepseek2";
  w.SetUint32(a + "rope.dimension_count", deepseek ? p.rope_dim : p.HeadDim());
  if (p.head_dim != 0) {
    w.SetUint32(a + "attention.key_length", p.head_dim);
    w.SetUint32(a + "attention.value_length", deepseek ? p.value_dim : p.head_dim);
  }
  if (deepseek) SetDeepSeekMetadata(p, w);
  if (p.architecture == "gemma2") {
    w.SetFloat32(a + "attn_logit_softcapping", p.attn_softcap);
    w.SetFloat32(a + "final_logit_softcapping", p.final_softcap);
  }
  if (p.architecture == "gemma2" || p.architecture == "gemma3" || p.architecture == "phi3") {
    w.SetUint32(a + "attention.sliding_window", p.n_swa);
  }
  if (p.architecture == "phi3" && p.n_ctx_orig != 0) {  // LongRoPE, as convert_hf_to_gguf writes it
    w.SetFloat32(a + "rope.scaling.attn_factor", p.rope_attn_factor);
    w.SetUint32(a + "rope.scaling.original_context_length", p.n_ctx_orig);
  }
  if (tokenizer != nullptr) {
    SetTokenizer(*tokenizer, w);
  } else {
    SetSynthVocabulary(p.n_vocab, p.architecture, w);
  }
  w.SetUint32("general.quantization_version", 2);
}

// Header, metadata, tensor table and padding up to the data section. The
// metadata is encoded by GgufWriter (serialized with alignment 1 and no
// tensors, i.e. without padding); the tensor count is then patched into the
// fixed GGUF v3 header (magic, u32 version, u64 n_tensors at byte 8, u64
// n_kv) and the tensor table appended, with offsets computed from the plan,
// so no tensor bytes need to be held.
absl::StatusOr<std::string> HeaderBytes(const SynthPlan& plan, uint64_t seed,
                                        const SynthTokenizer* tokenizer) {
  GgufWriter w;
  RINGLM_RETURN_IF_ERROR(w.SetAlignment(1));
  w.Remove("general.alignment");  // the file itself uses the default, 32
  SetMetadata(plan, seed, tokenizer, w);
  std::string out = w.ToBytes();
  std::string count;
  PutLe(&count, plan.tensors.size(), 8);
  out.replace(8, 8, count);
  uint64_t offset = 0;
  for (const SynthTensor& t : plan.tensors) {
    PutLe(&out, t.name.size(), 8);
    out += t.name;
    PutLe(&out, t.dims.size(), 4);
    for (uint64_t d : t.dims) PutLe(&out, d, 8);
    PutLe(&out, static_cast<uint32_t>(t.type), 4);
    PutLe(&out, offset, 8);
    offset += t.n_bytes() + Padding(t.n_bytes());
  }
  out.append(Padding(out.size()), '\0');
  return out;
}

// Generates tensor `index` of the plan and appends it (and its padding).
absl::Status WriteTensor(const SynthPlan& plan, size_t index, uint64_t seed, ThreadPool& pool,
                         int fd, const std::string& path, uint64_t* done, uint64_t total,
                         const SynthProgress& progress) {
  const SynthTensor& t = plan.tensors[index];
  const int64_t cols = static_cast<int64_t>(t.dims[0]);
  const uint64_t rows = t.n_elements() / t.dims[0];
  const size_t row_bytes = RowBytes(t.type, cols);
  const uint64_t chunk_rows = std::max<uint64_t>(1, kChunkBytes / row_bytes);
  std::string buffer;
  for (uint64_t first = 0; first < rows; first += chunk_rows) {
    const uint64_t n = std::min(chunk_rows, rows - first);
    buffer.resize(n * row_bytes);
    pool.ParallelFor(static_cast<int64_t>(n), [&](int64_t begin, int64_t end) {
      std::vector<float> values(static_cast<size_t>(cols));
      for (int64_t r = begin; r < end; ++r) {
        FillRow(seed, index, first + r, t.stddev, values.data(), cols);
        for (float& v : values) v += t.mean;
        QuantizeRow(t.type, values.data(), buffer.data() + r * row_bytes, cols);
      }
    });
    RINGLM_RETURN_IF_ERROR(WriteAll(fd, buffer, path));
    *done += buffer.size();
    if (progress) progress(*done, total);
  }
  return WriteAll(fd, std::string(Padding(t.n_bytes()), '\0'), path);
}

}  // namespace

absl::Status WriteSynthModel(const SynthOptions& options, const std::string& path,
                             const SynthProgress& progress) {
  RINGLM_ASSIGN_OR_RETURN(const SynthPlan plan, PlanSynthModel(options));
  for (const SynthTensor& t : plan.tensors) {
    if (!IsComputeSupported(t.type)) {
      return absl::UnimplementedError(
          absl::StrCat("type ", std::string(TraitsOf(t.type).name), " (needed by ", t.name,
                       ") has no quantizer and kernels yet; available: f32, f16, q8_0, q4_0"));
    }
  }
  RINGLM_ASSIGN_OR_RETURN(const std::string header,
                          HeaderBytes(plan, options.seed, options.tokenizer.get()));
  ThreadPool pool(options.threads > 0 ? options.threads : DefaultThreadCount());

  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create '", tmp, "'"));
  absl::Status s = WriteAll(fd, header, tmp);
  uint64_t done = 0;
  const uint64_t total = plan.data_bytes();
  for (size_t i = 0; s.ok() && i < plan.tensors.size(); ++i) {
    s = WriteTensor(plan, i, options.seed, pool, fd, tmp, &done, total, progress);
  }
  if (s.ok() && ::fsync(fd) != 0) {
    s = absl::ErrnoToStatus(errno, absl::StrCat("cannot sync '", tmp, "'"));
  }
  if (::close(fd) != 0 && s.ok()) {
    s = absl::ErrnoToStatus(errno, absl::StrCat("cannot close '", tmp, "'"));
  }
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = absl::ErrnoToStatus(errno, absl::StrCat("cannot rename '", tmp, "' to '", path, "'"));
  }
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

}  // namespace ringlm
