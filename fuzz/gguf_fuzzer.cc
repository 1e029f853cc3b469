// libFuzzer target: the GGUF parser (gguf/gguf_file.h), through
// GgufFile::FromBytes (the same parser Open runs over a mapping), and the two
// readers of untrusted metadata that every model load runs next:
// ModelConfig::FromGguf and LoadVocabulary + Tokenizer::Create.
//
// Checks, for every input:
//  - A rejection is DataLoss (malformed) or Unimplemented (other version).
//  - An accepted file keeps the header's guarantees: version 2 or 3, a
//    power-of-two alignment, unique non-empty keys and tensor names that
//    Find/FindTensor return, tensors of 1..4 non-zero dims whose element and
//    byte counts follow from the shape and type, aligned offsets, data inside
//    the file and not overlapping. Every metadata value is walked (nested
//    arrays included) through every accessor, every string byte and every
//    tensor byte is read, so ASan flags any view that leaves the buffer; the
//    typed getters agree with the value types.
//  - An accepted ModelConfig is self-consistent (heads divide the width
//    unless key_length sets the head size, n_rot even and <= head_dim,
//    1 <= experts used <= experts, n_vocab from token_embd.weight; on
//    deepseek2 a latent, n_rot < head_dim and a KV head per head).
//  - A vocabulary the loader and Tokenizer::Create accept tokenizes arbitrary
//    bytes (a slice of the input) to valid ids, and streams them back as
//    valid UTF-8.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "fuzz/utf8_check.h"
#include "gguf/gguf_file.h"
#include "gguf/tensor_type.h"
#include "inference/model_config.h"
#include "inference/tokenizer/tokenizer.h"
#include "inference/vocabulary_loader.h"

