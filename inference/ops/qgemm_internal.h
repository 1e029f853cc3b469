// Batch-invariant quantized GEMM for Q8_0, Q4_0 and Q5_0 weights (internal to
// inference/ops; MatMul calls it). Not for use outside inference/ops.
//
// Numerics: exactly those of matmul.h for Q8_0/Q4_0/Q5_0, i.e. of DotQ8_0 /
// DotQ4_0 / DotQ5_0 in matmul.cc. Activations are quantized once per token row by
// QuantizeRowQ8_0Activations. For one output (weight row r, token t), block b
// gives 8 exact int32 lane sums (lane l = products 4l..4l+3 of the block),
// which are FMA-accumulated as acc[l] = fma(d_w * d_x, float(sum_l), acc[l])
// over b = 0, 1, ... in order; the 8 lanes are reduced by halving at the end.
// That order depends on K alone: not on the number of tokens, the position of
// the output in a tile, or the thread count (there is no split-K). So every
// output equals DotRowReference bit for bit, however it is batched.
// Q4_0 matrices in DotOrder::kRepacked (matmul.h) sum each block's 8 lane
// sums into one integer instead (exact) and FMA it, scaled by d_w * d_x, into
// one float per output, block after block: no reduction at the end.
//
// Micro-kernels (qgemm_x86.cc, qgemm_arm.cc) compute R weight rows x 2P
// tokens. Integer lane sums come from `vpdpbusd` (AVX512-VNNI) or
// `vpmaddubsw` + `vpmaddwd` (AVX2), exact for our operand ranges (see
// qgemm_x86.cc), or from ARM's SDOT (`vdotq_s32`, NEON dotprod), whose lane
// i is exactly the reference's: 4 int8 x int8 products summed in 32 bits,
// with no saturation for any int8 operands (see qgemm_arm.cc).
//
// Packed activations: token pairs; pair p is `nb` records of 128 bytes, record
// b = [qs of token 2p (32 bytes) | qs of token 2p+1 (32) | d of token 2p as
// f32 x 8 | d of token 2p+1 as f32 x 8]. The qs are the Q8_0 activations,
// stored as qs + 128 (unsigned) where the kernel wants unsigned activations
// (QGemmKernels::x_offset128: Q8_0's and IQ4_NL's). A missing last token of an
// odd count is padded with zeros (its outputs are not stored).
#ifndef RINGLM_INFERENCE_OPS_QGEMM_INTERNAL_H_
#define RINGLM_INFERENCE_OPS_QGEMM_INTERNAL_H_

#include <cstddef>
#include <cstdint>

#include "gguf/tensor_type.h"
#include "inference/ops/thread_pool.h"

