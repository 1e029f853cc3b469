// x86 micro-kernels of the quantized GEMM (see qgemm_internal.h), written
// with intrinsics under per-function target attributes: Highway 1.0.3 has no
// 8-bit dot-product op (no vpdpbusd), so these are dispatched at run time by
// qgemm.cc (CpuSupports) rather than by HWY_DYNAMIC_DISPATCH. The scalar
// reference is DotQ8_0 / DotQ4_0 in matmul.cc; the tests compare bit for bit.
//
// Exactness of the integer lane sums (4 products each):
//   - VNNI Q8_0: vpdpbusd(u = x + 128, s = w) = sum x*w + 128 * sum w; the
//     second term is computed with the same instruction and subtracted first
//     (the accumulator starts at -128 * sum w). No saturation: vpdpbusd adds
//     in 32 bits. Valid for any int8 w and x.
//   - VNNI Q4_0: vpdpbusd(u = nibble, s = x) - 8 * sum x.
//   - AVX2 Q8_0: vpmaddubsw(|w|, sign(x, w)) then vpmaddwd with ones. A pair
//     is at most 2 * 128 * 127 < 32767, so it never saturates; needs x in
//     [-127, 127], which QuantizeRowQ8_0Activations guarantees.
//   - AVX2 Q4_0: vpmaddubsw(nibble, x) (pairs <= 2 * 15 * 128) - 8 * sum x.
//   - Q5_0: as Q4_0 with the fifth bit above the nibble (values 0..31) and
//     16 * sum x (pairs <= 2 * 31 * 128).
// The float part is the reference's: scale = d_w * d_x rounded to f32, then
// one fused multiply-add per lane and block.
// The repacked Q4_0 order (qgemm_internal.h) sums each output's 8 lanes of a
// block as integers, then FMAs once.
// Hot: this is the inner loop of every Q8_0/Q4_0 MatMul.
#include "inference/ops/qgemm_internal.h"

#if defined(__x86_64__)

// GCC 12 reports its own _mm512_undefined_*() (used inside broadcast and
// convert intrinsics) as maybe-uninitialized: a false positive.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <cpuid.h>
#include <immintrin.h>

#include <cstring>

#include "inference/ops/matmul_internal.h"
#include "inference/ops/quant.h"
#include "inference/ops/weight_layout.h"

namespace ringlm {
namespace {

// Block b of the R rows kPrefetchAheadRows further on, as a tile walks block
// b of its own rows: a small batch (decode, a few streams) reads each row
// once, from memory.
constexpr size_t BlockBytes(QGemmKind kind) {
  return kind == QGemmKind::kQ8_0     ? sizeof(BlockQ8_0)
         : kind == QGemmKind::kQ5_0   ? sizeof(BlockQ5_0)
         : kind == QGemmKind::kIQ4_NL ? sizeof(BlockIQ4_NL)
                                      : sizeof(BlockQ4_0);
}

template <int R, QGemmKind K>
inline void PrefetchRowsAhead(const uint8_t* w, size_t row_bytes, int64_t b) {
  constexpr size_t kStep = R * BlockBytes(K);
  PrefetchAhead<kStep>(w + kPrefetchAheadRows * row_bytes + b * kStep);
}

// Q4_0/Q5_0 block b of a row: its f16 scale, its 16 bytes of nibbles and
// (Q5_0) its 32 fifth bits.
template <QGemmKind K>
inline const uint8_t* NibbleBlock(const uint8_t* row, int64_t b, uint16_t* d16, uint32_t* qh) {
  if constexpr (K == QGemmKind::kQ5_0) {
    const BlockQ5_0* blk = reinterpret_cast<const BlockQ5_0*>(row) + b;
    std::memcpy(d16, &blk->d, sizeof(*d16));
    std::memcpy(qh, blk->qh, sizeof(*qh));
    return blk->qs;
  } else {
    const BlockQ4_0* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
    std::memcpy(d16, &blk->d, sizeof(*d16));
    *qh = 0;
    return blk->qs;
  }
}

#define RINGLM_VNNI_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")))
// ---------------------------------------------------------------------------
// AVX512-VNNI: one zmm holds the 8 lanes of (row r, token 2p) in its low half
// and of (row r, token 2p + 1) in its high half.

// The nibbles of v's 128-bit chunks: chunks 0 and 2 keep the low nibbles,
// 1 and 3 the high ones (each chunk holds 16 bytes of a nibble block).
RINGLM_VNNI_TARGET inline __m512i SplitNibbles(__m512i v) {
  return _mm512_and_si512(_mm512_mask_blend_epi64(0xCC, v, _mm512_srli_epi16(v, 4)),
                          _mm512_set1_epi8(0x0F));
}

// One nibble block's 16 bytes as 64 values: positions 0..31, twice.
RINGLM_VNNI_TARGET inline __m512i NibblesOfBlock(const uint8_t* qs) {
  return SplitNibbles(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs))));
}

