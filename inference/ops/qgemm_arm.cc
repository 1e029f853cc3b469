// ARM micro-kernels of the quantized GEMM (see qgemm_internal.h): NEON with
// the dot-product instruction SDOT (vdotq_s32, ARMv8.2 dotprod). Like the
// x86 ones they are written with intrinsics under a per-function target
// attribute and dispatched at run time by qgemm.cc (CpuSupports): dotprod is
// optional (Cortex-A53/A72 lack it), and the build's baseline is plain
// ARMv8.0 NEON. The scalar reference is DotQ8_0 / DotQ4_0 in matmul.cc; the
// tests compare bit for bit.
//
// SDOT computes exactly the reference's lane sums: vdotq_s32(acc, a, b) lane
// i = acc_i + a[4i..4i+3] . b[4i..4i+3], each int8 x int8 product and the sum
// in 32 bits (no saturation, no intermediate narrowing). So per block and
// output, SDOT over values 0..15 gives lanes 0-3 and SDOT over values 16..31
// lanes 4-7. Both operands are signed, for any int8 values:
//   - Q8_0: weights x activations as they are (x_offset128 = false).
//   - Q4_0: nibble - 8 in [-8, 7] (low nibbles = values 0..15, high nibbles =
//     values 16..31, as in DequantizeRow) x activations.
// The float part is the reference's: scale = d_w * d_x rounded to f32, then
// one fused multiply-add per lane and block, in block order (in the repacked
// Q4_0 order, one per block of the lanes' integer total).
// Hot: this is the inner loop of every Q8_0/Q4_0 MatMul on ARM.
#include "inference/ops/qgemm_internal.h"

#if defined(__aarch64__)

#include <arm_neon.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>

#include <cmath>
#include <cstring>

#include "inference/ops/matmul_internal.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

// GCC 12's arm_neon.h declares vdotq_s32 under "arch=armv8.2-a+dotprod";
// "+dotprod" alone does not let it inline. Every CPU with dotprod is at least
// ARMv8.2, so the rest of ARMv8.2 in these functions is safe too. GCC's
// pre-RA scheduler hoists the loads of a block so far that the tiles below
// spill accumulators to the stack in the inner loop; without it they stay in
// registers (out-of-order cores reorder anyway). Clang 14's arm_neon.h has
// vdotq_s32 only when the whole file targets dotprod, so there the kernels
// exist only in such builds.
#if !defined(__clang__)
#define RINGLM_NEON_DOT_TARGET \
  __attribute__((target("arch=armv8.2-a+dotprod"), optimize("no-schedule-insns")))
#define RINGLM_HAVE_NEON_DOT 1
#elif defined(__ARM_FEATURE_DOTPROD)
#define RINGLM_NEON_DOT_TARGET
#define RINGLM_HAVE_NEON_DOT 1
#else
#define RINGLM_HAVE_NEON_DOT 0
#endif
// GCC keeps the accumulator arrays in memory (a store per block) unless the
// small loops over rows and tokens are unrolled early.
#define RINGLM_UNROLL _Pragma("GCC unroll 16")

#if RINGLM_HAVE_NEON_DOT

// f16 -> f32, exact for every half (FCVT), as Fp16ToFp32.
inline float HalfToFloat(const void* p) {
  __fp16 h;
  std::memcpy(&h, p, sizeof(h));
  return static_cast<float>(h);
}

// ReduceLanes<8> of lanes 0-3 in lo and 4-7 in hi, in registers (an array
// would keep GCC from holding the accumulators in registers): the same adds
// in the same order, v[i] + v[i + 4], then v[i] + v[i + 2], then v[0] + v[1].
inline float ReduceLanes8(float32x4_t lo, float32x4_t hi) {
  const float32x4_t v4 = vaddq_f32(lo, hi);
  const float32x2_t v2 = vadd_f32(vget_low_f32(v4), vget_high_f32(v4));
  return vget_lane_f32(v2, 0) + vget_lane_f32(v2, 1);
}

// ---------------------------------------------------------------------------
// Two float32x4 hold the 8 lanes of one (row, token): acc0 lanes 0-3, acc1
// lanes 4-7.

// One block of one (row, token): SDOT over values 0..15 gives lanes 0-3,
// over values 16..31 lanes 4-7; then acc = fma(scale, float(sum), acc).
RINGLM_NEON_DOT_TARGET inline void DotBlock(const int8x16_t w[2], int8x16_t x0, int8x16_t x1,
                                            float32x4_t scale, float32x4_t& acc0,
                                            float32x4_t& acc1) {
  const int32x4_t zero = vdupq_n_s32(0);
  acc0 = vfmaq_f32(acc0, scale, vcvtq_f32_s32(vdotq_s32(zero, w[0], x0)));
  acc1 = vfmaq_f32(acc1, scale, vcvtq_f32_s32(vdotq_s32(zero, w[1], x1)));
}

