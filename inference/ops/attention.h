// Attention kernels over an f16 KV cache: llama.cpp's non-flash CPU path
// with f16 K/V, in the order of ggml_vec_dot_f16 as ggml builds it for x86
// AVX2 + FMA (the order ringlm follows on every CPU):
//   - the first n - n % 32 products are fused-multiply-added into 4
//     accumulators of 8 lanes (product k goes to accumulator (k % 32) / 8,
//     lane k % 8, in order of k);
//   - the accumulators are reduced as ((a0 + a2) + (a1 + a3)), then lanes
//     t[l] = a[l] + a[l + 4], then (t0 + t1) + (t2 + t3), in float;
//   - the remaining n % 32 products are each rounded to float and added in
//     double to that sum, which is rounded to float at the end.
// The *Reference functions write this out plainly; the SIMD versions are
// bit-identical to them on every target.
//
// Keys and values are given as one pointer per cache position (a paged
// cache need not be contiguous); each points at `dim` f16 values.
// Preconditions: n_keys, dim >= 0; outputs do not overlap inputs.
// All functions are pure and thread-safe. Hot: called per KV head and token.
#ifndef RINGLM_INFERENCE_OPS_ATTENTION_H_
#define RINGLM_INFERENCE_OPS_ATTENTION_H_

#include <cstdint>

namespace ringlm {

// ggml_vec_dot_f16(n, x, y) in the order above, with y's values given as
// floats (they must be f16 values: the caller rounded them).
float DotF16Ggml(const uint16_t* x, const float* y, int64_t n);

// scores[i * scores_stride + j] = DotF16Ggml(keys[j], q + i * dim, dim) *
// scale for the n_q queries i < n_q and keys j < n_keys: ggml's KQ product
// (q rounded to f16 by the caller, as ggml converts it) and the scale
// soft_max applies first.
void AttentionScoresF16(const float* q, int64_t n_q, const uint16_t* const* keys, int64_t n_keys,
                        int64_t dim, float scale, float* scores, int64_t scores_stride);
void AttentionScoresF16Reference(const float* q, int64_t n_q, const uint16_t* const* keys,
                                 int64_t n_keys, int64_t dim, float scale, float* scores,
                                 int64_t scores_stride);

// out[i * out_stride + d] = ggml's KQV product for query i < n_q and d < dim:
// ggml_vec_dot_f16 over the keys of (values[j][d], p[i * p_stride + j]),
// with the keys padded by zero weights to a multiple of 32 (llama.cpp's KV
// view covers a multiple of 32 cells, the masked ones with weight 0), so
// no product takes the double tail. p must hold f16 values (the caller
// rounds the softmax weights, as ggml converts them).
void AttentionWeightedSumF16(const float* p, int64_t n_q, int64_t p_stride,
                             const uint16_t* const* values, int64_t n_keys, int64_t dim, float* out,
                             int64_t out_stride);
void AttentionWeightedSumF16Reference(const float* p, int64_t n_q, int64_t p_stride,
                                      const uint16_t* const* values, int64_t n_keys, int64_t dim,
                                      float* out, int64_t out_stride);

// x[i] = Fp16ToFp32(Fp32ToFp16(x[i])) for i < n (rounds to f16 precision,
// as ggml does where f32 values meet f16 K/V).
void RoundThroughF16(float* x, int64_t n);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_ATTENTION_H_
