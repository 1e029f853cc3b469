#include "inference/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "inference/ops/activations.h"
#include "inference/ops/matmul.h"

namespace ringlm {
namespace {

// ggml_soft_max of one row without mask or scale, as its AVX2 build runs it:
// groups of 8 exps summed by halving ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))
// and added in double, the rest with libm expf one by one, then every
// probability times the float of 1/sum. (SoftmaxInPlace is attention's
// variant, whose rows have no libm tail.)
void RouterSoftmax(float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float v[8];
    for (int l = 0; l < 8; ++l) x[i + l] = v[l] = ExpGgmlVector(x[i + l] - max);
    const float a0 = v[0] + v[4], a1 = v[1] + v[5], a2 = v[2] + v[6], a3 = v[3] + v[7];
    sum += static_cast<double>((a0 + a2) + (a1 + a3));
  }
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += static_cast<double>(x[i]);
  }
  const float scale = static_cast<float>(1.0 / sum);
  for (int64_t k = 0; k < n; ++k) x[k] *= scale;
}

// ggml_vec_dot_f32 as its AVX2 + FMA build computes it: 4 accumulators of 8
// lanes over steps of 32 values (lane += w * x, fused), the accumulators
// reduced (a0 + a2) + (a1 + a3), the 8 lanes by
// ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)), then the rest added one
// product at a time (untested: real widths are multiples of 32). MatMul's
// f32 order is llamafile's (matmul.h), and a last-bit difference in a router
// logit can change which experts a token takes, so routers (always f32 in
// llama.cpp's files) use this order.
// The body, compiled twice: std::fma is exact, so both give the same bits,
// but without FMA instructions it is a library call per product.
inline float DotF32GgmlBody(const float* w, const float* x, int64_t n) {
  float acc[4][8] = {};
  const int64_t np = n / 32 * 32;
  for (int64_t i = 0; i < np; i += 32) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 8; ++l) {
        acc[j][l] = std::fma(w[i + j * 8 + l], x[i + j * 8 + l], acc[j][l]);
      }
    }
  }
  float v[8];
  for (int l = 0; l < 8; ++l) v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  const float t0 = v[0] + v[4], t1 = v[1] + v[5], t2 = v[2] + v[6], t3 = v[3] + v[7];
  float sum = (t0 + t1) + (t2 + t3);
  for (int64_t i = np; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float DotF32GgmlFma(const float* w, const float* x, int64_t n) {
  return DotF32GgmlBody(w, x, n);
}
#endif

float DotF32Ggml(const float* w, const float* x, int64_t n) {
#if defined(__x86_64__)
  static const bool kHasFma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (kHasFma) return DotF32GgmlFma(w, x, n);
#endif
  return DotF32GgmlBody(w, x, n);
}

// y[t * rows + r] = row r of the f32 matrix `w` [rows x cols] . x row t, in
// ggml's order (DotF32Ggml). For the small router and shared-expert gates.
void RouterMatMul(const float* w, int64_t rows, int64_t cols, const float* x, int64_t n, float* y) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      y[t * rows + r] = DotF32Ggml(w + r * cols, x + t * cols, cols);
    }
  }
}

// out += sigmoid(gate) * SwiGLU-FFN(x) per token, the shared expert of
// qwen2moe. Its gate is a dot with an f32 vector; the sigmoid is computed
// as c392e50's graph does it, silu(g) / g. DeepSeek's shared experts have no
// gate: out += SwiGLU-FFN(x).
void AddSharedExpert(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t n,
                     float* out, ThreadPool* pool) {
  const int64_t n_embd = c.n_embd;
  const int64_t n_ff = c.n_ff_shexp;
  std::vector<float> g(n);              // [n]
  std::vector<float> gate(n * n_ff);    // [n x n_ff_shexp]
  std::vector<float> up(n * n_ff);      // [n x n_ff_shexp]
  std::vector<float> down(n * n_embd);  // [n x n_embd]
  if (w.shared_gate_inp != nullptr) RouterMatMul(w.shared_gate_inp, 1, n_embd, x, n, g.data());
  const WeightMatrix& wg = w.shared_gate;
  const WeightMatrix& wu = w.shared_up;
  const WeightMatrix& wd = w.shared_down;
  MatMul(wg.type, wg.data, wg.rows, wg.cols, x, n, gate.data(), pool, wg.layout);
  MatMul(wu.type, wu.data, wu.rows, wu.cols, x, n, up.data(), pool, wu.layout);
  for (int64_t t = 0; t < n; ++t) SwiGlu(&gate[t * n_ff], &up[t * n_ff], &gate[t * n_ff], n_ff);
  MatMul(wd.type, wd.data, wd.rows, wd.cols, gate.data(), n, down.data(), pool, wd.layout);
  if (w.shared_gate_inp == nullptr) {
    for (int64_t i = 0; i < n * n_embd; ++i) out[i] += down[i];
    return;
  }
  for (int64_t t = 0; t < n; ++t) {
    const float sigmoid = Silu(g[t]) / g[t];
    for (int64_t j = 0; j < n_embd; ++j) out[t * n_embd + j] += down[t * n_embd + j] * sigmoid;
  }
}

}  // namespace

void RouterLogits(const WeightMatrix& router, const float* x, int64_t n, float* logits,
                  ThreadPool* pool) {
  if (router.type == TensorType::kF32) {
    RouterMatMul(static_cast<const float*>(router.data), router.rows, router.cols, x, n, logits);
  } else {
    MatMul(router.type, router.data, router.rows, router.cols, x, n, logits, pool, router.layout);
  }
}

