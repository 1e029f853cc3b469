#include "inference/stage_engine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "inference/gemma_ops.h"
#include "inference/mla_attention.h"
#include "inference/moe_ffn.h"
#include "inference/ops/activations.h"
#include "inference/ops/attention.h"
#include "inference/ops/fp16.h"
#include "inference/ops/matmul.h"
#include "inference/ops/norm_rope.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

void AddBias(const float* bias, int64_t n_rows, int64_t dim, float* x) {
  if (bias == nullptr) return;
  for (int64_t t = 0; t < n_rows; ++t) {
    for (int64_t i = 0; i < dim; ++i) x[t * dim + i] += bias[i];
  }
}

// In place, RMSNorm of each of n_rows contiguous rows of `dim` values
// (ggml's rms_norm, then the mul): Qwen 3's per-head norms, Gemma's
// post-norms. Nothing when `weight` is null.
void NormRows(const float* weight, int64_t n_rows, int64_t dim, float eps, float* x) {
  if (weight == nullptr) return;
  for (int64_t r = 0; r < n_rows; ++r) RmsNorm(x + r * dim, weight, x + r * dim, dim, eps);
}

void Project(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool* pool) {
  MatMul(w.type, w.data, w.rows, w.cols, x, n, y, pool, w.layout);
}

}  // namespace

StageEngine::StageEngine(const ModelConfig& config, const StageWeights& weights, ThreadPool* pool)
    : config_(config), weights_(weights), pool_(pool) {}

KvCache StageEngine::NewCache(uint32_t context_size) const {
  return KvCache(weights_.range().size(), KvWidths{config_.n_embd_kv(), config_.n_embd_v()},
                 context_size, weights_.range().first);
}

absl::Status StageEngine::Check(const KvCache& cache, const StageInput& in) const {
  const size_t n = in.tokens.size();
  if (n == 0) return absl::InvalidArgumentError("a step needs at least one token");
  if (!cache.Holds(weights_.range().first, weights_.range().last)) {
    return absl::InvalidArgumentError("KV cache belongs to a different layer range");
  }
  for (size_t i = 0; i < n; ++i) {
    if (in.tokens[i] < 0 || static_cast<uint32_t>(in.tokens[i]) >= config_.n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", in.tokens[i], " at index ", i,
                                                     " is outside the vocabulary [0, ",
                                                     config_.n_vocab, ")"));
    }
  }
  if (weights_.is_first()) {
    if (!in.hidden.empty()) {
      return absl::InvalidArgumentError("the first stage takes token ids, not hidden states");
    }
  } else if (in.hidden.size() != n * config_.n_embd) {
    return absl::InvalidArgumentError(absl::StrCat("hidden states have ", in.hidden.size(),
                                                   " values, expected ", n, " x ", config_.n_embd));
  }
  if (uint64_t{cache.n_positions()} + n > cache.max_positions()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("context is full: ", cache.n_positions(), " positions held + ", n,
                     " new > context size ", cache.max_positions()));
  }
  return absl::OkStatus();
}

void StageEngine::Embed(std::span<const int32_t> tokens, float* x) const {
  const WeightMatrix& e = weights_.token_embd();
  const TensorTypeTraits traits = TraitsOf(e.type);
  const size_t row_bytes = e.cols / traits.block_size * traits.block_bytes;
  const auto* base = static_cast<const uint8_t*>(e.data);
  for (size_t t = 0; t < tokens.size(); ++t) {
    DequantizeRow(e.type, base + row_bytes * tokens[t], x + t * e.cols, e.cols);
  }
  if (config_.embd_scale != 1.0f) {  // Gemma: ggml_scale by sqrt(n_embd)
    for (size_t i = 0; i < tokens.size() * e.cols; ++i) x[i] *= config_.embd_scale;
  }
}

