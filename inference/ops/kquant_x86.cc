// x86 AVX2 dot products of Q4_K, Q5_K and Q6_K rows with Q8_K activations
// (and the token-group loop that also runs kquant_x86_q2q3.cc's Q2_K and
// Q3_K kernels), and an AVX-512 twin of each for prompts, written with
// intrinsics under target attributes (like qgemm_x86.cc), so MatMul runs
// them only where CpuSupports(QGemmTarget::kAvx2) (kAvx512Vnni for the
// AVX-512 ones).
//
// Numerics: exactly DotQ4_K / DotQ5_K / DotQ6_K of matmul.cc (ggml's AVX2
// order). The integer lane sums are exact, only computed with byte
// multiplies:
//   - Q4_K/Q5_K: vpmaddubsw(q, x), q < 32, gives pairs of at most 2 * 31 *
//     128; then vpmaddwd with the sub-block's scale (< 64) sums pairs into
//     the lane. Q4_K's mins go to 4 float lanes, Q5_K's to one float.
//   - Q6_K: vpmaddubsw(q + 32, x) - vpmaddubsw(32, x) = pairs of (q - 32) * x,
//     each term at most 2 * 63 * 128 < 32767; then vpmaddwd with the scales
//     of the two 16-value halves.
// Lane l of a 32-value group holds positions 4l..4l+3, as in the reference;
// the float part (d * sum, FMA per super-block, halving reduction) is the
// reference's. Hot: every K-quant MatMul on x86.
#include "inference/ops/kquant_internal.h"

#if defined(__x86_64__)

// GCC 12 reports its own _mm512_undefined_*() (used inside insert and
// broadcast intrinsics) as maybe-uninitialized: a false positive.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "inference/ops/fp16.h"
#include "inference/ops/kquant_x86_internal.h"
#include "inference/ops/matmul_internal.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

// Q4_K and Q5_K share their layout, but for Q5_K's fifth bits (qh) and the
// order in which ggml sums their mins.
template <typename Block>
inline constexpr bool kIsQ5_K = std::is_same_v<Block, BlockQ5_K>;

// The values of a Q4_K (4-bit) or Q5_K (5-bit) super-block: lo[c] holds
// values 64c..64c+31, hi[c] values 64c+32..64c+63.
template <typename Block>
RINGLM_AVX2_TARGET inline void UnpackQ45_K(const Block& blk, __m256i lo[4], __m256i hi[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int c = 0; c < 4; ++c) {
    const __m256i q = Load32(blk.qs + 32 * c);
    lo[c] = _mm256_and_si256(q, m4);
    hi[c] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
  }
  if constexpr (kIsQ5_K<Block>) {
    const __m256i h = Load32(blk.qh);
    for (int c = 0; c < 4; ++c) {
      lo[c] = _mm256_or_si256(lo[c], BitAsValue(h, 2 * c, 4));
      hi[c] = _mm256_or_si256(hi[c], BitAsValue(h, 2 * c + 1, 4));
    }
  }
}

// acc_m plus a token's mins term of one super-block, -d_x * dmin * prod, as
// ggml sums it: Q4_K keeps the 4 products in 4 lanes; Q5_K adds them as one
// integer and accumulates into lane 0 alone.
template <typename Block>
RINGLM_AVX2_TARGET inline __m128 AddMins(__m128 acc_m, const Q4_KBlockScales& s,
                                         const BlockQ8_K& xb) {
  if constexpr (kIsQ5_K<Block>) {
    const __m128i prod = Q4_KMinsProducts(s, xb);
    const __m128i pair = _mm_add_epi32(prod, _mm_shuffle_epi32(prod, 0x4E));
    const int32_t mins = _mm_cvtsi128_si32(_mm_add_epi32(pair, _mm_shuffle_epi32(pair, 0xB1)));
    return _mm_fmadd_ss(_mm_set_ss(-xb.d * s.dmin), _mm_set_ss(static_cast<float>(mins)), acc_m);
  } else {
    return AddQ4_KMins(acc_m, s, xb);
  }
}

// The mins terms' sum, in the reference's order.
template <typename Block>
RINGLM_AVX2_TARGET inline float SumMins(__m128 acc_m) {
  if constexpr (kIsQ5_K<Block>) {
    return _mm_cvtss_f32(acc_m);
  } else {
    alignas(16) float am[4];
    _mm_store_ps(am, acc_m);
    return (am[0] + am[2]) + (am[1] + am[3]);
  }
}