template <int R, int P, QGemmKind K>
RINGLM_VNNI_TARGET void KernelVnni(const uint8_t* w, size_t row_bytes, const uint8_t* x,
                                   size_t pair_stride, int64_t nb, float* out, int out_stride) {
  constexpr bool kQ4 = K != QGemmKind::kQ8_0;  // nibbles (Q4_0, Q5_0)
  constexpr bool kQ5 = K == QGemmKind::kQ5_0;
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r) {
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  const __m512i zero = _mm512_setzero_si512();
  const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
  // The value offset of the nibble types (8, or 16 with Q5_0's fifth bit).
  const __m512i koffset = _mm512_set1_epi8(kQ5 ? 16 : 8);
  const __m512i k10 = _mm512_set1_epi8(0x10);
  for (int64_t b = 0; b < nb; ++b) {
    __m512i xv[P];
    __m512i xcorr[P];  // Q4_0/Q5_0: -offset * sum of 4 activations, per lane
    const uint8_t* xb[P];
    for (int p = 0; p < P; ++p) {
      xb[p] = x + p * pair_stride + b * kQGemmRecordBytes;
      xv[p] = _mm512_load_si512(xb[p]);
      if constexpr (kQ4) {
        xcorr[p] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, koffset, xv[p]));
      }
    }
    PrefetchRowsAhead<R, K>(w, row_bytes, b);
    for (int r = 0; r < R; ++r) {
      const uint8_t* wr = w + r * row_bytes;
      __m512i wv;
      __m512i wcorr;  // Q8_0: -128 * sum of 4 weights, per lane
      uint16_t d16;
      if constexpr (kQ4) {
        uint32_t qh;
        const uint8_t* qs = NibbleBlock<K>(wr, b, &d16, &qh);
        // Byte i is position i % 32, so Q5_0's fifth bits are qh twice over.
        wv = NibblesOfBlock(qs);
        if constexpr (kQ5) {
          wv = _mm512_or_si512(wv, _mm512_maskz_mov_epi8(qh | (uint64_t{qh} << 32), k10));
        }
      } else {
        const BlockQ8_0* blk = reinterpret_cast<const BlockQ8_0*>(wr) + b;
        std::memcpy(&d16, &blk->d, sizeof(d16));
        wv = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs)));
        wcorr = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k80, wv));
      }
      const __m512 dw = _mm512_set1_ps(_cvtsh_ss(d16));
      for (int p = 0; p < P; ++p) {
        __m512i sum;
        if constexpr (kQ4) {
          sum = _mm512_dpbusd_epi32(xcorr[p], wv, xv[p]);
        } else {
          sum = _mm512_dpbusd_epi32(wcorr, xv[p], wv);
        }
        const __m512 scale =
            _mm512_mul_ps(dw, _mm512_load_ps(reinterpret_cast<const float*>(xb[p] + 64)));
        acc[r][p] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(sum), acc[r][p]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int p = 0; p < P; ++p) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[r][p]);
      out[r * out_stride + 2 * p] = ReduceLanes<8>(lanes);
      out[r * out_stride + 2 * p + 1] = ReduceLanes<8>(lanes + 8);
    }
  }
}

// AVX512-VNNI, one token (decode): one zmm holds the 8 lanes of (row 2j,
// token 0) in its low half and of (row 2j + 1, token 0) in its high half, so
// no lane is wasted on a padding token. Same numerics as KernelVnni.
template <int RP, QGemmKind K>
RINGLM_VNNI_TARGET void KernelVnniOneToken(const uint8_t* w, size_t row_bytes, const uint8_t* x,
                                           size_t /*pair_stride*/, int64_t nb, float* out,
                                           int out_stride) {
  constexpr bool kQ4 = K != QGemmKind::kQ8_0;  // nibbles (Q4_0, Q5_0)
  constexpr bool kQ5 = K == QGemmKind::kQ5_0;
  __m512 acc[RP];
  for (int j = 0; j < RP; ++j) acc[j] = _mm512_setzero_ps();
  const __m512i zero = _mm512_setzero_si512();
  const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i koffset = _mm512_set1_epi8(kQ5 ? 16 : 8);
  const __m512i k10 = _mm512_set1_epi8(0x10);
  // Picks f32 lane 0 into the low half and lane 1 into the high half.
  const __m512i halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  constexpr size_t kBlockBytes = BlockBytes(K);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* xb = x + b * kQGemmRecordBytes;
    const __m512i xv =
        _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(xb)));
    const __m512 dx = _mm512_set1_ps(*reinterpret_cast<const float*>(xb + 64));
    __m512i xcorr;
    if constexpr (kQ4) xcorr = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, koffset, xv));
    // The next tile of 2 * RP rows follows this one.
    PrefetchAhead<2 * RP * kBlockBytes>(w + 2 * RP * row_bytes + b * (2 * RP * kBlockBytes));
    for (int j = 0; j < RP; ++j) {
      const uint8_t* blk0 = w + (2 * j) * row_bytes + b * kBlockBytes;
      const uint8_t* blk1 = blk0 + row_bytes;
      uint16_t d0, d1;
      std::memcpy(&d0, blk0, sizeof(d0));
      std::memcpy(&d1, blk1, sizeof(d1));
      const __m128i dh = _mm_cvtsi32_si128(static_cast<int>(d0 | (uint32_t{d1} << 16)));
      const __m512 dw = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(_mm_cvtph_ps(dh)));
      __m512i sum;
      if constexpr (kQ4) {
        uint16_t d;
        uint32_t qh0, qh1;
        const uint8_t* qs0 = NibbleBlock<K>(w + (2 * j) * row_bytes, b, &d, &qh0);
        const uint8_t* qs1 = NibbleBlock<K>(w + (2 * j + 1) * row_bytes, b, &d, &qh1);
        const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0));
        const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1));
        const __m512i v =
            _mm512_inserti64x4(_mm512_broadcast_i32x4(q0), _mm256_broadcastsi128_si256(q1), 1);
        __m512i wv = SplitNibbles(v);
        if constexpr (kQ5) {  // bytes 0-31: row 2j's positions, 32-63: row 2j + 1's
          wv = _mm512_or_si512(wv, _mm512_maskz_mov_epi8(qh0 | (uint64_t{qh1} << 32), k10));
        }
        sum = _mm512_dpbusd_epi32(xcorr, wv, xv);
      } else {
        const __m512i wv = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk0 + 2))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk1 + 2)), 1);
        const __m512i wcorr = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k80, wv));
        sum = _mm512_dpbusd_epi32(wcorr, xv, wv);
      }
      const __m512 scale = _mm512_mul_ps(dw, dx);
      acc[j] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(sum), acc[j]);
    }
  }
  for (int j = 0; j < RP; ++j) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc[j]);
    out[(2 * j) * out_stride] = ReduceLanes<8>(lanes);
    out[(2 * j + 1) * out_stride] = ReduceLanes<8>(lanes + 8);
  }
}

