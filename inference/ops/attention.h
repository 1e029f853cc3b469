// Attention kernels over an f16 KV cache (llama.cpp's non-flash CPU path
// with f16 K/V), with the exact rounding of the plain scalar loops written
// out in the *Reference functions: each product and each sum is rounded to
// f32 separately (no FMA), in the order given. The SIMD versions are
// bit-identical to the references on every target.
//
// Layout: row j of keys/values starts at base + j * stride (in f16 elements).
// Preconditions: n_keys, dim >= 0; outputs do not overlap inputs.
// All functions are pure and thread-safe. Hot: called per KV head and query.
#ifndef RINGLM_INFERENCE_OPS_ATTENTION_H_
#define RINGLM_INFERENCE_OPS_ATTENTION_H_

#include <cstdint>

namespace ringlm {

// scores[j] = (sum over d = 0, 1, ..., dim - 1 of q[d] * K_j[d]) * scale,
// summed left to right from 0.
void AttentionScoresF16(const float* q, const uint16_t* keys, int64_t stride, int64_t n_keys,
                        int64_t dim, float scale, float* scores);
// The scores of n_q queries (q + i * dim, i < n_q) against the same keys,
// into scores + i * scores_stride: each exactly as AttentionScoresF16 gives
// it (the queries share the loads of the keys, nothing else).
void AttentionScoresF16Queries(const float* q, int64_t n_q, const uint16_t* keys, int64_t stride,
                               int64_t n_keys, int64_t dim, float scale, float* scores,
                               int64_t scores_stride);
void AttentionScoresF16Reference(const float* q, const uint16_t* keys, int64_t stride,
                                 int64_t n_keys, int64_t dim, float scale, float* scores);

// out[d] += p[j] * V_j[d] for j = 0, 1, ..., n_keys - 1 in that order, for
// d < dim: the sum continues from what out holds, so a caller that zeroes out
// and then adds the keys in runs (the blocks of a KV cache) gets the bits of
// one pass over all of them.
void AttentionWeightedSumF16(const float* p, const uint16_t* values, int64_t stride, int64_t n_keys,
                             int64_t dim, float* out);
// The weighted sums of n_q queries' weights (p + i * p_stride, i < n_q)
// over the same values, into out + i * out_stride: each exactly as
// AttentionWeightedSumF16 gives it (the queries share the loads of the
// values, nothing else).
void AttentionWeightedSumF16Queries(const float* p, int64_t n_q, int64_t p_stride,
                                    const uint16_t* values, int64_t stride, int64_t n_keys,
                                    int64_t dim, float* out, int64_t out_stride);
void AttentionWeightedSumF16Reference(const float* p, const uint16_t* values, int64_t stride,
                                      int64_t n_keys, int64_t dim, float* out);

// x[i] = Fp16ToFp32(Fp32ToFp16(x[i])) for i < n (rounds to f16 precision,
// as ggml does where f32 values meet f16 K/V).
void RoundThroughF16(float* x, int64_t n);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_ATTENTION_H_
