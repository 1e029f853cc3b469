#include "inference/stage_weights.h"

#include <algorithm>
#include <cassert>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "inference/ops/quant.h"
#include "inference/packed_weights.h"

namespace ringlm {
namespace {

std::string ShapeString(const std::vector<uint64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// Finds `name` and checks its shape against `dims` (GGUF order, ne0 first).
absl::StatusOr<const GgufTensorInfo*> RequireShape(const GgufFile& file, const std::string& name,
                                                   const std::vector<uint64_t>& dims) {
  RINGLM_ASSIGN_OR_RETURN(const GgufTensorInfo* t, file.RequireTensor(name));
  if (t->dims != dims) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", name, "' has shape ", ShapeString(t->dims), ", expected ", ShapeString(dims)));
  }
  return t;
}

class Viewer {
 public:
  Viewer(const GgufFile& file, std::vector<const GgufTensorInfo*>& used, uint64_t& bytes)
      : file_(file), used_(used), bytes_(bytes) {}

  absl::StatusOr<WeightMatrix> Matrix(const std::string& name, uint64_t cols, uint64_t rows) {
    RINGLM_ASSIGN_OR_RETURN(const GgufTensorInfo* t, RequireShape(file_, name, {cols, rows}));
    RINGLM_RETURN_IF_ERROR(CheckComputeType(name, t->type));
    Use(t);
    return WeightMatrix{t->type, static_cast<int64_t>(rows), static_cast<int64_t>(cols), t->data};
  }

  // A 3-D expert tensor [cols, rows, n_expert].
  absl::StatusOr<ExpertMatrices> Experts(const std::string& name, uint64_t cols, uint64_t rows,
                                         uint64_t n_expert) {
    RINGLM_ASSIGN_OR_RETURN(const GgufTensorInfo* t,
                            RequireShape(file_, name, {cols, rows, n_expert}));
    RINGLM_RETURN_IF_ERROR(CheckComputeType(name, t->type));
    Use(t);
    return ExpertMatrices{t->type, static_cast<int64_t>(n_expert), static_cast<int64_t>(rows),
                          static_cast<int64_t>(cols), t->data};
  }

  bool Has(const std::string& name) const { return file_.FindTensor(name) != nullptr; }

  absl::StatusOr<const float*> Vector(const std::string& name, uint64_t n) {
    RINGLM_ASSIGN_OR_RETURN(const GgufTensorInfo* t, RequireShape(file_, name, {n}));
    if (t->type != TensorType::kF32) {
      return absl::UnimplementedError(absl::StrCat(
          "tensor '", name, "' has type ", std::string(TraitsOf(t->type).name), ", expected f32"));
    }
    if (reinterpret_cast<uintptr_t>(t->data) % alignof(float) != 0) {
      return absl::DataLossError(absl::StrCat("tensor '", name, "' data is misaligned"));
    }
    Use(t);
    return reinterpret_cast<const float*>(t->data);
  }

 private:
  static absl::Status CheckComputeType(const std::string& name, TensorType type) {
    if (IsComputeSupported(type)) return absl::OkStatus();
    return absl::UnimplementedError(absl::StrCat("tensor '", name, "' has type ",
                                                 std::string(TraitsOf(type).name),
                                                 ", which the kernels do not support yet"));
  }

  void Use(const GgufTensorInfo* t) {
    for (const GgufTensorInfo* u : used_) {
      if (u == t) return;
    }
    used_.push_back(t);
    bytes_ += t->n_bytes;
  }