namespace ringlm {
namespace {

// Reads every byte so that ASan checks the whole range; the sum keeps the
// reads from being optimized away.
volatile uint8_t g_sink = 0;
void Touch(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  uint8_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum = static_cast<uint8_t>(sum + b[i]);
  g_sink = static_cast<uint8_t>(g_sink + sum);
}

void WalkValue(const GgufValue& v, int depth) {
  FUZZ_CHECK(depth <= GgufFile::kMaxArrayDepth);
  (void)v.DebugString();
  (void)v.AsUint64();
  (void)v.AsInt64();
  (void)v.AsDouble();
  (void)v.AsBool();
  FUZZ_CHECK(v.TryUint64().has_value() <= v.is_integer());
  FUZZ_CHECK(v.TryInt64().has_value() <= v.is_integer());
  (void)v.TryDouble();
  const std::string_view s = v.AsString();
  Touch(s.data(), s.size());
  if (v.type() == GgufValueType::kString) FUZZ_CHECK(s.size() <= GgufFile::kMaxStringLength);
  if (v.type() != GgufValueType::kArray) return;
  FUZZ_CHECK(GgufValueTypeName(v.array_type()) != "unknown");
  for (uint64_t i = 0; i < v.array_size(); ++i) {
    const GgufValue e = v.array_element(i);
    FUZZ_CHECK(e.type() == v.array_type());
    WalkValue(e, depth + 1);
  }
  // Past the end: the documented placeholder, not a read.
  FUZZ_CHECK(v.array_element(v.array_size()).type() == GgufValueType::kUint8);
}

// The typed getters succeed exactly for the types they document.
void CheckGetters(const GgufFile& f, const std::string& key, const GgufValue& v) {
  const GgufValueType t = v.type();
  const bool is_array = t == GgufValueType::kArray;
  FUZZ_CHECK(f.GetString(key).ok() == (t == GgufValueType::kString));
  FUZZ_CHECK(f.GetBool(key).ok() == (t == GgufValueType::kBool));
  const bool is_float = t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64;
  FUZZ_CHECK(f.GetFloat(key).ok() == (is_float || v.is_integer()));
  FUZZ_CHECK(f.GetUint(key).ok() == v.TryUint64().has_value());
  FUZZ_CHECK(f.GetInt(key).ok() == v.TryInt64().has_value());
  absl::StatusOr<std::vector<std::string_view>> strings = f.GetStringArray(key);
  FUZZ_CHECK(strings.ok() == (is_array && v.array_type() == GgufValueType::kString));
  if (strings.ok()) {
    FUZZ_CHECK(strings->size() == v.array_size());
    for (std::string_view s : *strings) Touch(s.data(), s.size());
  }
  absl::StatusOr<std::vector<float>> floats = f.GetFloatArray(key);
  if (floats.ok()) FUZZ_CHECK(floats->size() == v.array_size());
  absl::StatusOr<std::vector<int64_t>> ints = f.GetIntArray(key);
  if (ints.ok()) FUZZ_CHECK(is_array && ints->size() == v.array_size());
}

void CheckTensors(const GgufFile& f) {
  const std::vector<GgufTensorInfo>& tensors = f.tensors();
  const uint8_t* base = nullptr;  // where the file's bytes start, per every tensor
  for (const GgufTensorInfo& t : tensors) {
    FUZZ_CHECK(!t.name.empty());
    FUZZ_CHECK(f.FindTensor(t.name) == &t);
    FUZZ_CHECK(f.RequireTensor(t.name).ok());
    FUZZ_CHECK(!t.dims.empty() && t.dims.size() <= GgufFile::kMaxDims);
    uint64_t n = 1;
    for (uint64_t d : t.dims) {
      FUZZ_CHECK(d != 0);
      FUZZ_CHECK(!__builtin_mul_overflow(n, d, &n));
    }
    FUZZ_CHECK(n == t.n_elements);
    const auto traits = LookupTensorType(static_cast<uint32_t>(t.type));
    FUZZ_CHECK(traits.has_value());
    FUZZ_CHECK(t.dims[0] % traits->block_size == 0);
    FUZZ_CHECK(t.n_bytes == n / traits->block_size * traits->block_bytes);
    FUZZ_CHECK(t.rows() * t.dims[0] == n);
    FUZZ_CHECK(t.offset % f.alignment() == 0);
    FUZZ_CHECK(t.offset <= f.file_size() - f.data_offset());
    FUZZ_CHECK(t.n_bytes <= f.file_size() - f.data_offset() - t.offset);
    FUZZ_CHECK(t.data != nullptr);
    const uint8_t* b = t.data - f.data_offset() - t.offset;
    FUZZ_CHECK(base == nullptr || b == base);
    base = b;
    Touch(t.data, t.n_bytes);
    f.Prefetch(t);  // no-ops for FromBytes; must not touch anything
    f.Release(t);
  }
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    FUZZ_CHECK(by_offset[i - 1]->offset + by_offset[i - 1]->n_bytes <= by_offset[i]->offset);
  }
}

void CheckModelConfig(const GgufFile& f) {
  absl::StatusOr<ModelConfig> c = ModelConfig::FromGguf(f);
  if (!c.ok()) return;
  FUZZ_CHECK(
      c->architecture == "llama" || c->architecture == "qwen2" || c->architecture == "qwen2moe" ||
      c->architecture == "qwen3" || c->architecture == "qwen3moe" || c->architecture == "gemma2" ||
      c->architecture == "gemma3" || c->architecture == "phi3" || c->architecture == "deepseek2");
  // DeepSeek's MLA: a latent, a rotated part narrower than the key, one KV
  // head per head, the dense lead inside the model, a finite YaRN stretch
  // and attention scale. Values as wide as keys elsewhere.
  FUZZ_CHECK(c->head_dim_v >= 1);
  FUZZ_CHECK(c->is_mla() || c->head_dim_v == c->head_dim);
  FUZZ_CHECK(!c->is_mla() || (c->n_rot < c->head_dim && c->n_head_kv == c->n_head));
  FUZZ_CHECK(c->n_layer_dense_lead <= c->n_layer);
  FUZZ_CHECK(c->rope_yarn.freq_scale > 0 && std::isfinite(c->rope_yarn.freq_scale));
  FUZZ_CHECK(std::isfinite(c->kq_scale) && std::isfinite(c->expert_weights_scale));
  // Phi-3: Q is n_embd rows of attn_qkv, and LongRoPE's factor is positive.
  FUZZ_CHECK(!c->fused_qkv || c->head_dim * c->n_head == c->n_embd);
  FUZZ_CHECK(c->rope_attn_factor > 0 && std::isfinite(c->rope_attn_factor));
  // Gemma 2's soft-caps are positive (0: none elsewhere), and its window too.
  FUZZ_CHECK(c->attn_softcap >= 0 && c->final_softcap >= 0);
  FUZZ_CHECK(c->swa_period == 0 || c->n_swa >= 1);
  FUZZ_CHECK(c->n_layer >= 1 && c->n_embd >= 1 && c->n_ff >= 1 && c->n_ctx_train >= 1);
  FUZZ_CHECK(c->n_head >= 1 && c->n_head_kv >= 1);
  FUZZ_CHECK(c->n_head % c->n_head_kv == 0);
  // The head size is attention.key_length when the file gives one.
  const std::string key_length = c->architecture + ".attention.key_length";
  FUZZ_CHECK(c->head_dim >= 1);
  FUZZ_CHECK(f.Find(key_length) != nullptr || c->head_dim * c->n_head == c->n_embd);
  // Experts: none, or 1 <= used <= count <= 256 with a non-zero width.
  FUZZ_CHECK(c->n_expert <= 256 && c->n_expert_used <= c->n_expert);
  FUZZ_CHECK(c->n_expert == 0 || (c->n_expert_used >= 1 && c->n_ff_exp >= 1));
  FUZZ_CHECK(c->n_rot <= c->head_dim && c->n_rot % 2 == 0);
  FUZZ_CHECK(c->rope_freq_base > 0);
  FUZZ_CHECK(c->rms_eps > 0 && c->rms_eps < 1);
  const GgufTensorInfo* embd = f.FindTensor("token_embd.weight");
  FUZZ_CHECK(embd != nullptr && embd->dims.size() == 2 && embd->dims[1] == c->n_vocab);
}

void CheckTokenizer(const GgufFile& f, std::string_view text) {
  absl::StatusOr<Vocabulary> vocab = LoadVocabulary(f);
  if (!vocab.ok()) return;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Create(*std::move(vocab));
  if (!tokenizer.ok()) return;
  const Tokenizer& tok = **tokenizer;
  for (bool parse_special : {false, true}) {
    const std::vector<int32_t> ids = tok.Encode(text, /*add_special=*/true, parse_special);
    for (int32_t id : ids) FUZZ_CHECK(tok.IsValid(id));
    StreamingDecoder decoder(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += decoder.Push(id);
    streamed += decoder.Flush();
    FUZZ_CHECK(fuzz::IsStrictUtf8(streamed));
    (void)tok.Decode(ids);
  }
  // Every piece, and the ids just outside the vocabulary.
  const int32_t n = std::min(tok.n_vocab(), 4096);
  for (int32_t id = -1; id <= n; ++id) (void)tok.TokenToPiece(id);
  FUZZ_CHECK(tok.TokenToPiece(tok.n_vocab()).empty());
}

}  // namespace
}  // namespace ringlm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringlm;
  absl::StatusOr<std::unique_ptr<GgufFile>> file =
      GgufFile::FromBytes(std::string(reinterpret_cast<const char*>(data), size));
  if (!file.ok()) {
    const absl::StatusCode code = file.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kUnimplemented);
    return 0;
  }
  const GgufFile& f = **file;
  FUZZ_CHECK(f.version() == 2 || f.version() == 3);
  const uint64_t a = f.alignment();
  FUZZ_CHECK(a != 0 && (a & (a - 1)) == 0);
  FUZZ_CHECK(f.file_size() == size);
  FUZZ_CHECK(f.data_offset() <= f.file_size());
  FUZZ_CHECK(f.data_offset() % a == 0 || (f.tensors().empty() && f.data_offset() == size));

  const auto& metadata = f.metadata();
  for (size_t i = 0; i < metadata.size(); ++i) {
    const auto& [key, value] = metadata[i];
    FUZZ_CHECK(!key.empty());
    FUZZ_CHECK(f.Find(key) == &metadata[i].second);
    WalkValue(value, 0);
    CheckGetters(f, key, value);
  }
  CheckTensors(f);
  CheckModelConfig(f);
  // Text to tokenize: the input's last bytes (arbitrary, often not UTF-8).
  const size_t n = std::min<size_t>(size, 256);
  CheckTokenizer(f, std::string_view(reinterpret_cast<const char*>(data) + size - n, n));
  return 0;
}
