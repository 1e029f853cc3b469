// The mixture-of-experts feed-forward block, with the numerics of llama.cpp
// build 4748's llm_build_moe_ffn on its CPU backend.
#ifndef RINGLM_INFERENCE_MOE_FFN_H_
#define RINGLM_INFERENCE_MOE_FFN_H_

#include <cstdint>
#include <vector>

#include "inference/model_config.h"
#include "inference/ops/thread_pool.h"
#include "inference/stage_weights.h"

namespace ringlm {

// The experts one token chose and their weights, best first.
struct ExpertChoice {
  std::vector<int32_t> experts;  // [n_expert_used]
  std::vector<float> weights;    // [n_expert_used]
};

// logits [n x n_expert] = router . x for n inputs x [n x n_embd]. An f32
// router (as llama.cpp's converter writes them) follows ggml_vec_dot_f32's
// AVX2 order, not MatMul's (whose f32 order is llamafile's, see matmul.h):
// a last-bit difference here can change a token's experts. Other types go
// through MatMul.
void RouterLogits(const WeightMatrix& router, const float* x, int64_t n, float* logits,
                  ThreadPool* pool);

// Routes one token from its router logits [n_expert], as llama.cpp does:
//   - softmax over the logits (ggml_soft_max: ggml's vector exp for groups of
//     8, libm expf for the rest, the sum in double, then one float scale), or
//     with config.sigmoid_gating (DeepSeek V3) 1 / (1 + expf(-logit)) each;
//   - the n_expert_used largest probabilities, plus `probs_bias` when given
//     (V3's exp_probs_b: it steers the choice, not the weights), in the order
//     of ggml_argsort's descending exchange sort (ties keep the lower index
//     first);
//   - the chosen experts' unbiased probabilities as weights; when
//     config.expert_weights_norm, each divided by their float sum (added in
//     double, as ggml_sum_rows); then times config.expert_weights_scale.
// Precondition: config.is_moe(); probs_bias null or [n_expert]. Pure,
// thread-safe.
ExpertChoice RouteToken(const ModelConfig& config, const float* logits,
                        const float* probs_bias = nullptr);

// out[t] = sum over token t's chosen experts of weight * down(SwiGLU(gate,
// up)), for the n normed inputs `x` [n x n_embd]; out is [n x n_embd]. The
// experts' outputs are added in the order RouteToken returns them, as
// llama.cpp's aggregation does. Tokens are grouped by expert: each chosen
// expert's three matrices are read once for all the tokens that chose it
// (one MatMul over their gathered rows), and experts no token chose are not
// read at all. A token's result is bit-identical whatever else is in the
// batch, since every kernel's per-row arithmetic ignores the other rows.
// With a shared expert (config.n_ff_shexp > 0), every token then adds its
// SwiGLU output: times sigmoid(shared_gate_inp . x) on qwen2moe, as
// llama.cpp's qwen2moe graph does; as it is on deepseek2.
// Precondition: config.is_moe(); `w` is a layer of a model with `config`;
// out does not overlap x. Same pool rules as MatMul.
void MoeFeedForward(const ModelConfig& config, const MoeWeights& w, const float* x, int64_t n,
                    float* out, ThreadPool* pool);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_MOE_FFN_H_