namespace ringlm {

// Bytes of one packed record (one block of a token pair).
inline constexpr size_t kQGemmRecordBytes = 128;

// Which micro-kernel family QGemm runs. The order is the ranking
// SetQGemmTargetCap compares. Only one architecture's targets run in a
// process, so kNeonDot's place below the x86 ones only means that
// kAvx512Vnni, the default cap, caps nothing on any architecture.
enum class QGemmTarget {
  kNone,        // no kernel here: MatMul keeps its per-dot kernels
  kNeonDot,     // ARM64 NEON + dotprod (SDOT, ARMv8.2; not on Cortex-A53/A72)
  kAvx2,        // x86 AVX2 + FMA + F16C
  kAvx512Vnni,  // x86 AVX-512 F/BW/VL + VNNI
};

const char* QGemmTargetName(QGemmTarget target);

// What a kernel computes: Q8_0, Q4_0, Q5_0 or IQ4_NL weights in ggml's
// vec_dot order, or Q4_0 in its repacked order, from GGUF rows or (kQ4_0x8)
// from WeightLayout::kQ4_0x8 groups. Indexes the kernel tables.
enum class QGemmKind { kQ8_0, kQ4_0, kQ4_0Repacked, kQ5_0, kIQ4_NL, kQ4_0x8 };
inline constexpr int kQGemmKinds = 6;

// out[i * out_stride + j] = dot(weight row i, token j) for i < R, j < 2P.
// w: R rows of row_bytes (Q8_0, Q4_0 or Q5_0 blocks); for kQ4_0x8 a whole
// group (weight_layout.h; R = 8; a group starts where its first row would).
// x: P packed pairs, pair_stride bytes apart (64-byte aligned); nb: blocks
// per row.
using QGemmKernel = void (*)(const uint8_t* w, size_t row_bytes, const uint8_t* x,
                             size_t pair_stride, int64_t nb, float* out, int out_stride);

// A target's micro-kernels: kernel[kind][r - 1][p - 1] for r <= rows, p <=
// pairs (kind: a QGemmKind as int). Optionally one_token[kind][rp - 1]: 2 * rp
// rows x token 0 of one packed pair (out[i * out_stride], i < 2 * rp), for
// single-token calls (decode).
inline constexpr int kQGemmMaxRows = 8;  // kQ4_0x8: a group; the others 4 or fewer
inline constexpr int kQGemmMaxPairs = 4;
inline constexpr int kQGemmMaxRowPairs = 4;
struct QGemmKernels {
  struct Tile {
    int rows = 0;   // R of the full tile
    int pairs = 0;  // P of the full tile (2P tokens)
  };
  Tile tile[kQGemmKinds];    // per kind
  bool x_offset128 = false;  // Q8_0/IQ4_NL activations stored as qs + 128
  QGemmKernel kernel[kQGemmKinds][kQGemmMaxRows][kQGemmMaxPairs] = {};
  QGemmKernel one_token[kQGemmKinds][kQGemmMaxRowPairs] = {};  // null: use kernel[][][0]
};

// The kernels of `target` (nullptr for kNone or when not compiled for this
// architecture, e.g. kAvx2 on ARM). Whether the CPU can run them is
// CpuSupports's business.
const QGemmKernels* GetQGemmKernels(QGemmTarget target);
bool CpuSupports(QGemmTarget target);
// The weight type `kind` computes (kQ4_0Repacked, kQ4_0x8: Q4_0).
TensorType QGemmWeightType(QGemmKind kind);

// Whether `target` has kernels for `kind` (Q5_0 has none on ARM, IQ4_NL
// only on AVX-512).
bool QGemmHasKind(QGemmTarget target, QGemmKind kind);

// The target MatMul uses now: the best one this CPU supports, capped by the
// Highway target dispatch runs (so hwy::SetSupportedTargetsForTest forces it
// too: AVX3 or better -> VNNI if the CPU has it, AVX2 -> AVX2; NEON (or SVE)
// -> kNeonDot if the CPU has dotprod; else kNone).
QGemmTarget ActiveQGemmTarget();

// Caps ActiveQGemmTarget at `cap` (kNone < kNeonDot < kAvx2 < kAvx512Vnni;
// a target above the cap falls to the cap if that has kernels here, else
// to kNone); kAvx512Vnni, the default, caps nothing. For SetCpuTarget
// (cpu_target.h).
void SetQGemmTargetCap(QGemmTarget cap);

// Every target the CPU can run, kNone included (for tests).
// Returns the count written to `out` (at most 3).
int AvailableQGemmTargets(QGemmTarget out[3]);

// y[t * rows + r] = dot(W row r, x row t) with the numerics above, using
// `target`'s kernels for `kind`. Preconditions: cols % 32 == 0; rows,
// n_tokens > 0 (kQ4_0x8: W in that layout, rows % 8 == 0);
// QGemmHasKind(target, kind) and CpuSupports(target).
// Splits row groups over `pool` (nullptr: the caller). Hot.
void QGemm(QGemmTarget target, QGemmKind kind, const void* w, int64_t rows, int64_t cols,
           const float* x, int64_t n_tokens, float* y, ThreadPool* pool);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_QGEMM_INTERNAL_H_