// Causal attention of each new query over its own session's cache, per
// head. Mirrors llama.cpp's non-flash path: queries are rounded to f16 to
// meet the f16 keys, and the softmax weights are rounded to f16 to meet the
// f16 values. The dot products and the weighted sum run in SIMD kernels
// (ops/attention.h) in ggml_vec_dot_f16's order. Gemma 2 soft-caps the
// scores before the softmax, and on its sliding layers masks the keys more
// than n_swa - 1 positions back to -inf (their weights come out 0), as
// llama.cpp's KQ_mask_swa does: the row keeps its length, so the softmax
// groups its values as ggml does.
void StageEngine::Attention(const Layout& layout, uint32_t layer, const float* q,
                            float* out) const {
  const bool sliding = config_.IsSlidingLayer(weights_.range().first + layer);
  const int64_t n_head = config_.n_head;
  const int64_t hd = config_.head_dim;      // a key head
  const int64_t hd_v = config_.head_dim_v;  // a value head (DeepSeek's narrower)
  const int64_t group = config_.n_head / config_.n_head_kv;
  const int64_t k_stride = config_.n_embd_kv();
  const int64_t v_stride = config_.n_embd_v();
  const float scale = config_.kq_scale;
  const int64_t n = static_cast<int64_t>(layout.pos.size());
  // One item per token and KV head: the `group` query heads that share the
  // KV head share the loads of its keys.
  const int64_t n_items = n * config_.n_head_kv;
  auto work = [&](int64_t begin, int64_t end) {
    std::vector<float> scores(group * layout.max_keys);
    std::vector<float> q16(group * hd);
    std::vector<const uint16_t*> keys(layout.max_keys);
    std::vector<const uint16_t*> values(layout.max_keys);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / config_.n_head_kv;
      const int64_t kv_head = item % config_.n_head_kv;
      const int64_t h0 = kv_head * group;  // its first query head
      const KvCache& cache = *layout.caches[layout.item[t]];
      const int64_t n_keys = int64_t{layout.pos[t]} + 1;
      const float* qh = q + (t * n_head + h0) * hd;
      std::copy(qh, qh + group * hd, q16.begin());
      RoundThroughF16(q16.data(), group * hd);
      // The cache's rows are contiguous within each block.
      const uint32_t n_rows = static_cast<uint32_t>(n_keys);
      for (uint32_t j = 0; j < n_rows; j += KvCache::RunLength(j, n_rows)) {
        const uint16_t* k_run = cache.key(layer, j) + kv_head * hd;
        const uint16_t* v_run = cache.value(layer, j) + kv_head * hd_v;
        for (uint32_t r = 0; r < KvCache::RunLength(j, n_rows); ++r) {
          keys[j + r] = k_run + r * k_stride;
          values[j + r] = v_run + r * v_stride;
        }
      }
      AttentionScoresF16(q16.data(), group, keys.data(), n_keys, hd, scale, scores.data(),
                         layout.max_keys);
      const int64_t n_masked = sliding ? std::max<int64_t>(0, n_keys - config_.n_swa) : 0;
      for (int64_t g = 0; g < group; ++g) {
        float* head_scores = scores.data() + g * layout.max_keys;
        if (config_.attn_softcap > 0) SoftCapInPlace(head_scores, n_keys, config_.attn_softcap);
        std::fill(head_scores, head_scores + n_masked, -std::numeric_limits<float>::infinity());
        SoftmaxInPlace(head_scores, n_keys);
        RoundThroughF16(head_scores, n_keys);
      }
      // The group's outputs are contiguous heads.
      AttentionWeightedSumF16(scores.data(), group, layout.max_keys, values.data(), n_keys, hd_v,
                              out + (t * n_head + h0) * hd_v, hd_v);
    }
  };
  if (pool_ != nullptr) {
    pool_->ParallelFor(n_items, work);
  } else {
    work(0, n_items);
  }
}

absl::Status StageEngine::Forward(KvCache& cache, const StageInput& in, LogitsMode mode,
                                  std::vector<float>* output) const {
  const StageBatchItem item{&cache, in, output};
  return ForwardBatch(std::span<const StageBatchItem>(&item, 1), mode);
}

