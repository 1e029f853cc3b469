#include "inference/stage_engine.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
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

void Project(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool* pool) {
  MatMul(w.type, w.data, w.rows, w.cols, x, n, y, pool);
}

}  // namespace

StageEngine::StageEngine(const ModelConfig& config, const StageWeights& weights, ThreadPool* pool)
    : config_(config), weights_(weights), pool_(pool) {}

KvCache StageEngine::NewCache(uint32_t context_size) const {
  return KvCache(weights_.range().size(), config_.n_embd_kv(), context_size,
                 weights_.range().first);
}

absl::Status StageEngine::CheckInput(const KvCache& cache, const StageInput& in) const {
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
}

// Causal attention of n new queries over the cache, per head. Mirrors
// llama.cpp's non-flash path: queries are rounded to f16 to meet the f16
// keys, and the softmax weights are rounded to f16 to meet the f16 values.
// The dot products and the weighted sum run in SIMD kernels (ops/attention.h)
// with the rounding of the plain scalar loops.
void StageEngine::Attention(const KvCache& cache, uint32_t layer, uint32_t n_past, int64_t n,
                            const float* q, float* out) const {
  const int64_t n_head = config_.n_head;
  const int64_t hd = config_.head_dim;
  const int64_t group = config_.n_head / config_.n_head_kv;
  const int64_t stride = config_.n_embd_kv();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  auto work = [&](int64_t begin, int64_t end) {
    std::vector<float> scores(n_past + n);
    std::vector<float> q16(hd);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / n_head;
      const int64_t h = item % n_head;
      const int64_t kv_offset = (h / group) * hd;
      const int64_t n_keys = n_past + t + 1;
      const float* qh = q + (t * n_head + h) * hd;
      std::copy(qh, qh + hd, q16.begin());
      RoundThroughF16(q16.data(), hd);
      AttentionScoresF16(q16.data(), cache.key(layer, 0) + kv_offset, stride, n_keys, hd, scale,
                         scores.data());
      SoftmaxInPlace(scores.data(), n_keys);
      RoundThroughF16(scores.data(), n_keys);
      AttentionWeightedSumF16(scores.data(), cache.value(layer, 0) + kv_offset, stride, n_keys, hd,
                              out + (t * n_head + h) * hd);
    }
  };
  if (pool_ != nullptr) {
    pool_->ParallelFor(n * n_head, work);
  } else {
    work(0, n * n_head);
  }
}

absl::Status StageEngine::Forward(KvCache& cache, const StageInput& in, LogitsMode mode,
                                  std::vector<float>* output) const {
  RINGLM_RETURN_IF_ERROR(CheckInput(cache, in));
  const int64_t n = static_cast<int64_t>(in.tokens.size());
  RINGLM_RETURN_IF_ERROR(cache.Reserve(static_cast<uint32_t>(n)));
  const uint32_t n_past = cache.n_positions();
  const ModelConfig& c = config_;
  const int64_t n_embd = c.n_embd;
  const int64_t q_dim = int64_t{c.n_head} * c.head_dim;
  const int64_t kv_dim = c.n_embd_kv();

  std::vector<float> x(n * n_embd);  // residual stream [n x n_embd]
  if (weights_.is_first()) {
    Embed(in.tokens, x.data());
  } else {
    std::copy(in.hidden.begin(), in.hidden.end(), x.begin());
  }
  std::vector<float> cur(n * n_embd);   // normed input of a sub-block [n x n_embd]
  std::vector<float> q(n * q_dim);      // [n x n_head*head_dim]
  std::vector<float> k(n * kv_dim);     // [n x n_head_kv*head_dim]
  std::vector<float> v(n * kv_dim);     // [n x n_head_kv*head_dim]
  std::vector<float> attn(n * q_dim);   // attention output per head [n x n_head*head_dim]
  std::vector<float> proj(n * n_embd);  // a projection back to [n x n_embd]
  std::vector<float> gate(n * c.n_ff);  // [n x n_ff]
  std::vector<float> up(n * c.n_ff);    // [n x n_ff]

  const LayerRange range = weights_.range();
  for (uint32_t il = range.first; il < range.last; ++il) {
    const LayerWeights& w = weights_.layer(il);
    const uint32_t cache_layer = il - range.first;
    // Attention norm.
    for (int64_t t = 0; t < n; ++t) {
      RmsNorm(&x[t * n_embd], w.attn_norm, &cur[t * n_embd], n_embd, c.rms_eps);
    }
    // Q, K, V projections (plus biases on qwen2).
    Project(w.wq, cur.data(), n, q.data(), pool_);
    Project(w.wk, cur.data(), n, k.data(), pool_);
    Project(w.wv, cur.data(), n, v.data(), pool_);
    AddBias(w.bq, n, q_dim, q.data());
    AddBias(w.bk, n, kv_dim, k.data());
    AddBias(w.bv, n, kv_dim, v.data());
    // RoPE at absolute positions, then K and V into the cache as f16.
    for (int64_t t = 0; t < n; ++t) {
      const int64_t pos = n_past + t;
      ApplyRope(&q[t * q_dim], c.n_head, c.head_dim, c.n_rot, pos, c.rope_freq_base, c.rope_style);
      ApplyRope(&k[t * kv_dim], c.n_head_kv, c.head_dim, c.n_rot, pos, c.rope_freq_base,
                c.rope_style);
      uint16_t* k_row = cache.key(cache_layer, n_past + t);
      uint16_t* v_row = cache.value(cache_layer, n_past + t);
      for (int64_t i = 0; i < kv_dim; ++i) {
        k_row[i] = Fp32ToFp16(k[t * kv_dim + i]);
        v_row[i] = Fp32ToFp16(v[t * kv_dim + i]);
      }
    }
    // Causal attention over the cache, output projection, residual.
    Attention(cache, cache_layer, n_past, n, q.data(), attn.data());
    Project(w.wo, attn.data(), n, proj.data(), pool_);
    for (int64_t i = 0; i < n * n_embd; ++i) x[i] += proj[i];
    // FFN norm, SwiGLU feed-forward, residual.
    for (int64_t t = 0; t < n; ++t) {
      RmsNorm(&x[t * n_embd], w.ffn_norm, &cur[t * n_embd], n_embd, c.rms_eps);
    }
    Project(w.gate, cur.data(), n, gate.data(), pool_);
    Project(w.up, cur.data(), n, up.data(), pool_);
    SwiGlu(gate.data(), up.data(), gate.data(), n * c.n_ff);
    Project(w.down, gate.data(), n, proj.data(), pool_);
    for (int64_t i = 0; i < n * n_embd; ++i) x[i] += proj[i];
  }
  cache.Commit(in.tokens.data(), static_cast<uint32_t>(n));

  if (!weights_.is_last()) {
    *output = std::move(x);
    return absl::OkStatus();
  }
  // Final norm and output head, for the positions asked for.
  const int64_t first_row = mode == LogitsMode::kLastPosition ? n - 1 : 0;
  const int64_t rows = n - first_row;
  for (int64_t t = 0; t < rows; ++t) {
    RmsNorm(&x[(first_row + t) * n_embd], weights_.output_norm(), &cur[t * n_embd], n_embd,
            c.rms_eps);
  }
  output->resize(rows * c.n_vocab);
  Project(weights_.output(), cur.data(), rows, output->data(), pool_);
  return absl::OkStatus();
}

}  // namespace ringlm