// ---------------------------------------------------------------------------
// AVX2: one ymm holds the 8 lanes of one (row, token).

// One nibble block's 16 bytes as 32 values, byte i = position i: both
// halves hold the 16 bytes and the high half shifts them right by 4 (32-bit
// lanes: the bits that cross a byte are masked off).
RINGLM_AVX2_TARGET inline __m256i NibblesOfBlockAvx2(const uint8_t* qs) {
  const __m256i q =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi32(q, _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0)),
                          _mm256_set1_epi8(0x0F));
}

// Q5_0's fifth bits as bytes: byte i = 0x10 where bit i of qh is set.
RINGLM_AVX2_TARGET inline __m256i FifthBits(uint32_t qh) {
  // Byte i takes byte i / 8 of qh, then keeps its bit i % 8.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(qh)),
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                          _mm256_set1_epi8(0x10));
}

// T tokens (2P for the tile table, 1 for decode).
template <int R, int T, QGemmKind K>
RINGLM_AVX2_TARGET void KernelAvx2(const uint8_t* w, size_t row_bytes, const uint8_t* x,
                                   size_t pair_stride, int64_t nb, float* out, int out_stride) {
  constexpr bool kQ4 = K != QGemmKind::kQ8_0;  // nibbles (Q4_0, Q5_0)
  constexpr bool kQ5 = K == QGemmKind::kQ5_0;
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  const __m256i ones = _mm256_set1_epi16(1);
  // The value offset of the nibble types (8, or 16 with Q5_0's fifth bit).
  const __m256i koffset = _mm256_set1_epi8(kQ5 ? 16 : 8);
  for (int64_t b = 0; b < nb; ++b) {
    __m256i xv[T];
    __m256i xsum8[T];  // Q4_0/Q5_0: offset * sum of 4 activations, per lane
    const uint8_t* xb[T];
    for (int t = 0; t < T; ++t) {
      xb[t] = x + (t / 2) * pair_stride + b * kQGemmRecordBytes + 32 * (t % 2);  // qs
      xv[t] = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb[t]));
      if constexpr (kQ4) xsum8[t] = _mm256_madd_epi16(_mm256_maddubs_epi16(koffset, xv[t]), ones);
    }
    PrefetchRowsAhead<R, K>(w, row_bytes, b);
    for (int r = 0; r < R; ++r) {
      const uint8_t* wr = w + r * row_bytes;
      __m256i wv;
      __m256i wabs;
      uint16_t d16;
      if constexpr (kQ4) {
        uint32_t qh;
        const uint8_t* qs = NibbleBlock<K>(wr, b, &d16, &qh);
        wv = NibblesOfBlockAvx2(qs);
        if constexpr (kQ5) wv = _mm256_or_si256(wv, FifthBits(qh));
      } else {
        const BlockQ8_0* blk = reinterpret_cast<const BlockQ8_0*>(wr) + b;
        std::memcpy(&d16, &blk->d, sizeof(d16));
        wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
        wabs = _mm256_abs_epi8(wv);  // |-128| = 128 read as unsigned
      }
      const __m256 dw = _mm256_set1_ps(_cvtsh_ss(d16));
      for (int t = 0; t < T; ++t) {
        __m256i sum;
        if constexpr (kQ4) {
          sum =
              _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(wv, xv[t]), ones), xsum8[t]);
        } else {
          const __m256i sx = _mm256_sign_epi8(xv[t], wv);
          sum = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, sx), ones);
        }
        const __m256 scale =
            _mm256_mul_ps(dw, _mm256_load_ps(reinterpret_cast<const float*>(xb[t] + 64)));
        acc[r][t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(sum), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[r][t]);
      out[r * out_stride + t] = ReduceLanes<8>(lanes);
    }
  }
}

// ---------------------------------------------------------------------------
// AVX2, Q4_0 in the repacked order: each output's block sum is one integer,
// so the 8 lane sums of 8 outputs are reduced together into one ymm, lane i
// = output i, and FMA'd with their 8 scales. Output n of the tile is (row
// n / T, token n % T).

// v[i] = the sum of s[i]'s 8 lanes (exact: integers).
RINGLM_AVX2_TARGET inline __m256i SumEachOf8(const __m256i s[8]) {
  // Per 128-bit half: ab = [s0, s1, s2, s3 summed over their 4 lanes there],
  // cd the same for s4..s7.
  const __m256i ab =
      _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
  const __m256i cd =
      _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20),
                          _mm256_permute2x128_si256(ab, cd, 0x31));
}