// One Q4_K or Q5_K row against T tokens' Q8_K rows (x[t] = token t's
// blocks): the weights are unpacked once per super-block for all T. out[t]
// is computed exactly as for T = 1.
template <typename Block, int T>
RINGLM_AVX2_TARGET void DotQ45_KAvx2(const Block* w, const BlockQ8_K* const* x, int64_t n_blocks,
                                     const uint8_t* ahead, float* out) {
  __m256 acc[T];
  __m128 acc_m[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm256_setzero_ps();
    acc_m[t] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    PrefetchAhead<sizeof(Block)>(ahead + b * sizeof(Block));
    const float wd = Fp16ToFp32(w[b].d);
    Q4_KBlockScales bs;
    GetQ4_KBlockScales(w[b].scales, w[b].dmin, &bs);
    const int16_t* sc = bs.sc;
    __m256i lo[4], hi[4];
    UnpackQ45_K(w[b], lo, hi);
    for (int t = 0; t < T; ++t) {
      const BlockQ8_K& xb = x[t][b];
      acc_m[t] = AddMins<Block>(acc_m[t], bs, xb);
      __m256i sumi = _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {
        const __m256i pl = _mm256_maddubs_epi16(lo[c], Load32(xb.qs + 64 * c));
        const __m256i ph = _mm256_maddubs_epi16(hi[c], Load32(xb.qs + 64 * c + 32));
        sumi = _mm256_add_epi32(
            sumi, _mm256_add_epi32(_mm256_madd_epi16(pl, _mm256_set1_epi16(sc[2 * c])),
                                   _mm256_madd_epi16(ph, _mm256_set1_epi16(sc[2 * c + 1]))));
      }
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(xb.d * wd), _mm256_cvtepi32_ps(sumi), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = Reduce(acc[t]) + SumMins<Block>(acc_m[t]);
}

// q1..q4 of the reference for half c (0 or 1) of a Q6_K super-block, + 32
// (unsigned 6 bits): 32 positions each.
RINGLM_AVX2_TARGET inline void UnpackQ6_K(const BlockQ6_K& blk, int c, __m256i q[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m3 = _mm256_set1_epi8(0x03);
  const uint8_t* ql = blk.ql + 64 * c;
  const __m256i h = Load32(blk.qh + 32 * c);
  const __m256i l1 = Load32(ql);
  const __m256i l2 = Load32(ql + 32);
  q[0] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
  q[1] = _mm256_or_si256(_mm256_and_si256(l2, m4),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l2, 4), m4),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
}

// One Q6_K row against T tokens, unpacked once per half super-block.
template <int T>
RINGLM_AVX2_TARGET void DotQ6_KAvx2(const BlockQ6_K* w, const BlockQ8_K* const* x, int64_t n_blocks,
                                    const uint8_t* ahead, float* out) {
  const __m256i k32 = _mm256_set1_epi8(32);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    PrefetchAhead<sizeof(BlockQ6_K)>(ahead + b * sizeof(BlockQ6_K));
    const float wd = Fp16ToFp32(w[b].d);
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    for (int c = 0; c < 2; ++c) {
      const int8_t* sc = w[b].scales + 8 * c;
      __m256i q[4];
      UnpackQ6_K(w[b], c, q);
      for (int k = 0; k < 4; ++k) {
        // Positions 0..15 take scale 2k, positions 16..31 scale 2k + 1.
        const __m256i scales =
            _mm256_set_m128i(_mm_set1_epi16(sc[2 * k + 1]), _mm_set1_epi16(sc[2 * k]));
        for (int t = 0; t < T; ++t) {
          const __m256i xv = Load32(x[t][b].qs + 128 * c + 32 * k);
          const __m256i p =
              _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], xv), _mm256_maddubs_epi16(k32, xv));
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, scales));
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(x[t][b].d * wd), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = Reduce(acc[t]);
}

// Dot of one row with tokens [t, t + T), T <= 4, for the row's type; the row
// kPrefetchAheadRows further on is fetched meanwhile (a small batch reads
// each row once, from memory).
template <int T>
RINGLM_AVX2_TARGET void DotTokens(const DotJob& job, const void* row, int64_t t, int64_t nb,
                                  float* out) {
  const BlockQ8_K* x[T];
  for (int i = 0; i < T; ++i) x[i] = job.x_q8_k + (t + i) * nb;
  const uint8_t* ahead = static_cast<const uint8_t*>(row) + kPrefetchAheadRows * job.row_bytes;
  switch (job.type) {
    case TensorType::kQ4_K:
      return DotQ45_KAvx2<BlockQ4_K, T>(static_cast<const BlockQ4_K*>(row), x, nb, ahead, out);
    case TensorType::kQ5_K:
      return DotQ45_KAvx2<BlockQ5_K, T>(static_cast<const BlockQ5_K*>(row), x, nb, ahead, out);
    case TensorType::kQ6_K:
      return DotQ6_KAvx2<T>(static_cast<const BlockQ6_K*>(row), x, nb, ahead, out);
    default:
      return Q2Q3_KDotTokensAvx2(job, row, t, T, nb, out);
  }
}