absl::Status StageEngine::ForwardBatch(std::span<const StageBatchItem> items,
                                       LogitsMode mode) const {
  Layout layout;
  int64_t n = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    RINGLM_RETURN_IF_ERROR(Check(*items[i].cache, items[i].input));
    if (items[i].logit_rows < 1 || items[i].logit_rows > items[i].input.tokens.size()) {
      return absl::InvalidArgumentError("logit_rows must be 1 to the item's new positions");
    }
    for (size_t j = 0; j < i; ++j) {
      if (items[j].cache == items[i].cache) {
        return absl::InvalidArgumentError("a batch holds one session twice");
      }
    }
    n += static_cast<int64_t>(items[i].input.tokens.size());
  }
  if (n == 0) return absl::InvalidArgumentError("an empty batch");
  for (const StageBatchItem& it : items) {
    RINGLM_RETURN_IF_ERROR(it.cache->Reserve(static_cast<uint32_t>(it.input.tokens.size())));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const uint32_t n_past = items[i].cache->n_positions();
    const uint32_t count = static_cast<uint32_t>(items[i].input.tokens.size());
    layout.caches.push_back(items[i].cache);
    for (uint32_t t = 0; t < count; ++t) {
      layout.item.push_back(static_cast<uint32_t>(i));
      layout.pos.push_back(n_past + t);
    }
    layout.max_keys = std::max(layout.max_keys, n_past + count);
  }
  const ModelConfig& c = config_;
  const int64_t n_embd = c.n_embd;
  const int64_t q_dim = int64_t{c.n_head} * c.head_dim;
  const int64_t kv_dim = c.n_embd_kv();
  const int64_t v_dim = c.n_embd_v();
  const int64_t attn_dim = int64_t{c.n_head} * c.head_dim_v;

  std::vector<float> x(n * n_embd);  // residual stream [n x n_embd], items stacked
  {
    int64_t row = 0;
    for (const StageBatchItem& it : items) {
      if (weights_.is_first()) {
        Embed(it.input.tokens, &x[row * n_embd]);
      } else {
        std::copy(it.input.hidden.begin(), it.input.hidden.end(), x.begin() + row * n_embd);
      }
      row += static_cast<int64_t>(it.input.tokens.size());
    }
  }
  std::vector<float> cur(n * n_embd);     // normed input of a sub-block [n x n_embd]
  std::vector<float> q(n * q_dim);        // [n x n_head*head_dim]
  std::vector<float> k(n * kv_dim);       // [n x n_head_kv*head_dim]
  std::vector<float> v(n * v_dim);        // [n x n_head_kv*head_dim_v]
  std::vector<float> attn(n * attn_dim);  // attention output per head [n x n_head*head_dim_v]
  std::vector<float> proj(n * n_embd);    // a projection back to [n x n_embd]
  const LayerRange range = weights_.range();
  // Dense layers' buffers; MoE layers keep their own.
  const bool any_dense = !c.IsMoeLayer(range.first);  // dense layers lead
  const int64_t n_ff_dense = any_dense ? c.n_ff : 0;
  std::vector<float> gate(n * n_ff_dense);  // [n x n_ff]
  std::vector<float> up(n * n_ff_dense);    // [n x n_ff]

  for (uint32_t il = range.first; il < range.last; ++il) {
    const LayerWeights& w = weights_.layer(il);
    const uint32_t cache_layer = il - range.first;
    // Attention norm.
    for (int64_t t = 0; t < n; ++t) {
      RmsNorm(&x[t * n_embd], w.attn_norm, &cur[t * n_embd], n_embd, c.rms_eps);
    }
    if (c.is_mla()) {
      // DeepSeek: Q, K and V through the latent, RoPE'd (mla_attention.h).
      MlaProject(c, w, cur.data(), n, layout.pos, q.data(), k.data(), v.data(), pool_);
    } else {
      // Q, K, V projections (plus biases on qwen2).
      Project(w.wq, cur.data(), n, q.data(), pool_);
      Project(w.wk, cur.data(), n, k.data(), pool_);
      Project(w.wv, cur.data(), n, v.data(), pool_);
      AddBias(w.bq, n, q_dim, q.data());
      AddBias(w.bk, n, kv_dim, k.data());
      AddBias(w.bv, n, kv_dim, v.data());
      // Qwen 3, Gemma 3: RMSNorm of every Q and K head, before RoPE.
      NormRows(w.q_norm, n * c.n_head, c.head_dim, c.rms_eps, q.data());
      NormRows(w.k_norm, n * c.n_head_kv, c.head_dim, c.rms_eps, k.data());
      // RoPE at absolute positions (then Gemma's Q scale). Phi-3's LongRoPE
      // factors go by the session's context size.
      for (int64_t t = 0; t < n; ++t) {
        const int64_t pos = layout.pos[t];
        const KvCache& cache = *layout.caches[layout.item[t]];
        const float* factors = weights_.rope_factors(c, cache.max_positions());
        ApplyRope(&q[t * q_dim], c.n_head, c.head_dim, c.n_rot, pos, c.RopeBase(il), c.rope_style,
                  factors, c.rope_attn_factor);
        if (c.q_scale != 1.0f) {
          for (int64_t i = 0; i < q_dim; ++i) q[t * q_dim + i] *= c.q_scale;
        }
        ApplyRope(&k[t * kv_dim], c.n_head_kv, c.head_dim, c.n_rot, pos, c.RopeBase(il),
                  c.rope_style, factors, c.rope_attn_factor);
      }
    }
    // K and V into each session's cache as f16.
    for (int64_t t = 0; t < n; ++t) {
      KvCache& cache = *layout.caches[layout.item[t]];
      uint16_t* k_row = cache.key(cache_layer, layout.pos[t]);
      uint16_t* v_row = cache.value(cache_layer, layout.pos[t]);
      for (int64_t i = 0; i < kv_dim; ++i) k_row[i] = Fp32ToFp16(k[t * kv_dim + i]);
      for (int64_t i = 0; i < v_dim; ++i) v_row[i] = Fp32ToFp16(v[t * v_dim + i]);
    }
    // Causal attention over each session's cache, output projection, residual.
    Attention(layout, cache_layer, q.data(), attn.data());
    Project(w.wo, attn.data(), n, proj.data(), pool_);
    NormRows(w.attn_post_norm, n, n_embd, c.rms_eps, proj.data());
    for (int64_t i = 0; i < n * n_embd; ++i) x[i] += proj[i];
    // FFN norm, SwiGLU (Gemma: GELU-gated) feed-forward (or a mixture of
    // SwiGLU experts), Gemma's post-FFN norm, residual.
    for (int64_t t = 0; t < n; ++t) {
      RmsNorm(&x[t * n_embd], w.ffn_norm, &cur[t * n_embd], n_embd, c.rms_eps);
    }
    if (c.IsMoeLayer(il)) {
      MoeFeedForward(c, w.moe, cur.data(), n, proj.data(), pool_);
    } else {
      Project(w.gate, cur.data(), n, gate.data(), pool_);
      Project(w.up, cur.data(), n, up.data(), pool_);
      // Row by row, as ggml does: the SIMD groups and the scalar tail then fall
      // on the same elements of a position however many positions are stacked.
      for (int64_t t = 0; t < n; ++t) {
        if (c.gelu_ffn) {
          GeluGlu(&gate[t * c.n_ff], &up[t * c.n_ff], &gate[t * c.n_ff], c.n_ff);
        } else {
          SwiGlu(&gate[t * c.n_ff], &up[t * c.n_ff], &gate[t * c.n_ff], c.n_ff);
        }
      }
      Project(w.down, gate.data(), n, proj.data(), pool_);
    }
    NormRows(w.ffn_post_norm, n, n_embd, c.rms_eps, proj.data());
    for (int64_t i = 0; i < n * n_embd; ++i) x[i] += proj[i];
  }
  for (const StageBatchItem& it : items) {
    it.cache->Commit(it.input.tokens.data(), static_cast<uint32_t>(it.input.tokens.size()));
  }

  // Each item's rows of the stacked result.
  std::vector<std::pair<int64_t, int64_t>> rows;  // [items]: first row, count
  {
    int64_t row = 0;
    for (const StageBatchItem& it : items) {
      const int64_t count = static_cast<int64_t>(it.input.tokens.size());
      rows.emplace_back(row, count);
      row += count;
    }
  }
  if (!weights_.is_last()) {
    for (size_t i = 0; i < items.size(); ++i) {
      items[i].output->assign(x.begin() + rows[i].first * n_embd,
                              x.begin() + (rows[i].first + rows[i].second) * n_embd);
    }
    return absl::OkStatus();
  }
  // Final norm and output head, for the positions asked for.
  if (mode == LogitsMode::kLastPosition) {
    for (size_t i = 0; i < items.size(); ++i) {
      auto& [first, count] = rows[i];
      const int64_t keep = items[i].logit_rows;
      first += count - keep;
      count = keep;
    }
  }
  int64_t out_rows = 0;
  for (const auto& [first, count] : rows) {
    for (int64_t t = 0; t < count; ++t, ++out_rows) {
      RmsNorm(&x[(first + t) * n_embd], weights_.output_norm(), &cur[out_rows * n_embd], n_embd,
              c.rms_eps);
    }
  }
  std::vector<float> logits(out_rows * c.n_vocab);
  Project(weights_.output(), cur.data(), out_rows, logits.data(), pool_);
  if (c.final_softcap > 0) SoftCapInPlace(logits.data(), out_rows * c.n_vocab, c.final_softcap);
  int64_t done = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const int64_t count = rows[i].second;
    items[i].output->assign(logits.begin() + done * c.n_vocab,
                            logits.begin() + (done + count) * c.n_vocab);
    done += count;
  }
  return absl::OkStatus();
}

}  // namespace ringlm