template <int R, int T>
RINGLM_AVX2_TARGET void KernelAvx2Repacked(const uint8_t* w, size_t row_bytes, const uint8_t* x,
                                           size_t pair_stride, int64_t nb, float* out,
                                           int out_stride) {
  constexpr int kOutputs = R * T;
  constexpr int kGroups = (kOutputs + 7) / 8;
  __m256 acc[kGroups];
  for (int g = 0; g < kGroups; ++g) acc[g] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i k8 = _mm256_set1_epi8(8);
  for (int64_t b = 0; b < nb; ++b) {
    __m256i xv[T];
    __m256i xsum8[T];  // 8 * sum of 4 activations, per lane
    float dx[T];
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + (t / 2) * pair_stride + b * kQGemmRecordBytes + 32 * (t % 2);
      xv[t] = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb));
      xsum8[t] = _mm256_madd_epi16(_mm256_maddubs_epi16(k8, xv[t]), ones);
      dx[t] = *reinterpret_cast<const float*>(xb + 64);
    }
    PrefetchRowsAhead<R, QGemmKind::kQ4_0Repacked>(w, row_bytes, b);
    __m256i wv[R];
    float dw[R];
    for (int r = 0; r < R; ++r) {
      const BlockQ4_0* blk = reinterpret_cast<const BlockQ4_0*>(w + r * row_bytes) + b;
      uint16_t d16;
      std::memcpy(&d16, &blk->d, sizeof(d16));
      dw[r] = _cvtsh_ss(d16);
      wv[r] = NibblesOfBlockAvx2(blk->qs);
    }
    for (int g = 0; g < kGroups; ++g) {
      __m256i sums[8];
      for (int i = 0; i < 8; ++i) {
        const int n = 8 * g + i;
        sums[i] = n < kOutputs
                      ? _mm256_sub_epi32(
                            _mm256_madd_epi16(_mm256_maddubs_epi16(wv[n / T], xv[n % T]), ones),
                            xsum8[n % T])
                      : _mm256_setzero_si256();
      }
      __m256 scale;
      if constexpr (R == 8 && T == 1) {  // decode: lane i is row i
        scale =
            _mm256_mul_ps(_mm256_setr_ps(dw[0], dw[1], dw[2], dw[3], dw[4], dw[5], dw[6], dw[7]),
                          _mm256_set1_ps(dx[0]));
      } else if constexpr (R == 2 && T == 4) {  // the prompt tile
        scale =
            _mm256_mul_ps(_mm256_setr_ps(dw[0], dw[0], dw[0], dw[0], dw[1], dw[1], dw[1], dw[1]),
                          _mm256_setr_ps(dx[0], dx[1], dx[2], dx[3], dx[0], dx[1], dx[2], dx[3]));
      } else {
        alignas(32) float lanes[8] = {};
        for (int i = 0; i < 8 && 8 * g + i < kOutputs; ++i) {
          lanes[i] = dw[(8 * g + i) / T] * dx[(8 * g + i) % T];
        }
        scale = _mm256_load_ps(lanes);
      }
      acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(SumEachOf8(sums)), scale, acc[g]);
    }
  }
  alignas(32) float lanes[8 * kGroups];
  for (int g = 0; g < kGroups; ++g) _mm256_store_ps(lanes + 8 * g, acc[g]);
  for (int n = 0; n < kOutputs; ++n) out[(n / T) * out_stride + n % T] = lanes[n];
}

// AVX2, a kQ4_0x8 group (8 rows) x T tokens: one ymm holds two rows' 16
// bytes of nibbles (row 2k in its low half, 2k + 1 in its high half), met by
// the token's activations 0..15 (low nibbles) and 16..31 (high nibbles) in
// both halves. maddubs then madd give each row 4 lanes; -8 * the activations
// of each lane corrects them (exact), and three hadds leave the 8 rows'
// totals in the order kHaddRow.
constexpr int kHaddRow[8] = {0, 2, 4, 6, 1, 3, 5, 7};
template <int T>
RINGLM_AVX2_TARGET void KernelAvx2X8(const uint8_t* w, size_t /*row_bytes*/, const uint8_t* x,
                                     size_t pair_stride, int64_t nb, float* out, int out_stride) {
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i k8 = _mm256_set1_epi8(8);
  const __m256i k0f = _mm256_set1_epi8(0x0F);
  const __m256i hadd_order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* record = w + b * kQ4_0x8RecordBytes;
    __m256i lo[4], hi[4];
    for (int k = 0; k < 4; ++k) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record + 16 + 32 * k));
      lo[k] = _mm256_and_si256(q, k0f);
      hi[k] = _mm256_and_si256(_mm256_srli_epi16(q, 4), k0f);
    }
    const __m256 dw = _mm256_permutevar8x32_ps(
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(record))), hadd_order);
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + (t / 2) * pair_stride + b * kQGemmRecordBytes + 32 * (t % 2);
      const __m256i xlo =
          _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(xb)));
      const __m256i xhi =
          _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(xb + 16)));
      // Lane sums of 4 + 4 products stay within int16 in maddubs (at most
      // 2 * 2 * 15 * 128 in magnitude) before madd widens them.
      const __m256i corr = _mm256_madd_epi16(
          _mm256_add_epi16(_mm256_maddubs_epi16(k8, xlo), _mm256_maddubs_epi16(k8, xhi)), ones);
      __m256i s[4];
      for (int k = 0; k < 4; ++k) {
        s[k] =
            _mm256_sub_epi32(_mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo[k], xlo),
                                                                _mm256_maddubs_epi16(hi[k], xhi)),
                                               ones),
                             corr);
      }
      const __m256i totals =
          _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
      const __m256 dx = _mm256_set1_ps(*reinterpret_cast<const float*>(xb + 64));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(totals), _mm256_mul_ps(dw, dx), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc[t]);
    for (int l = 0; l < 8; ++l) out[kHaddRow[l] * out_stride + t] = lanes[l];
  }
}

// AVX512-VNNI, Q4_0 in the repacked order: the layouts of KernelVnni and
// KernelVnniOneToken (one zmm = two outputs' 8 lanes: output 2i in zmm i's
// low half, 2i + 1 in its high half); each 4 zmm are reduced to one ymm of 8
// outputs' totals and FMA'd with those outputs' scales.