// ---------------------------------------------------------------------------
// AVX-512 (prompts): one zmm holds token 2p's 8 lanes in its low half and
// token 2p + 1's in its high half, so each instruction does what two of
// DotQ4_KAvx2's or DotQ6_KAvx2's do, with the same integer and float
// operations per lane.

// One Q4_K or Q5_K row against the 2P tokens' Q8_K rows x[0..2P); out[t]
// equals DotQ45_KAvx2's for that token, bit for bit.
template <typename Block, int P>
RINGLM_AVX512BW_TARGET void DotQ45_KPairs(const Block* w, const BlockQ8_K* const* x,
                                          int64_t n_blocks, const uint8_t* ahead, float* out) {
  constexpr int T = 2 * P;
  __m512 acc[P];
  __m128 acc_m[T];
  for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
  for (int t = 0; t < T; ++t) acc_m[t] = _mm_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    PrefetchAhead<sizeof(Block)>(ahead + b * sizeof(Block));
    const float wd = Fp16ToFp32(w[b].d);
    Q4_KBlockScales bs;
    GetQ4_KBlockScales(w[b].scales, w[b].dmin, &bs);
    const int16_t* sc = bs.sc;
    __m256i lo256[4], hi256[4];
    UnpackQ45_K(w[b], lo256, hi256);
    __m512i lo[4], hi[4];
    for (int c = 0; c < 4; ++c) {
      lo[c] = _mm512_broadcast_i64x4(lo256[c]);
      hi[c] = _mm512_broadcast_i64x4(hi256[c]);
    }
    for (int t = 0; t < T; ++t) acc_m[t] = AddMins<Block>(acc_m[t], bs, x[t][b]);
    for (int p = 0; p < P; ++p) {
      const BlockQ8_K& xa = x[2 * p][b];
      const BlockQ8_K& xb = x[2 * p + 1][b];
      __m512i sumi = _mm512_setzero_si512();
      for (int c = 0; c < 4; ++c) {
        const __m512i pl = _mm512_maddubs_epi16(lo[c], PairOf(xa.qs + 64 * c, xb.qs + 64 * c));
        const __m512i ph =
            _mm512_maddubs_epi16(hi[c], PairOf(xa.qs + 64 * c + 32, xb.qs + 64 * c + 32));
        sumi = _mm512_add_epi32(
            sumi, _mm512_add_epi32(_mm512_madd_epi16(pl, _mm512_set1_epi16(sc[2 * c])),
                                   _mm512_madd_epi16(ph, _mm512_set1_epi16(sc[2 * c + 1]))));
      }
      const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(xa.d * wd), _mm256_set1_ps(xb.d * wd), 1);
      acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi), acc[p]);
    }
  }
  for (int t = 0; t < T; ++t) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc[t / 2]);
    out[t] = ReduceLanes<8>(lanes + 8 * (t % 2)) + SumMins<Block>(acc_m[t]);
  }
}

// One Q6_K row against 2P tokens, as DotQ45_KPairs; out[t] equals
// DotQ6_KAvx2's for that token, bit for bit.
template <int P>
RINGLM_AVX512BW_TARGET void DotQ6_KPairs(const BlockQ6_K* w, const BlockQ8_K* const* x,
                                         int64_t n_blocks, const uint8_t* ahead, float* out) {
  const __m512i k32 = _mm512_set1_epi8(32);
  __m512 acc[P];
  for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    PrefetchAhead<sizeof(BlockQ6_K)>(ahead + b * sizeof(BlockQ6_K));
    const float wd = Fp16ToFp32(w[b].d);
    __m512i sumi[P];
    for (int p = 0; p < P; ++p) sumi[p] = _mm512_setzero_si512();
    for (int c = 0; c < 2; ++c) {
      const int8_t* sc = w[b].scales + 8 * c;
      __m256i q256[4];
      UnpackQ6_K(w[b], c, q256);
      __m512i q[4];
      for (int k = 0; k < 4; ++k) q[k] = _mm512_broadcast_i64x4(q256[k]);
      for (int k = 0; k < 4; ++k) {
        const __m512i scales = _mm512_broadcast_i64x4(
            _mm256_set_m128i(_mm_set1_epi16(sc[2 * k + 1]), _mm_set1_epi16(sc[2 * k])));
        for (int p = 0; p < P; ++p) {
          const __m512i xv =
              PairOf(x[2 * p][b].qs + 128 * c + 32 * k, x[2 * p + 1][b].qs + 128 * c + 32 * k);
          const __m512i prod =
              _mm512_sub_epi16(_mm512_maddubs_epi16(q[k], xv), _mm512_maddubs_epi16(k32, xv));
          sumi[p] = _mm512_add_epi32(sumi[p], _mm512_madd_epi16(prod, scales));
        }
      }
    }
    for (int p = 0; p < P; ++p) {
      const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(x[2 * p][b].d * wd),
                                          _mm256_set1_ps(x[2 * p + 1][b].d * wd), 1);
      acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi[p]), acc[p]);
    }
  }
  for (int t = 0; t < 2 * P; ++t) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc[t / 2]);
    out[t] = ReduceLanes<8>(lanes + 8 * (t % 2));
  }
}