// One block of one (row, token) in the repacked Q4_0 order: both SDOTs into
// one vector, its lanes summed (exact integers), then one fma.
RINGLM_NEON_DOT_TARGET inline void DotBlockRepacked(const int8x16_t w[2], int8x16_t x0,
                                                    int8x16_t x1, float scale, float& acc) {
  const int32x4_t sum = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w[0], x0), w[1], x1);
  acc = std::fma(static_cast<float>(vaddvq_s32(sum)), scale, acc);
}

// One block of one (row, token) in either order; dx holds d_x in every lane.
template <bool kRepacked>
RINGLM_NEON_DOT_TARGET inline void DotStep(const int8x16_t w[2], int8x16_t x0, int8x16_t x1,
                                           float dw, float32x4_t dx, float32x4_t& acc0,
                                           float32x4_t& acc1, float& serial) {
  if constexpr (kRepacked) {
    DotBlockRepacked(w, x0, x1, dw * vgetq_lane_f32(dx, 0), serial);
  } else {
    DotBlock(w, x0, x1, vmulq_n_f32(dx, dw), acc0, acc1);
  }
}

// R rows x T tokens (T = 2P for the tile table, 1 for decode).
template <int R, int T, QGemmKind kKind>
RINGLM_NEON_DOT_TARGET void KernelNeonDot(const uint8_t* w, size_t row_bytes, const uint8_t* x,
                                          size_t pair_stride, int64_t nb, float* out,
                                          int out_stride) {
  constexpr bool kQ4 = kKind != QGemmKind::kQ8_0;
  constexpr bool kRepacked = kKind == QGemmKind::kQ4_0Repacked;
  float32x4_t acc0[R][T], acc1[R][T];
  float serial[R][T];  // kRepacked
  RINGLM_UNROLL
  for (int r = 0; r < R; ++r) {
    RINGLM_UNROLL
    for (int t = 0; t < T; ++t) {
      acc0[r][t] = acc1[r][t] = vdupq_n_f32(0.0f);
      serial[r][t] = 0.0f;
    }
  }

  constexpr size_t kBlockBytes = kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  // Row r's block b: returns its scale; wv = its values 0..15 and 16..31 as
  // int8 (Q4_0: low and high nibbles, minus 8).
  const auto load_w = [&](int r, int64_t b, int8x16_t wv[2]) {
    const uint8_t* blk = w + r * row_bytes + b * kBlockBytes;
    if constexpr (kQ4) {
      const uint8x16_t q = vld1q_u8(blk + 2);
      const int8x16_t k8 = vdupq_n_s8(8);
      wv[0] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), k8);
      wv[1] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), k8);
    } else {
      wv[0] = vld1q_s8(reinterpret_cast<const int8_t*>(blk + 2));
      wv[1] = vld1q_s8(reinterpret_cast<const int8_t*>(blk + 18));
    }
    return HalfToFloat(blk);
  };
  // Token t's record of block b, from its qs: the token's d (f32 x 8) is 64
  // bytes further.
  const auto x_qs = [&](int t, int64_t b) {
    return x + (t / 2) * pair_stride + b * kQGemmRecordBytes + 32 * (t % 2);
  };
  for (int64_t b = 0; b < nb; ++b) {
    // The smaller side stays in registers for the block while the other
    // streams past it: 16 accumulators + at most 4 held operand vectors.
    if constexpr (R <= T) {
      int8x16_t wv[R][2];
      float dw[R];
      RINGLM_UNROLL
      for (int r = 0; r < R; ++r) dw[r] = load_w(r, b, wv[r]);
      RINGLM_UNROLL
      for (int t = 0; t < T; ++t) {
        const uint8_t* xb = x_qs(t, b);
        const int8x16_t x0 = vld1q_s8(reinterpret_cast<const int8_t*>(xb));
        const int8x16_t x1 = vld1q_s8(reinterpret_cast<const int8_t*>(xb + 16));
        const float32x4_t dx = vld1q_f32(reinterpret_cast<const float*>(xb + 64));
        RINGLM_UNROLL
        for (int r = 0; r < R; ++r) {
          DotStep<kRepacked>(wv[r], x0, x1, dw[r], dx, acc0[r][t], acc1[r][t], serial[r][t]);
        }
      }
    } else {
      int8x16_t x0[T], x1[T];
      float32x4_t dx[T];
      RINGLM_UNROLL
      for (int t = 0; t < T; ++t) {
        const uint8_t* xb = x_qs(t, b);
        x0[t] = vld1q_s8(reinterpret_cast<const int8_t*>(xb));
        x1[t] = vld1q_s8(reinterpret_cast<const int8_t*>(xb + 16));
        dx[t] = vld1q_f32(reinterpret_cast<const float*>(xb + 64));
      }
      RINGLM_UNROLL
      for (int r = 0; r < R; ++r) {
        int8x16_t wv[2];
        const float dw = load_w(r, b, wv);
        RINGLM_UNROLL
        for (int t = 0; t < T; ++t) {
          DotStep<kRepacked>(wv, x0[t], x1[t], dw, dx[t], acc0[r][t], acc1[r][t], serial[r][t]);
        }
      }
    }
  }
  RINGLM_UNROLL
  for (int r = 0; r < R; ++r) {
    RINGLM_UNROLL
    for (int t = 0; t < T; ++t) {
      out[r * out_stride + t] = kRepacked ? serial[r][t] : ReduceLanes8(acc0[r][t], acc1[r][t]);
    }
  }
}