// Lane l of SumEachOf8Halves holds output kHalfOf[l].
constexpr int kHalfOf[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// The totals of the 8 outputs of z[0..3], in the order kHalfOf: unpacks and
// adds within 128-bit chunks, then across them (exact integers).
RINGLM_VNNI_TARGET inline __m256i SumEachOf8Halves(const __m512i z[4]) {
  // t0 chunk c: lanes (0 + 2, 1 + 3) of z0's and z1's 4 lanes there.
  const __m512i t0 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(z[0], z[1]), _mm512_unpackhi_epi32(z[0], z[1]));
  const __m512i t1 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(z[2], z[3]), _mm512_unpackhi_epi32(z[2], z[3]));
  // u chunk c: z0..z3's sums of their 4 lanes in chunk c.
  const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
  // Chunks 0 + 1 (low halves) and 2 + 3 (high halves).
  const __m512i v = _mm512_add_epi32(u, _mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_castsi512_si256(_mm512_shuffle_i32x4(v, v, _MM_SHUFFLE(0, 0, 2, 0)));
}

// R rows x 2P tokens. zmm (r, p) holds tokens 2p and 2p + 1 of row r: output
// n = 2 * (r * P + p) + h is (row r, token 2p + h).
template <int R, int P>
RINGLM_VNNI_TARGET void KernelVnniRepacked(const uint8_t* w, size_t row_bytes, const uint8_t* x,
                                           size_t pair_stride, int64_t nb, float* out,
                                           int out_stride) {
  constexpr int kZmm = R * P;
  constexpr int kGroups = (kZmm + 3) / 4;
  __m256 acc[kGroups];
  for (int g = 0; g < kGroups; ++g) acc[g] = _mm256_setzero_ps();
  const __m512i zero = _mm512_setzero_si512();
  const __m512i k8 = _mm512_set1_epi8(8);
  for (int64_t b = 0; b < nb; ++b) {
    __m512i xv[P];
    __m512i xcorr[P];  // -8 * sum of 4 activations, per lane
    float dx[2 * P];
    for (int p = 0; p < P; ++p) {
      const uint8_t* xb = x + p * pair_stride + b * kQGemmRecordBytes;
      xv[p] = _mm512_load_si512(xb);
      xcorr[p] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k8, xv[p]));
      dx[2 * p] = *reinterpret_cast<const float*>(xb + 64);
      dx[2 * p + 1] = *reinterpret_cast<const float*>(xb + 96);
    }
    PrefetchRowsAhead<R, QGemmKind::kQ4_0Repacked>(w, row_bytes, b);
    __m512i sums[kGroups * 4];
    float dw[R];
    for (int r = 0; r < R; ++r) {
      const BlockQ4_0* blk = reinterpret_cast<const BlockQ4_0*>(w + r * row_bytes) + b;
      uint16_t d16;
      std::memcpy(&d16, &blk->d, sizeof(d16));
      dw[r] = _cvtsh_ss(d16);
      const __m512i wv = NibblesOfBlock(blk->qs);
      for (int p = 0; p < P; ++p) sums[r * P + p] = _mm512_dpbusd_epi32(xcorr[p], wv, xv[p]);
    }
    for (int n = kZmm; n < kGroups * 4; ++n) sums[n] = zero;
    for (int g = 0; g < kGroups; ++g) {
      __m256 scale;
      if constexpr (P == 4) {  // group g: row g's 8 tokens, in the order kHalfOf
        scale = _mm256_mul_ps(_mm256_set1_ps(dw[g]), _mm256_setr_ps(dx[0], dx[2], dx[4], dx[6],
                                                                    dx[1], dx[3], dx[5], dx[7]));
      } else {
        alignas(32) float lanes[8] = {};
        for (int l = 0; l < 8; ++l) {
          const int n = 8 * g + kHalfOf[l];
          if (n < 2 * kZmm) lanes[l] = dw[n / (2 * P)] * dx[n % (2 * P)];
        }
        scale = _mm256_load_ps(lanes);
      }
      acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(SumEachOf8Halves(sums + 4 * g)), scale, acc[g]);
    }
  }
  for (int g = 0; g < kGroups; ++g) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc[g]);
    for (int l = 0; l < 8; ++l) {
      const int n = 8 * g + kHalfOf[l];
      if (n < 2 * kZmm) out[(n / (2 * P)) * out_stride + n % (2 * P)] = lanes[l];
    }
  }
}