  const GgufFile& file_;
  std::vector<const GgufTensorInfo*>& used_;
  uint64_t& bytes_;
};

std::string BlockName(uint32_t layer, const char* tensor) {
  return absl::StrCat("blk.", layer, ".", tensor, ".weight");
}
std::string BiasName(uint32_t layer, const char* tensor) {
  return absl::StrCat("blk.", layer, ".", tensor, ".bias");
}

// DeepSeek's MLA projections of block i: Q (plain, or through the q LoRA
// bottleneck when q_lora_rank > 0), the latent-and-RoPE-key projection, its
// norm, and the latent's expansion into every head's unrotated key and value.
// A tensor whose shape disagrees with the ranks and head sizes of the
// metadata is an InvalidArgument naming it.
absl::Status LoadMla(Viewer& view, const ModelConfig& c, uint32_t i, LayerWeights& l) {
  const uint64_t q_dim = uint64_t{c.n_head} * c.head_dim;
  if (c.q_lora_rank > 0) {
    RINGLM_ASSIGN_OR_RETURN(l.wq_a, view.Matrix(BlockName(i, "attn_q_a"), c.n_embd, c.q_lora_rank));
    RINGLM_ASSIGN_OR_RETURN(l.q_a_norm, view.Vector(BlockName(i, "attn_q_a_norm"), c.q_lora_rank));
    RINGLM_ASSIGN_OR_RETURN(l.wq_b, view.Matrix(BlockName(i, "attn_q_b"), c.q_lora_rank, q_dim));
  } else {
    RINGLM_ASSIGN_OR_RETURN(l.wq, view.Matrix(BlockName(i, "attn_q"), c.n_embd, q_dim));
  }
  RINGLM_ASSIGN_OR_RETURN(l.wkv_a, view.Matrix(BlockName(i, "attn_kv_a_mqa"), c.n_embd,
                                               uint64_t{c.kv_lora_rank} + c.n_rot));
  RINGLM_ASSIGN_OR_RETURN(l.kv_a_norm, view.Vector(BlockName(i, "attn_kv_a_norm"), c.kv_lora_rank));
  const uint64_t kv_b_rows = uint64_t{c.n_head} * (c.head_dim - c.n_rot + c.head_dim_v);
  RINGLM_ASSIGN_OR_RETURN(l.wkv_b,
                          view.Matrix(BlockName(i, "attn_kv_b"), c.kv_lora_rank, kv_b_rows));
  return absl::OkStatus();
}

// The attention projections of block i: Q, K and V, separate or (Phi-3)
// rows of one attn_qkv, whose shape must be [n_embd, q_dim + 2 kv_dim].
absl::Status LoadQkv(Viewer& view, const ModelConfig& c, uint32_t i, LayerWeights& l) {
  const uint64_t q_dim = uint64_t{c.n_head} * c.head_dim;
  const uint64_t kv_dim = c.n_embd_kv();
  if (c.is_mla()) return LoadMla(view, c, i, l);
  if (c.fused_qkv) {
    RINGLM_ASSIGN_OR_RETURN(const WeightMatrix qkv,
                            view.Matrix(BlockName(i, "attn_qkv"), c.n_embd, q_dim + 2 * kv_dim));
    l.wq = qkv.Rows(0, static_cast<int64_t>(q_dim));
    l.wk = qkv.Rows(static_cast<int64_t>(q_dim), static_cast<int64_t>(kv_dim));
    l.wv = qkv.Rows(static_cast<int64_t>(q_dim + kv_dim), static_cast<int64_t>(kv_dim));
    return absl::OkStatus();
  }
  RINGLM_ASSIGN_OR_RETURN(l.wq, view.Matrix(BlockName(i, "attn_q"), c.n_embd, q_dim));
  RINGLM_ASSIGN_OR_RETURN(l.wk, view.Matrix(BlockName(i, "attn_k"), c.n_embd, kv_dim));
  RINGLM_ASSIGN_OR_RETURN(l.wv, view.Matrix(BlockName(i, "attn_v"), c.n_embd, kv_dim));
  return absl::OkStatus();
}

// The feed-forward of block i: SwiGLU (gate and up separate, or on Phi-3
// the two halves of one ffn_up of shape [n_embd, 2 n_ff]), or a mixture of
// SwiGLU experts (and a shared one).
absl::Status LoadFeedForward(Viewer& view, const ModelConfig& c, uint32_t i, LayerWeights& l) {
  if (c.fused_gate_up) {
    RINGLM_ASSIGN_OR_RETURN(const WeightMatrix gate_up,
                            view.Matrix(BlockName(i, "ffn_up"), c.n_embd, 2 * uint64_t{c.n_ff}));
    l.gate = gate_up.Rows(0, c.n_ff);
    l.up = gate_up.Rows(c.n_ff, c.n_ff);
    RINGLM_ASSIGN_OR_RETURN(l.down, view.Matrix(BlockName(i, "ffn_down"), c.n_ff, c.n_embd));
    return absl::OkStatus();
  }
  if (!c.IsMoeLayer(i)) {
    RINGLM_ASSIGN_OR_RETURN(l.gate, view.Matrix(BlockName(i, "ffn_gate"), c.n_embd, c.n_ff));
    RINGLM_ASSIGN_OR_RETURN(l.up, view.Matrix(BlockName(i, "ffn_up"), c.n_embd, c.n_ff));
    RINGLM_ASSIGN_OR_RETURN(l.down, view.Matrix(BlockName(i, "ffn_down"), c.n_ff, c.n_embd));
    return absl::OkStatus();
  }
  MoeWeights& m = l.moe;
  RINGLM_ASSIGN_OR_RETURN(m.router,
                          view.Matrix(BlockName(i, "ffn_gate_inp"), c.n_embd, c.n_expert));
  if (c.architecture == "deepseek2") {  // optional, as llama.cpp has it (V3's)
    const std::string bias = BiasName(i, "exp_probs_b");
    if (view.Has(bias)) {
      RINGLM_ASSIGN_OR_RETURN(m.probs_bias, view.Vector(bias, c.n_expert));
    }
  }
  RINGLM_ASSIGN_OR_RETURN(
      m.gate, view.Experts(BlockName(i, "ffn_gate_exps"), c.n_embd, c.n_ff_exp, c.n_expert));
  RINGLM_ASSIGN_OR_RETURN(
      m.up, view.Experts(BlockName(i, "ffn_up_exps"), c.n_embd, c.n_ff_exp, c.n_expert));
  RINGLM_ASSIGN_OR_RETURN(
      m.down, view.Experts(BlockName(i, "ffn_down_exps"), c.n_ff_exp, c.n_embd, c.n_expert));
  if (c.n_ff_shexp == 0) return absl::OkStatus();
  if (c.shared_expert_gated) {
    RINGLM_ASSIGN_OR_RETURN(m.shared_gate_inp,
                            view.Vector(BlockName(i, "ffn_gate_inp_shexp"), c.n_embd));
  }
  RINGLM_ASSIGN_OR_RETURN(m.shared_gate,
                          view.Matrix(BlockName(i, "ffn_gate_shexp"), c.n_embd, c.n_ff_shexp));
  RINGLM_ASSIGN_OR_RETURN(m.shared_up,
                          view.Matrix(BlockName(i, "ffn_up_shexp"), c.n_embd, c.n_ff_shexp));
  RINGLM_ASSIGN_OR_RETURN(m.shared_down,
                          view.Matrix(BlockName(i, "ffn_down_shexp"), c.n_ff_shexp, c.n_embd));
  return absl::OkStatus();
}

}  // namespace

// Both layouts keep a group of 8 rows at its offset in the file, so a part
// that starts at a multiple of 8 rows starts where it does there.
WeightMatrix WeightMatrix::Rows(int64_t first, int64_t count) const {
  assert(layout == WeightLayout::kGguf || (first % 8 == 0 && count % 8 == 0));
  const int64_t row_bytes = static_cast<int64_t>(RowBytes(type, cols));
  return WeightMatrix{type, count, cols, static_cast<const uint8_t*>(data) + first * row_bytes,
                      layout};
}

WeightMatrix ExpertMatrices::Expert(int64_t e) const {
  const int64_t row_bytes = static_cast<int64_t>(RowBytes(type, cols));
  return WeightMatrix{type, rows, cols, static_cast<const uint8_t*>(data) + e * rows * row_bytes,
                      layout};
}

std::vector<StageWeights::PackItem> StageWeights::PackableMatrices() {
  std::vector<PackItem> items;
  // `rows`: of one matrix (an expert's, for all the experts of a tensor).
  auto add = [&](WeightMatrix* m, ExpertMatrices* e, const WeightMatrix& whole, int64_t rows) {
    const WeightLayout layout = FastestLayout(whole.type, rows);
    if (whole.data != nullptr && whole.layout == WeightLayout::kGguf &&
        layout != WeightLayout::kGguf) {
      items.push_back({m, e, whole, layout});
    }
  };
  for (LayerWeights& l : layers_) {
    for (WeightMatrix* m :
         {&l.wq, &l.wk, &l.wv, &l.wq_a, &l.wq_b, &l.wkv_a, &l.wkv_b, &l.wo, &l.gate, &l.up, &l.down,
          &l.moe.router, &l.moe.shared_gate, &l.moe.shared_up, &l.moe.shared_down}) {
      add(m, nullptr, *m, m->rows);
    }
    for (ExpertMatrices* e : {&l.moe.gate, &l.moe.up, &l.moe.down}) {
      add(nullptr, e, WeightMatrix{e->type, e->n_expert * e->rows, e->cols, e->data, e->layout},
          e->rows);
    }
  }
  // A tied head is the embedding, read by rows too.
  if (!tied_output_) add(&output_, nullptr, output_, output_.rows);
  return items;
}

void StageWeights::CopyVectors(absl::flat_hash_map<const GgufTensorInfo*, uint64_t>& copied,
                               const std::function<void(const GgufTensorInfo&)>& copied_whole) {
  auto copy = [&](const float*& v) {
    for (const GgufTensorInfo* t : tensors_) {
      if (v == nullptr || t->data != reinterpret_cast<const uint8_t*>(v)) continue;
      auto owned = std::make_shared<const std::vector<float>>(v, v + t->n_bytes / sizeof(float));
      v = owned->data();
      packed_.push_back(std::move(owned));
      copied[t] = t->n_bytes;
      if (copied_whole) copied_whole(*t);
      return;
    }
  };
  for (LayerWeights& l : layers_) {
    for (const float** v : {&l.attn_norm, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm, &l.q_a_norm,
                            &l.kv_a_norm, &l.ffn_norm, &l.attn_post_norm, &l.ffn_post_norm,
                            &l.moe.probs_bias, &l.moe.shared_gate_inp}) {
      copy(*v);
    }
  }
  for (const float** v : {&output_norm_, &rope_long_, &rope_short_}) copy(*v);
}

absl::Status StageWeights::Pack(PackedWeights& store, const LoadProgress& progress,
                                const std::function<void(const GgufTensorInfo&)>& copied_whole) {
  const std::vector<PackItem> items = PackableMatrices();
  auto bytes_of = [](const WeightMatrix& m) { return RowBytes(m.type, m.cols) * m.rows; };
  uint64_t total = 0;
  for (const PackItem& i : items) total += bytes_of(i.whole);
  // Bytes of each tensor now read from a copy: a tensor all of whose bytes
  // are is no longer read through the mapping.
  absl::flat_hash_map<const GgufTensorInfo*, uint64_t> copied;
  uint64_t done = 0;
  for (const PackItem& i : items) {
    std::shared_ptr<const void> holder;
    RINGLM_ASSIGN_OR_RETURN(WeightMatrix packed, store.Pack(i.whole, i.layout, &holder));
    packed_.push_back(std::move(holder));
    if (i.matrix != nullptr) {
      *i.matrix = packed;
    } else {
      i.experts->data = packed.data;
      i.experts->layout = packed.layout;
    }
    const auto* source = static_cast<const uint8_t*>(i.whole.data);
    for (const GgufTensorInfo* t : tensors_) {
      if (source < t->data || source >= t->data + t->n_bytes) continue;
      copied[t] += bytes_of(i.whole);
      if (copied[t] == t->n_bytes && copied_whole) copied_whole(*t);
    }
    done += bytes_of(i.whole);
    if (progress) progress(done, total);
  }
  // Then the small f32 vectors between them (norms, biases): read through
  // the mapping, each would map the pages around it (a page-cache folio,
  // up to megabytes) and with them the copied tensors' pages again.
  if (!items.empty()) CopyVectors(copied, copied_whole);
  std::erase_if(mapped_tensors_, [&](const GgufTensorInfo* t) {
    const auto it = copied.find(t);
    return it != copied.end() && it->second == t->n_bytes;
  });
  return absl::OkStatus();
}

absl::StatusOr<StageWeights> StageWeights::Load(const GgufFile& file, const ModelConfig& c,
                                                LayerRange range) {
  if (range.first >= range.last || range.last > c.n_layer) {
    return absl::InvalidArgumentError(absl::StrCat("layer range [", range.first, ", ", range.last,
                                                   ") is not inside [0, ", c.n_layer, ")"));
  }
  StageWeights w;
  w.range_ = range;
  w.is_last_ = range.last == c.n_layer;
  Viewer view(file, w.tensors_, w.bytes_);
  const uint64_t q_dim = uint64_t{c.n_head} * c.head_dim;
  const uint64_t kv_dim = c.n_embd_kv();

  if (w.is_first()) {
    RINGLM_ASSIGN_OR_RETURN(w.token_embd_, view.Matrix("token_embd.weight", c.n_embd, c.n_vocab));
  }
  // Phi-3's LongRoPE factors: both or neither (as llama.cpp, each optional).
  if (c.architecture == "phi3") {
    for (auto [name, factors] : {std::pair{"rope_factors_long.weight", &w.rope_long_},
                                 std::pair{"rope_factors_short.weight", &w.rope_short_}}) {
      if (file.FindTensor(name) == nullptr) continue;
      RINGLM_ASSIGN_OR_RETURN(*factors, view.Vector(name, c.n_rot / 2));
    }
  }
  for (uint32_t i = range.first; i < range.last; ++i) {
    LayerWeights l;
    RINGLM_ASSIGN_OR_RETURN(l.attn_norm, view.Vector(BlockName(i, "attn_norm"), c.n_embd));
    RINGLM_RETURN_IF_ERROR(LoadQkv(view, c, i, l));
    if (c.has_qkv_bias) {
      RINGLM_ASSIGN_OR_RETURN(l.bq, view.Vector(BiasName(i, "attn_q"), q_dim));
      RINGLM_ASSIGN_OR_RETURN(l.bk, view.Vector(BiasName(i, "attn_k"), kv_dim));
      RINGLM_ASSIGN_OR_RETURN(l.bv, view.Vector(BiasName(i, "attn_v"), kv_dim));
    }
    if (c.has_qk_norm) {
      RINGLM_ASSIGN_OR_RETURN(l.q_norm, view.Vector(BlockName(i, "attn_q_norm"), c.head_dim));
      RINGLM_ASSIGN_OR_RETURN(l.k_norm, view.Vector(BlockName(i, "attn_k_norm"), c.head_dim));
    }
    RINGLM_ASSIGN_OR_RETURN(l.wo, view.Matrix(BlockName(i, "attn_output"),
                                              uint64_t{c.n_head} * c.head_dim_v, c.n_embd));
    RINGLM_ASSIGN_OR_RETURN(l.ffn_norm, view.Vector(BlockName(i, "ffn_norm"), c.n_embd));
    RINGLM_RETURN_IF_ERROR(LoadFeedForward(view, c, i, l));
    if (c.has_post_norms) {
      RINGLM_ASSIGN_OR_RETURN(l.attn_post_norm,
                              view.Vector(BlockName(i, "post_attention_norm"), c.n_embd));
      RINGLM_ASSIGN_OR_RETURN(l.ffn_post_norm,
                              view.Vector(BlockName(i, "post_ffw_norm"), c.n_embd));
    }
    w.layers_.push_back(l);
  }
  if (w.is_last_) {
    RINGLM_ASSIGN_OR_RETURN(w.output_norm_, view.Vector("output_norm.weight", c.n_embd));
    w.tied_output_ = file.FindTensor("output.weight") == nullptr;
    RINGLM_ASSIGN_OR_RETURN(
        w.output_,
        view.Matrix(w.tied_output_ ? "token_embd.weight" : "output.weight", c.n_embd, c.n_vocab));
  }
  w.mapped_tensors_ = w.tensors_;
  return w;
}

absl::StatusOr<WeightFootprint> ComputeFootprint(const GgufFile& file, const ModelConfig& c) {
  WeightFootprint f;
  for (const GgufTensorInfo& t : file.tensors()) f.total_bytes += t.n_bytes;
  for (uint32_t i = 0; i < c.n_layer; ++i) {
    const std::string prefix = absl::StrCat("blk.", i, ".");
    uint64_t layer_bytes = 0;
    for (const GgufTensorInfo& t : file.tensors()) {
      if (t.name.rfind(prefix, 0) == 0) layer_bytes += t.n_bytes;
    }
    if (layer_bytes == 0) {
      return absl::NotFoundError(absl::StrCat("layer ", i, " has no tensors"));
    }
    f.layer_bytes.push_back(layer_bytes);
    f.max_layer_bytes = std::max(f.max_layer_bytes, layer_bytes);
  }
  RINGLM_ASSIGN_OR_RETURN(const GgufTensorInfo* embd, file.RequireTensor("token_embd.weight"));
  f.embedding_bytes = embd->n_bytes;
  RINGLM_ASSIGN_OR_RETURN(const GgufTensorInfo* norm, file.RequireTensor("output_norm.weight"));
  const GgufTensorInfo* out = file.FindTensor("output.weight");
  f.head_bytes = norm->n_bytes + (out != nullptr ? out->n_bytes : embd->n_bytes);
  return f;
}

}  // namespace ringlm