// ---------------------------------------------------------------------------
// Kernel table: every R <= kRows, P <= kPairs, for the tails.

// Tile sizes: 2 rows x 4 tokens = 16 accumulators (of 32 registers), with
// the 4 weight vectors of a block held and the activations streaming past
// them; and 8 rows x 1 token for decode (16 accumulators, the token's 2
// vectors held, the weights streaming).
constexpr int kRows = 2;
constexpr int kPairs = 2;

template <int R, int T>
constexpr QGemmKernel Kernel(QGemmKind kind) {
  switch (kind) {
    case QGemmKind::kQ8_0:
      return &KernelNeonDot<R, T, QGemmKind::kQ8_0>;
    case QGemmKind::kQ4_0:
      return &KernelNeonDot<R, T, QGemmKind::kQ4_0>;
    case QGemmKind::kQ4_0Repacked:
      return &KernelNeonDot<R, T, QGemmKind::kQ4_0Repacked>;
    case QGemmKind::kQ5_0:  // none yet: MatMul keeps its per-dot kernels
    case QGemmKind::kIQ4_NL:
      return nullptr;
  }
  return nullptr;
}

template <int R, int P>
constexpr void Fill(QGemmKernels& k) {
  for (QGemmKind kind : {QGemmKind::kQ8_0, QGemmKind::kQ4_0, QGemmKind::kQ4_0Repacked}) {
    k.kernel[static_cast<int>(kind)][R - 1][P - 1] = Kernel<R, 2 * P>(kind);
  }
  if constexpr (P > 1) {
    Fill<R, P - 1>(k);
  } else if constexpr (R > 1) {
    Fill<R - 1, kPairs>(k);
  }
}

template <int RP>
constexpr void FillOneToken(QGemmKernels& k) {
  for (QGemmKind kind : {QGemmKind::kQ8_0, QGemmKind::kQ4_0, QGemmKind::kQ4_0Repacked}) {
    k.one_token[static_cast<int>(kind)][RP - 1] = Kernel<2 * RP, 1>(kind);
  }
  if constexpr (RP > 1) FillOneToken<RP - 1>(k);
}

QGemmKernels MakeNeonDotTable() {
  static_assert(kRows <= kQGemmMaxRows && kPairs <= kQGemmMaxPairs);
  QGemmKernels k;
  for (QGemmKernels::Tile& tile : k.tile) tile = {kRows, kPairs};
  k.x_offset128 = false;
  Fill<kRows, kPairs>(k);
  FillOneToken<kQGemmMaxRowPairs>(k);
  return k;
}

#endif  // RINGLM_HAVE_NEON_DOT

}  // namespace

const QGemmKernels* GetQGemmKernels(QGemmTarget target) {
#if RINGLM_HAVE_NEON_DOT
  static const QGemmKernels neon_dot = MakeNeonDotTable();
  if (target == QGemmTarget::kNeonDot) return &neon_dot;
#endif
  (void)target;
  return nullptr;
}

bool CpuSupports(QGemmTarget target) {
  switch (target) {
    case QGemmTarget::kNone:
      return true;
    case QGemmTarget::kNeonDot: {
      static const bool dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
      return dotprod;
    }
    default:  // x86 targets
      return false;
  }
}

}  // namespace ringlm

#elif !defined(__x86_64__)  // no kernels (x86's are in qgemm_x86.cc)

namespace ringlm {
const QGemmKernels* GetQGemmKernels(QGemmTarget) { return nullptr; }
bool CpuSupports(QGemmTarget target) { return target == QGemmTarget::kNone; }
}  // namespace ringlm

#endif  // __aarch64__