// AVX512-VNNI, IQ4_NL (ggml_vec_dot_iq4_nl_q8_0's order, matmul.h): the
// layout of KernelVnni, with each output's even and odd blocks in two
// accumulators, added before the halving sum; an odd last block joins the
// reduced sum as one integer. The levels are signed, so the activations are
// stored as x + 128 and -128 * sum of 4 levels corrects each lane, as Q8_0's.
template <int R, int P>
RINGLM_VNNI_TARGET void KernelVnniIq4Nl(const uint8_t* w, size_t row_bytes, const uint8_t* x,
                                        size_t pair_stride, int64_t nb, float* out,
                                        int out_stride) {
  __m512 acc[2][R][P];
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < R; ++r) {
      for (int p = 0; p < P; ++p) acc[h][r][p] = _mm512_setzero_ps();
    }
  }
  int32_t last[R][2 * P] = {};  // an odd last block's integer sums
  const __m512i zero = _mm512_setzero_si512();
  const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i levels =
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues)));
  for (int64_t b = 0; b < nb; ++b) {
    const int h = static_cast<int>(b % 2);
    const bool unpaired = nb % 2 == 1 && b == nb - 1;
    __m512i xv[P];
    const uint8_t* xb[P];
    for (int p = 0; p < P; ++p) {
      xb[p] = x + p * pair_stride + b * kQGemmRecordBytes;
      xv[p] = _mm512_load_si512(xb[p]);
    }
    PrefetchRowsAhead<R, QGemmKind::kIQ4_NL>(w, row_bytes, b);
    for (int r = 0; r < R; ++r) {
      const BlockIQ4_NL* blk = reinterpret_cast<const BlockIQ4_NL*>(w + r * row_bytes) + b;
      uint16_t d16;
      std::memcpy(&d16, &blk->d, sizeof(d16));
      // As Q4_0's nibbles (positions 0..15, 16..31, twice), looked up.
      const __m512i wv = _mm512_shuffle_epi8(levels, NibblesOfBlock(blk->qs));
      const __m512i wcorr = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k80, wv));
      const __m512 dw = _mm512_set1_ps(_cvtsh_ss(d16));
      for (int p = 0; p < P; ++p) {
        const __m512i sum = _mm512_dpbusd_epi32(wcorr, xv[p], wv);
        if (unpaired) {
          alignas(64) int32_t lanes[16];
          _mm512_store_si512(lanes, sum);
          for (int l = 0; l < 8; ++l) {
            last[r][2 * p] += lanes[l];
            last[r][2 * p + 1] += lanes[8 + l];
          }
          continue;
        }
        const __m512 scale =
            _mm512_mul_ps(dw, _mm512_load_ps(reinterpret_cast<const float*>(xb[p] + 64)));
        acc[h][r][p] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(sum), acc[h][r][p]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int p = 0; p < P; ++p) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, _mm512_add_ps(acc[0][r][p], acc[1][r][p]));
      for (int t = 0; t < 2; ++t) {
        float sum = ReduceLanes<8>(lanes + 8 * t);
        if (nb % 2 == 1) {
          const BlockIQ4_NL* blk =
              reinterpret_cast<const BlockIQ4_NL*>(w + r * row_bytes) + (nb - 1);
          const float dx = *reinterpret_cast<const float*>(
              x + p * pair_stride + (nb - 1) * kQGemmRecordBytes + 64 + 32 * t);
          sum = std::fma(_cvtsh_ss(blk->d) * dx, static_cast<float>(last[r][2 * p + t]), sum);
        }
        out[r * out_stride + 2 * p + t] = sum;
      }
    }
  }
}

// One token (decode), 2 * RP <= 8 rows, each row in one 128-bit chunk: zmm A
// holds rows 0..3's 16 bytes of nibbles, zmm B rows 4..7's, loaded straight
// into their chunks. The low nibbles (positions 0..15) meet the activations
// 0..15 broadcast to every chunk, the high ones (16..31) activations 16..31,
// so each chunk's 4 lanes hold its row's block sum in parts (exact), which
// one unpack-and-add folds into the 8 rows' totals (SumEachRow).

// The 8 rows' totals of a (rows 0..3, one per 128-bit chunk) and b (rows
// 4..7), row 0 first (exact integers).
RINGLM_VNNI_TARGET inline __m256i SumEachRow(__m512i a, __m512i b) {
  // Chunk c: (a0 + a2, b0 + b2, a1 + a3, b1 + b3) of its lanes.
  const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  // Chunk c: (a, b, a, b) totals: row c, row c + 4.
  const __m512i v = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));
  const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi32(pick, v));
}

// A token's block as the row-per-chunk Q4_0 kernels meet it: activations
// 0..15 (for the low nibbles) and 16..31 (high) broadcast to every 128-bit
// chunk, -8 times their sum spread over each chunk's 4 lanes (the nibbles'
// offset, exact), and the block's scale.
struct ChunkActivations {
  __m512i lo, hi, corr;
  __m256 d;
};
RINGLM_VNNI_TARGET inline ChunkActivations LoadChunkActivations(const uint8_t* xb) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i k8 = _mm512_set1_epi8(8);
  ChunkActivations a;
  a.lo = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(xb)));
  a.hi = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(xb + 16)));
  a.corr =
      _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, k8, a.lo), k8, a.hi));
  a.d = _mm256_set1_ps(*reinterpret_cast<const float*>(xb + 64));
  return a;
}

// Each chunk's 4 lane sums of one row's block (its low nibbles `lo` and
// high nibbles `hi`, one row per chunk) against `a`, exact.
RINGLM_VNNI_TARGET inline __m512i ChunkLaneSums(__m512i lo, __m512i hi, const ChunkActivations& a) {
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(a.corr, lo, a.lo), hi, a.hi);
}

