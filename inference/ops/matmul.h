// Matrix-vector / matrix-matrix products against GGUF weight rows, with the
// numerics of llama.cpp build 4748's CPU backend. The quantized types follow
// ggml's AVX2 code, the order ringlm follows everywhere (as attention.h and
// activations.h do). The F32/F16/BF16 orders below are still those of the
// build behind the stories260K reference outputs (x86-64, GGML_NATIVE on an
// AVX-512 machine, with llamafile, gcc 12), not those of an AVX2 build
// without llamafile (ggml_vec_dot_f16 there: attention.h's order).
//
// What "the numerics of ggml" means here, per weight type:
//   - Activations are first converted to the type's vec_dot_type: F32 stays
//     f32; F16 weights round x to f16; BF16 weights round x to bf16; Q8_0,
//     Q4_0, Q5_0 and IQ4_NL weights quantize x to Q8_0 blocks
//     (QuantizeRowQ8_0Activations), Q4_1 and Q5_1 to Q8_1 blocks (the same
//     plus f16 block sums), the K-quants and IQ4_XS to Q8_K.
//   - F32/F16/BF16 dots accumulate products with FMA in 16 float lanes and
//     reduce the lanes by halving (as _mm512_reduce_add_ps does). Two orders
//     exist (DotOrder): ggml_vec_dot_* (4x16 lanes over steps of 64, then the
//     tail added in double) and llamafile tinyBLAS (one 16-lane accumulator),
//     which ggml uses for batches of >= 2 tokens when rows % 4 == 0 and
//     cols % 16 == 0. We deviate in one point: the tiled order is chosen by
//     shape alone, for single tokens too, so that a position's result never
//     depends on the batch it is computed in (prefix-cached runs equal
//     uncached ones). ggml's decode steps on such shapes differ from ours in
//     the last bits.
//   - Q8_0/Q4_0/Q5_0 dots: per block, 8 exact integer partial sums (4
//     products each) are scaled by d_w*d_x (one float product) and
//     FMA-accumulated in 8 float lanes; the lanes are reduced by halving. Both
//     orders agree. On x86 with AVX2 or AVX512-VNNI, and on ARM with dotprod,
//     Q8_0/Q4_0 (and Q5_0 on x86) are computed, for every batch size, by the
//     register-tiled integer GEMM of qgemm_internal.h (same bits).
//   - Q4_0 weights of a multiple of 8 rows (per expert, for expert
//     tensors) are another case (kRepacked): ggml's AVX2 build repacks them
//     at load (its CPU_AARCH64 buffer, q4_0_8x8), and its gemv/gemm sum each
//     block's 32 products exactly in one integer, then FMA it, scaled by
//     d_w*d_x, into one float per output, block after block.
//   - K-quant (Q2_K..Q6_K) weights quantize x to Q8_K (QuantizeRowQ8_K)
//     and follow ggml_vec_dot_q{2,3,4,5,6}_K_q8_K's AVX2 code: per 256-value
//     super-block, 8 exact integer lane sums (lane = (position % 32) / 4)
//     are FMA-scaled by d_x*d_w into 8 float lanes, reduced by halving. The
//     mins term: Q4_K keeps it in 4 lanes ((m0 + m2) + (m1 + m3)) added at
//     the end; Q5_K in one float added at the end; Q2_K FMAs it into the 8
//     lanes before each super-block's values. Both orders agree.
//   - Q4_1/Q5_1 dots: Q4_0's integer lanes over the unsigned values, FMA'd
//     with d_w*d_x; the mins (m_w * s_x per block) are FMA-accumulated in one
//     float added after the lanes' halving sum.
//   - IQ4_NL: Q4_0's lanes over the table levels, with even and odd blocks in
//     two sets of 8 float lanes, added lane by lane before the halving sum;
//     an odd last block is FMA'd into the reduced sum. IQ4_XS: the K-quant
//     lanes with signed 6-bit sub-block scales, and ggml's maddubs sign trick
//     (a negative level against x = -128 counts as level * 128).
// Single-threaded and multi-threaded results are bit-identical.
//
#ifndef RINGLM_INFERENCE_OPS_MATMUL_H_
#define RINGLM_INFERENCE_OPS_MATMUL_H_

#include <cstdint>

#include "gguf/tensor_type.h"
#include "inference/ops/thread_pool.h"
#include "inference/ops/weight_layout.h"

namespace ringlm {

// Which of ggml's summation orders a dot product follows.
enum class DotOrder {
  kVecDot,    // ggml_vec_dot_*: shapes tinyBLAS refuses
  kTiled,     // llamafile tinyBLAS: batches of >= 2 tokens
  kRepacked,  // Q4_0 repacked by ggml's CPU_AARCH64 buffer (see above)
};

// The order MatMul uses for these shapes: ggml's batch rule, applied to every
// batch size (n_tokens is ignored; see above), and its repacking rule.
DotOrder MatMulDotOrder(TensorType type, int64_t rows, int64_t cols, int64_t n_tokens);

// y[t * rows + r] = dot(W row r, x row t) for t < n_tokens, r < rows.
// W: `rows` rows of `cols` values of `type`, in `layout` (weight_layout.h;
// kGguf: ne0 = cols, rows contiguous). x: n_tokens x cols floats. y:
// n_tokens x rows floats. Every layout gives the same bits; one the active
// kernels do not read (FastestLayout) is converted on every call.
// Activations are converted once per token; output rows are split across
// `pool` (nullptr: run on the caller). Hot path: reuses per-thread scratch.
// Preconditions: IsComputeSupported(type); cols is a multiple of the type's
// block size; rows, n_tokens >= 0; LayoutFits(layout, type, rows); y does
// not overlap w or x. Must not be called from inside a ParallelFor of the
// same pool.
void MatMul(TensorType type, const void* w, int64_t rows, int64_t cols, const float* x,
            int64_t n_tokens, float* y, ThreadPool* pool,
            WeightLayout layout = WeightLayout::kGguf);

// One dot product with MatMul's semantics, written plainly and slowly (it
// converts x itself on every call). Tests compare MatMul against it.
// Same preconditions as MatMul for one row.
float DotRowReference(TensorType type, const void* row, const float* x, int64_t cols,
                      DotOrder order = DotOrder::kVecDot);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_MATMUL_H_