ExpertChoice RouteToken(const ModelConfig& c, const float* logits, const float* probs_bias) {
  std::vector<float> probs(logits, logits + c.n_expert);  // [n_expert]
  if (c.sigmoid_gating) {
    for (float& p : probs) p = 1.0f / (1.0f + std::exp(-p));  // ggml_vec_sigmoid_f32
  } else {
    RouterSoftmax(probs.data(), c.n_expert);
  }
  std::vector<float> selection = probs;  // [n_expert]: what the top k is taken over
  if (probs_bias != nullptr) {
    for (uint32_t e = 0; e < c.n_expert; ++e) selection[e] += probs_bias[e];
  }
  // ggml_argsort (descending) is an exchange sort: position j takes, in turn,
  // every later index whose value is strictly greater. Position j is final
  // after its pass, so n_expert_used passes give the top k.
  std::vector<int32_t> order(c.n_expert);
  std::iota(order.begin(), order.end(), 0);
  for (uint32_t j = 0; j < c.n_expert_used; ++j) {
    for (uint32_t k = j + 1; k < c.n_expert; ++k) {
      if (selection[order[j]] < selection[order[k]]) std::swap(order[j], order[k]);
    }
  }
  ExpertChoice choice;
  choice.experts.assign(order.begin(), order.begin() + c.n_expert_used);
  for (int32_t e : choice.experts) choice.weights.push_back(probs[e]);
  if (c.expert_weights_norm) {
    double sum = 0;  // ggml_sum_rows: double, stored as float
    for (float w : choice.weights) sum += static_cast<double>(w);
    const float total = static_cast<float>(sum);
    for (float& w : choice.weights) w /= total;
  }
  // ggml_scale (DeepSeek's expert_weights_scale; x * 1 is exact elsewhere).
  for (float& w : choice.weights) w *= c.expert_weights_scale;
  return choice;
}

void MoeFeedForward(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t n,
                    float* out, ThreadPool* pool) {
  const int64_t n_embd = c.n_embd;
  const int64_t n_ff = c.n_ff_exp;
  const int64_t k = c.n_expert_used;
  // Router logits [n x n_expert], then each token's choice.
  std::vector<float> logits(n * c.n_expert);
  RouterLogits(w.router, x, n, logits.data(), pool);
  std::vector<ExpertChoice> choices(n);
  std::vector<std::vector<int64_t>> slots(c.n_expert);  // per expert: t * k + slot, t ascending
  for (int64_t t = 0; t < n; ++t) {
    choices[t] = RouteToken(c, &logits[t * c.n_expert], w.probs_bias);
    for (int64_t s = 0; s < k; ++s) slots[choices[t].experts[s]].push_back(t * k + s);
  }
  // Each chosen expert once, over the rows of the tokens that chose it.
  std::vector<float> weighted(n * k * n_embd);  // [n x k x n_embd]: weight * expert output
  std::vector<float> xs, gate, up, down;
  for (uint32_t e = 0; e < c.n_expert; ++e) {
    const std::vector<int64_t>& mine = slots[e];
    if (mine.empty()) continue;
    const int64_t m = static_cast<int64_t>(mine.size());
    xs.resize(m * n_embd);    // the gathered inputs [m x n_embd]
    gate.resize(m * n_ff);    // [m x n_ff_exp]
    up.resize(m * n_ff);      // [m x n_ff_exp]
    down.resize(m * n_embd);  // [m x n_embd]
    for (int64_t i = 0; i < m; ++i) {
      const float* row = x + (mine[i] / k) * n_embd;
      std::copy(row, row + n_embd, &xs[i * n_embd]);
    }
    const WeightMatrix wg = w.gate.Expert(e);
    const WeightMatrix wu = w.up.Expert(e);
    const WeightMatrix wd = w.down.Expert(e);
    MatMul(wg.type, wg.data, wg.rows, wg.cols, xs.data(), m, gate.data(), pool, wg.layout);
    MatMul(wu.type, wu.data, wu.rows, wu.cols, xs.data(), m, up.data(), pool, wu.layout);
    // Row by row, as ggml's silu and mul run over rows of n_ff_exp.
    for (int64_t i = 0; i < m; ++i) SwiGlu(&gate[i * n_ff], &up[i * n_ff], &gate[i * n_ff], n_ff);
    MatMul(wd.type, wd.data, wd.rows, wd.cols, gate.data(), m, down.data(), pool, wd.layout);
    // Scatter back, scaled by the token's weight for this expert.
    for (int64_t i = 0; i < m; ++i) {
      const int64_t t = mine[i] / k;
      const float weight = choices[t].weights[mine[i] % k];
      float* dst = &weighted[mine[i] * n_embd];
      for (int64_t j = 0; j < n_embd; ++j) dst[j] = down[i * n_embd + j] * weight;
    }
  }
  // Sum each token's experts in slot order: ((e0 + e1) + e2) + ...
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * n_embd;
    std::copy(&weighted[t * k * n_embd], &weighted[(t * k + 1) * n_embd], o);
    for (int64_t s = 1; s < k; ++s) {
      const float* e = &weighted[(t * k + s) * n_embd];
      for (int64_t j = 0; j < n_embd; ++j) o[j] += e[j];
    }
  }
  if (c.n_ff_shexp > 0) AddSharedExpert(c, w, x, n, out, pool);
}

}  // namespace ringlm