template <int RP>
RINGLM_VNNI_TARGET void KernelVnniRepackedOneToken(const uint8_t* w, size_t row_bytes,
                                                   const uint8_t* x, size_t /*pair_stride*/,
                                                   int64_t nb, float* out, int out_stride) {
  constexpr int kRows = 2 * RP;
  __m256 acc = _mm256_setzero_ps();
  const __m512i zero = _mm512_setzero_si512();
  const __m512i k0f = _mm512_set1_epi8(0x0F);
  constexpr size_t kBlockBytes = sizeof(BlockQ4_0);
  for (int64_t b = 0; b < nb; ++b) {
    const ChunkActivations a = LoadChunkActivations(x + b * kQGemmRecordBytes);
    // The next tile of 2 * RP rows follows this one.
    PrefetchAhead<2 * RP * kBlockBytes>(w + 2 * RP * row_bytes + b * (2 * RP * kBlockBytes));
    const uint8_t* blk = w + b * kBlockBytes;
    __m512i q[2] = {zero, zero};
    alignas(16) uint16_t d16[8] = {};  // the rows' scales
    for (int r = 0; r < kRows; ++r) {
      const __m128i* qs = reinterpret_cast<const __m128i*>(blk + r * row_bytes + 2);
      q[r / 4] = _mm512_mask_broadcast_i32x4(q[r / 4], static_cast<__mmask16>(0xF << (4 * (r % 4))),
                                             _mm_loadu_si128(qs));
      std::memcpy(&d16[r], blk + r * row_bytes, sizeof(uint16_t));
    }
    __m512i sum[2];
    for (int h = 0; h < (kRows + 3) / 4; ++h) {
      const __m512i lo = _mm512_and_si512(q[h], k0f);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q[h], 4), k0f);
      sum[h] = ChunkLaneSums(lo, hi, a);
    }
    if constexpr (kRows <= 4) sum[1] = zero;
    const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d16)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(SumEachRow(sum[0], sum[1])), _mm256_mul_ps(dw, a.d),
                          acc);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  for (int r = 0; r < kRows; ++r) out[r * out_stride] = lanes[r];
}

// A kQ4_0x8 group (8 rows) x kTokens tokens (1 for decode): per record, the
// 8 scales (one load) and 4 + 4 rows of nibbles (two), each row's in its own
// 128-bit chunk; per token, those meet its activations 0..15 and 16..31
// broadcast, and the rows' lanes are reduced to 8 totals and FMA'd into its
// 8 outputs. From L2, about twice the speed of KernelVnniRepackedOneToken
// for decode and 1.3-1.5 times KernelVnniRepacked's 4 x 8 tile for prompts,
// reading the weights front to back.
template <int kTokens>
RINGLM_VNNI_TARGET void KernelVnniX8(const uint8_t* w, size_t /*row_bytes*/, const uint8_t* x,
                                     size_t pair_stride, int64_t nb, float* out, int out_stride) {
  __m256 acc[kTokens];
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm256_setzero_ps();
  const __m512i k0f = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* record = w + b * kQ4_0x8RecordBytes;
    __m512i lo[2], hi[2];
    for (int h = 0; h < 2; ++h) {
      const __m512i q = _mm512_loadu_si512(record + 16 + 64 * h);
      lo[h] = _mm512_and_si512(q, k0f);
      hi[h] = _mm512_and_si512(_mm512_srli_epi16(q, 4), k0f);
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(record)));
    for (int t = 0; t < kTokens; ++t) {
      const ChunkActivations a =
          LoadChunkActivations(x + (t / 2) * pair_stride + b * kQGemmRecordBytes + 32 * (t % 2));
      const __m512i sum0 = ChunkLaneSums(lo[0], hi[0], a);
      const __m512i sum1 = ChunkLaneSums(lo[1], hi[1], a);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(SumEachRow(sum0, sum1)), _mm256_mul_ps(dw, a.d),
                               acc[t]);
    }
  }
  for (int t = 0; t < kTokens; ++t) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc[t]);
    for (int r = 0; r < 8; ++r) out[r * out_stride + t] = lanes[r];
  }
}

// ---------------------------------------------------------------------------
// Kernel tables: every R <= rows, P <= pairs, for the tails.

constexpr int kIndexQ8 = static_cast<int>(QGemmKind::kQ8_0);
constexpr int kIndexQ4 = static_cast<int>(QGemmKind::kQ4_0);
constexpr int kIndexQ5 = static_cast<int>(QGemmKind::kQ5_0);
constexpr int kQ4Repacked = static_cast<int>(QGemmKind::kQ4_0Repacked);
constexpr int kQ4x8 = static_cast<int>(QGemmKind::kQ4_0x8);
constexpr int kIndexIq4Nl = static_cast<int>(QGemmKind::kIQ4_NL);

// IQ4_NL's prompt tiles (AVX-512 only; its decode stays on the per-dot
// kernels, see MatMul).
template <int R, int P>
constexpr void FillIq4Nl(QGemmKernels& k) {
  k.kernel[kIndexIq4Nl][R - 1][P - 1] = &KernelVnniIq4Nl<R, P>;
  if constexpr (P > 1) {
    FillIq4Nl<R, P - 1>(k);
  } else if constexpr (R > 1) {
    FillIq4Nl<R - 1, 4>(k);
  }
}

template <template <int, int, QGemmKind> class Make, int R, int P>
constexpr void Fill(QGemmKernels& k) {
  k.kernel[kIndexQ8][R - 1][P - 1] = Make<R, P, QGemmKind::kQ8_0>::kFn;
  k.kernel[kIndexQ4][R - 1][P - 1] = Make<R, P, QGemmKind::kQ4_0>::kFn;
  k.kernel[kIndexQ5][R - 1][P - 1] = Make<R, P, QGemmKind::kQ5_0>::kFn;
  if constexpr (P > 1) {
    Fill<Make, R, P - 1>(k);
  } else if constexpr (R > 1) {
    Fill<Make, R - 1, kQGemmMaxPairs>(k);
  }
}

