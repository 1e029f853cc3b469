#include "inference/mla_attention.h"

#include <algorithm>
#include <vector>

#include "inference/ops/matmul.h"
#include "inference/ops/norm_rope.h"

namespace ringlm {
namespace {

void Project(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool* pool) {
  MatMul(w.type, w.data, w.rows, w.cols, x, n, y, pool, w.layout);
}

}  // namespace

void MlaProject(const ModelConfig& c, const LayerWeights& w, const float* x, int64_t n,
                std::span<const uint32_t> pos, float* q, float* k, float* v, ThreadPool* pool) {
  const int64_t hd = c.head_dim;
  const int64_t hd_v = c.head_dim_v;
  const int64_t n_rot = c.n_rot;
  const int64_t nope = hd - n_rot;  // a head's unrotated key values
  const int64_t n_head = c.n_head;
  const int64_t rank = c.kv_lora_rank;
  const int64_t kv_a_dim = rank + n_rot;
  const int64_t kv_dim = nope + hd_v;  // one head's rows of attn_kv_b
  // Q: plain, or through the q LoRA bottleneck.
  if (c.q_lora_rank > 0) {
    const int64_t q_rank = c.q_lora_rank;
    std::vector<float> q_a(n * q_rank);  // [n x q_lora_rank]
    Project(w.wq_a, x, n, q_a.data(), pool);
    for (int64_t t = 0; t < n; ++t) {
      RmsNorm(&q_a[t * q_rank], w.q_a_norm, &q_a[t * q_rank], q_rank, c.rms_eps);
    }
    Project(w.wq_b, q_a.data(), n, q, pool);
  } else {
    Project(w.wq, x, n, q, pool);
  }
  // The latent and the shared RoPE key, then the latent's norm and expansion.
  std::vector<float> kv_a(n * kv_a_dim);  // [n x (kv_lora_rank + n_rot)]
  Project(w.wkv_a, x, n, kv_a.data(), pool);
  std::vector<float> latent(n * rank);  // [n x kv_lora_rank]
  for (int64_t t = 0; t < n; ++t) {
    RmsNorm(&kv_a[t * kv_a_dim], w.kv_a_norm, &latent[t * rank], rank, c.rms_eps);
  }
  std::vector<float> kv(n * n_head * kv_dim);  // [n x n_head x (nope + head_dim_v)]
  Project(w.wkv_b, latent.data(), n, kv.data(), pool);
  // RoPE of each query head's last n_rot values and of the shared key (ggml
  // rotates both in place, after their ggml_cont: unfused), then each head's
  // key and value rows.
  for (int64_t t = 0; t < n; ++t) {
    float* q_t = q + t * n_head * hd;
    ApplyRope(q_t + nope, n_head, hd, n_rot, pos[t], c.rope_freq_base, c.rope_style, nullptr,
              c.rope_attn_factor, c.rope_yarn, RopeLoop::kInPlace);
    float* k_pe = &kv_a[t * kv_a_dim + rank];  // [n_rot]
    ApplyRope(k_pe, 1, n_rot, n_rot, pos[t], c.rope_freq_base, c.rope_style, nullptr,
              c.rope_attn_factor, c.rope_yarn, RopeLoop::kInPlace);
    for (int64_t h = 0; h < n_head; ++h) {
      const float* kv_h = &kv[(t * n_head + h) * kv_dim];
      float* k_h = k + (t * n_head + h) * hd;
      std::copy(kv_h, kv_h + nope, k_h);
      std::copy(k_pe, k_pe + n_rot, k_h + nope);
      std::copy(kv_h + nope, kv_h + kv_dim, v + (t * n_head + h) * hd_v);
    }
  }
}

}  // namespace ringlm