// Row r (any K-quant) against tokens [t, t + n), n <= 2P: a missing last token of
// a pair repeats the one before it, and its result is dropped.
template <int P>
RINGLM_AVX512BW_TARGET void KQuantPairsAt(const DotJob& job, int64_t r, int64_t t, int64_t n,
                                          int64_t nb) {
  const BlockQ8_K* x[2 * P];
  for (int64_t i = 0; i < 2 * P; ++i) x[i] = job.x_q8_k + (t + std::min(i, n - 1)) * nb;
  float out[2 * P];
  const uint8_t* row = job.w + r * job.row_bytes;
  const uint8_t* ahead = row + kPrefetchAheadRows * job.row_bytes;
  if (job.type == TensorType::kQ4_K) {
    DotQ45_KPairs<BlockQ4_K, P>(reinterpret_cast<const BlockQ4_K*>(row), x, nb, ahead, out);
  } else if (job.type == TensorType::kQ5_K) {
    DotQ45_KPairs<BlockQ5_K, P>(reinterpret_cast<const BlockQ5_K*>(row), x, nb, ahead, out);
  } else if (job.type == TensorType::kQ6_K) {
    DotQ6_KPairs<P>(reinterpret_cast<const BlockQ6_K*>(row), x, nb, ahead, out);
  } else {
    Q2Q3_KPairsAvx512(job.type, row, x, P, nb, ahead, out);
  }
  for (int64_t i = 0; i < n; ++i) job.y[(t + i) * job.rows + r] = out[i];
}

}  // namespace

void KQuantDotRowsAvx2(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const int64_t nb = job.cols / kQK_K;
  constexpr int64_t kTokens = 4;  // per kernel call: the row is unpacked once for them
  // Each group of tokens visits every row of [r0, r1) (a few KB each)
  // before the next: the group's activations stay in L1, where a row's walk
  // over all of a long prompt's would stream them from L3.
  for (int64_t t = t0; t < t1; t += kTokens) {
    for (int64_t r = r0; r < r1; ++r) {
      const void* row = job.w + r * job.row_bytes;
      float out[kTokens];
      const int64_t n = std::min(kTokens, t1 - t);
      switch (n) {
        case 1:
          DotTokens<1>(job, row, t, nb, out);
          break;
        case 2:
          DotTokens<2>(job, row, t, nb, out);
          break;
        case 3:
          DotTokens<3>(job, row, t, nb, out);
          break;
        default:
          DotTokens<4>(job, row, t, nb, out);
          break;
      }
      for (int64_t i = 0; i < n; ++i) job.y[(t + i) * job.rows + r] = out[i];
    }
  }
}

void KQuantDotRowsAvx512(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  // Decode is bound by memory: the AVX2 kernels serve it.
  if (t1 - t0 == 1) return KQuantDotRowsAvx2(job, r0, r1, t0, t1);
  const int64_t nb = job.cols / kQK_K;
  constexpr int64_t kTokens = 8;  // per kernel call: 4 pairs share the row's unpacking
  for (int64_t t = t0; t < t1; t += kTokens) {  // as in KQuantDotRowsAvx2
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = std::min(kTokens, t1 - t);
      switch ((n + 1) / 2) {
        case 1:
          KQuantPairsAt<1>(job, r, t, n, nb);
          break;
        case 2:
          KQuantPairsAt<2>(job, r, t, n, nb);
          break;
        case 3:
          KQuantPairsAt<3>(job, r, t, n, nb);
          break;
        default:
          KQuantPairsAt<4>(job, r, t, n, nb);
          break;
      }
    }
  }
}

}  // namespace ringlm

#endif  // __x86_64__