// The repacked-order Q4_0 kernels, from GGUF rows and from kQ4_0x8 groups:
// AVX2's 2 rows x 4 tokens and 8 rows x 1 token, AVX-512's 4 x 8 and 8 x 1.
template <bool kVnni, int R, int P>
constexpr void FillRepacked(QGemmKernels& k) {
  if constexpr (kVnni) {
    k.kernel[kQ4Repacked][R - 1][P - 1] = &KernelVnniRepacked<R, P>;
    // kQ4_0x8: KernelVnniX8's whole groups (rows % 8 == 0), any P.
    if constexpr (R == 4) k.kernel[kQ4x8][7][P - 1] = &KernelVnniX8<2 * P>;
  } else {
    k.kernel[kQ4Repacked][R - 1][P - 1] = &KernelAvx2Repacked<R, 2 * P>;
    if constexpr (R == 2) k.kernel[kQ4x8][7][P - 1] = &KernelAvx2X8<2 * P>;
  }
  if constexpr (P > 1) {
    FillRepacked<kVnni, R, P - 1>(k);
  } else if constexpr (R > 1) {
    FillRepacked<kVnni, R - 1, kVnni ? 4 : 2>(k);
  }
}
template <bool kVnni, int RP>
constexpr void FillRepackedOneToken(QGemmKernels& k) {
  if constexpr (kVnni) {
    k.one_token[kQ4Repacked][RP - 1] = &KernelVnniRepackedOneToken<RP>;
    // kQ4_0x8: always whole groups (rows % 8 == 0).
    if constexpr (RP == kQGemmMaxRowPairs) k.one_token[kQ4x8][RP - 1] = &KernelVnniX8<1>;
  } else {
    k.one_token[kQ4Repacked][RP - 1] = &KernelAvx2Repacked<2 * RP, 1>;
    if constexpr (RP == kQGemmMaxRowPairs) k.one_token[kQ4x8][RP - 1] = &KernelAvx2X8<1>;
  }
  if constexpr (RP > 1) FillRepackedOneToken<kVnni, RP - 1>(k);
}

template <int R, int P, QGemmKind K>
struct MakeVnni {
  static constexpr QGemmKernel kFn = &KernelVnni<R, P, K>;
};
template <int R, int P, QGemmKind K>
struct MakeAvx2 {
  static constexpr QGemmKernel kFn = &KernelAvx2<R, 2 * P, K>;
};

// Tile sizes. VNNI: 4 rows x 8 tokens = 16 zmm accumulators (of 32), and 8
// rows x 1 token for decode. AVX2: 2 rows x 4 tokens = 8 ymm accumulators
// (of 16), and 8 rows x 1 token.
template <int RP>
constexpr void FillOneToken(QGemmKernels& k) {
  k.one_token[kIndexQ8][RP - 1] = &KernelVnniOneToken<RP, QGemmKind::kQ8_0>;
  k.one_token[kIndexQ4][RP - 1] = &KernelVnniOneToken<RP, QGemmKind::kQ4_0>;
  k.one_token[kIndexQ5][RP - 1] = &KernelVnniOneToken<RP, QGemmKind::kQ5_0>;
  if constexpr (RP > 1) FillOneToken<RP - 1>(k);
}

QGemmKernels MakeVnniTable() {
  QGemmKernels k;
  k.tile[kIndexQ8] = k.tile[kIndexQ4] = k.tile[kIndexQ5] = {4, 4};
  k.x_offset128 = true;
  Fill<MakeVnni, 4, kQGemmMaxPairs>(k);
  FillOneToken<kQGemmMaxRowPairs>(k);
  k.tile[kQ4Repacked] = {4, 4};
  k.tile[kQ4x8] = {8, 4};
  FillRepacked<true, 4, 4>(k);
  k.tile[kIndexIq4Nl] = {2, 4};  // 2 x 2 x 4 zmm accumulators
  FillIq4Nl<2, 4>(k);
  FillRepackedOneToken<true, kQGemmMaxRowPairs>(k);
  return k;
}
template <int RP>
constexpr void FillOneTokenAvx2(QGemmKernels& k) {
  k.one_token[kIndexQ8][RP - 1] = &KernelAvx2<2 * RP, 1, QGemmKind::kQ8_0>;
  k.one_token[kIndexQ4][RP - 1] = &KernelAvx2<2 * RP, 1, QGemmKind::kQ4_0>;
  k.one_token[kIndexQ5][RP - 1] = &KernelAvx2<2 * RP, 1, QGemmKind::kQ5_0>;
  if constexpr (RP > 1) FillOneTokenAvx2<RP - 1>(k);
}

QGemmKernels MakeAvx2Table() {
  QGemmKernels k;
  k.tile[kIndexQ8] = k.tile[kIndexQ4] = k.tile[kIndexQ5] = {2, 2};
  k.x_offset128 = false;
  Fill<MakeAvx2, 4, kQGemmMaxPairs>(k);
  FillOneTokenAvx2<kQGemmMaxRowPairs>(k);
  k.tile[kQ4Repacked] = {2, 2};
  k.tile[kQ4x8] = {8, 2};
  FillRepacked<false, 2, 2>(k);
  FillRepackedOneToken<false, kQGemmMaxRowPairs>(k);
  return k;
}

}  // namespace

const QGemmKernels* GetQGemmKernels(QGemmTarget target) {
  static const QGemmKernels vnni = MakeVnniTable();
  static const QGemmKernels avx2 = MakeAvx2Table();
  switch (target) {
    case QGemmTarget::kAvx512Vnni:
      return &vnni;
    case QGemmTarget::kAvx2:
      return &avx2;
    default:
      return nullptr;
  }
}

// CPUID.1:ECX bit 29. Read directly: clang 14's __builtin_cpu_supports does
// not know "f16c".
static bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}

bool CpuSupports(QGemmTarget target) {
  switch (target) {
    case QGemmTarget::kAvx512Vnni:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") && HasF16c();
    case QGemmTarget::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c();
    case QGemmTarget::kNone:
      return true;
    default:  // another architecture's
      return false;
  }
}

}  // namespace ringlm

#endif  // __x86_64__ (other architectures: qgemm_arm.cc)
