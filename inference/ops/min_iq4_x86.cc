// AVX2 dot kernels for Q4_1, Q5_1 (against Q8_1), IQ4_NL (against Q8_0) and
// IQ4_XS (against Q8_K): ggml's own instruction sequences (maddubs, then
// madd into 8 exact int32 lanes), so each result equals DotOneScalar's bit
// for bit. A row's blocks are unpacked once for up to 4 tokens, and the rows
// 8 further on are prefetched (decode reads every weight once, from memory).
// AVX-512 machines run these too (the types are memory-bound in decode).
#include "inference/ops/min_iq4_x86.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "inference/ops/kquant_x86_internal.h"
#include "inference/ops/matmul_internal.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

// Fp16ToFp32 with F16C (exact, the same value), off the hot loop's branches.
RINGLM_AVX2_TARGET inline float Half(uint16_t h) { return _cvtsh_ss(h); }

// 32 nibbles of 16 bytes as bytes: value j (low nibble of byte j) in byte j,
// value 16 + j (its high nibble) in byte 16 + j.
RINGLM_AVX2_TARGET inline __m256i NibbleBytes(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

// 0x10 in byte j where bit j of the 32-bit little-endian qh is set, else 0.
RINGLM_AVX2_TARGET inline __m256i HighBitBytes(const uint8_t* qh) {
  int32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  // Byte j takes byte j / 8 of qh, then tests its bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(bits), _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                 0x0101010101010101, 0x0000000000000000));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// The 32 signed IQ4 levels of 16 packed bytes, in value order.
RINGLM_AVX2_TARGET inline __m256i LevelBytes(const uint8_t* qs) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues));
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), m4)),
                          _mm_shuffle_epi8(table, _mm_and_si128(q, m4)));
}

// ggml's mul_add_epi8 of signed weights w (|w| precomputed) with x: pairs
// of byte products as int16 (the sign flip of x = -128 wraps, as ggml's).
RINGLM_AVX2_TARGET inline __m256i SignedPairs(__m256i abs_w, __m256i w, const int8_t* x) {
  return _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(Load32(x), w));
}

// Q4_1/Q5_1 row against T tokens; out[i] equals DotWithMin's.
template <typename Block, int T>
RINGLM_AVX2_TARGET void DotMinTokens(const Block* w, const BlockQ8_1* const* x, int64_t nb,
                                     const uint8_t* ahead, float* out) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T];
  float summs[T];
  for (int i = 0; i < T; ++i) {
    acc[i] = _mm256_setzero_ps();
    summs[i] = 0.0f;
  }
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchAhead<sizeof(Block)>(ahead + b * sizeof(Block));
    __m256i q = NibbleBytes(w[b].qs);
    if constexpr (sizeof(Block) == sizeof(BlockQ5_1)) {
      q = _mm256_or_si256(q, HighBitBytes(w[b].qh));
    }
    const float wd = Half(w[b].d);
    const float wm = Half(w[b].m);
    for (int i = 0; i < T; ++i) {
      const BlockQ8_1& xb = x[i][b];
      summs[i] = std::fma(wm, Half(xb.s), summs[i]);
      const __m256i lanes = _mm256_madd_epi16(_mm256_maddubs_epi16(q, Load32(xb.qs)), ones);
      acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(wd * Half(xb.d)), _mm256_cvtepi32_ps(lanes), acc[i]);
    }
  }
  for (int i = 0; i < T; ++i) out[i] = Reduce(acc[i]) + summs[i];
}

// IQ4_NL row against T tokens; out[i] equals DotIQ4_NL's.
template <int T>
RINGLM_AVX2_TARGET void DotIQ4_NLTokens(const BlockIQ4_NL* w, const BlockQ8_0* const* x, int64_t nb,
                                        const uint8_t* ahead, float* out) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[2][T];
  for (int i = 0; i < T; ++i) acc[0][i] = acc[1][i] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    PrefetchAhead<2 * sizeof(BlockIQ4_NL)>(ahead + b * sizeof(BlockIQ4_NL));
    for (int h = 0; h < 2; ++h) {
      const __m256i q = LevelBytes(w[b + h].qs);
      const __m256i abs_q = _mm256_sign_epi8(q, q);
      const float wd = Half(w[b + h].d);
      for (int i = 0; i < T; ++i) {
        const BlockQ8_0& xb = x[i][b + h];
        const __m256i lanes = _mm256_madd_epi16(SignedPairs(abs_q, q, xb.qs), ones);
        acc[h][i] =
            _mm256_fmadd_ps(_mm256_set1_ps(Half(xb.d) * wd), _mm256_cvtepi32_ps(lanes), acc[h][i]);
      }
    }
  }
  for (int i = 0; i < T; ++i) out[i] = Reduce(_mm256_add_ps(acc[0][i], acc[1][i]));
  if (b < nb) {  // an unpaired last block: one integer sum
    const __m256i q = LevelBytes(w[b].qs);
    const __m256i abs_q = _mm256_sign_epi8(q, q);
    for (int i = 0; i < T; ++i) {
      const BlockQ8_0& xb = x[i][b];
      alignas(32) int32_t lanes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                         _mm256_madd_epi16(SignedPairs(abs_q, q, xb.qs), ones));
      int32_t total = 0;
      for (int32_t v : lanes) total += v;
      out[i] = std::fma(Half(xb.d) * Half(w[b].d), static_cast<float>(total), out[i]);
    }
  }
}

// IQ4_XS row against T tokens; out[i] equals DotIQ4_XS's.
template <int T>
RINGLM_AVX2_TARGET void DotIQ4_XSTokens(const BlockIQ4_XS* w, const BlockQ8_K* const* x, int64_t nb,
                                        const uint8_t* ahead, float* out) {
  __m256 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchAhead<sizeof(BlockIQ4_XS)>(ahead + b * sizeof(BlockIQ4_XS));
    __m256i sumi[T];
    for (int i = 0; i < T; ++i) sumi[i] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i q = LevelBytes(w[b].qs + 16 * ib);
      const __m256i abs_q = _mm256_sign_epi8(q, q);
      const __m256i ls = _mm256_set1_epi16(static_cast<int16_t>(IQ4_XSScale(w[b], ib)));
      for (int i = 0; i < T; ++i) {
        const __m256i p16 = SignedPairs(abs_q, q, x[i][b].qs + 32 * ib);
        sumi[i] = _mm256_add_epi32(sumi[i], _mm256_madd_epi16(p16, ls));
      }
    }
    const float wd = Half(w[b].d);
    for (int i = 0; i < T; ++i) {
      acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(wd * x[i][b].d), _mm256_cvtepi32_ps(sumi[i]), acc[i]);
    }
  }
  for (int i = 0; i < T; ++i) out[i] = Reduce(acc[i]);
}

// Row r against tokens [t, t + T).
template <int T>
RINGLM_AVX2_TARGET void DotTokens(const DotJob& job, int64_t r, int64_t t, float* out) {
  const uint8_t* row = job.w + r * job.row_bytes;
  const uint8_t* ahead = row + kPrefetchAheadRows * job.row_bytes;
  switch (job.type) {
    case TensorType::kQ4_1:
    case TensorType::kQ5_1: {
      const int64_t nb = job.cols / 32;
      const BlockQ8_1* x[T];
      for (int i = 0; i < T; ++i) x[i] = job.x_q8_1 + (t + i) * nb;
      if (job.type == TensorType::kQ4_1) {
        DotMinTokens<BlockQ4_1, T>(reinterpret_cast<const BlockQ4_1*>(row), x, nb, ahead, out);
      } else {
        DotMinTokens<BlockQ5_1, T>(reinterpret_cast<const BlockQ5_1*>(row), x, nb, ahead, out);
      }
      return;
    }
    case TensorType::kIQ4_NL: {
      const int64_t nb = job.cols / kIQ4_NLBlockSize;
      const BlockQ8_0* x[T];
      for (int i = 0; i < T; ++i) x[i] = job.x_q8_0 + (t + i) * nb;
      DotIQ4_NLTokens<T>(reinterpret_cast<const BlockIQ4_NL*>(row), x, nb, ahead, out);
      return;
    }
    default: {  // IQ4_XS
      const int64_t nb = job.cols / kQK_K;
      const BlockQ8_K* x[T];
      for (int i = 0; i < T; ++i) x[i] = job.x_q8_k + (t + i) * nb;
      DotIQ4_XSTokens<T>(reinterpret_cast<const BlockIQ4_XS*>(row), x, nb, ahead, out);
      return;
    }
  }
}

// IQ4_XS row against 2P tokens in zmm pairs (the row's levels in both
// halves, two tokens' activations side by side); out[t] equals
// DotIQ4_XSTokens's for that token, bit for bit. AVX-512BW has no
// sign_epi8: the activations are negated under the mask of negative levels
// (0 - x, which wraps at -128 as sign_epi8 does; the levels are never 0).
template <int P>
RINGLM_AVX512BW_TARGET void DotIQ4_XSPairs(const BlockIQ4_XS* w, const BlockQ8_K* const* x,
                                           int64_t nb, const uint8_t* ahead, float* out) {
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[P];
  for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchAhead<sizeof(BlockIQ4_XS)>(ahead + b * sizeof(BlockIQ4_XS));
    __m512i sumi[P];
    for (int p = 0; p < P; ++p) sumi[p] = zero;
    for (int ib = 0; ib < 8; ++ib) {
      const __m512i q = _mm512_broadcast_i64x4(LevelBytes(w[b].qs + 16 * ib));
      const __m512i abs_q = _mm512_abs_epi8(q);
      const __mmask64 negative = _mm512_movepi8_mask(q);
      const __m512i ls = _mm512_set1_epi16(static_cast<int16_t>(IQ4_XSScale(w[b], ib)));
      for (int p = 0; p < P; ++p) {
        const __m512i xv = PairOf(x[2 * p][b].qs + 32 * ib, x[2 * p + 1][b].qs + 32 * ib);
        const __m512i signed_x = _mm512_mask_sub_epi8(xv, negative, zero, xv);
        const __m512i p16 = _mm512_maddubs_epi16(abs_q, signed_x);
        sumi[p] = _mm512_add_epi32(sumi[p], _mm512_madd_epi16(p16, ls));
      }
    }
    const float wd = Half(w[b].d);
    for (int p = 0; p < P; ++p) {
      const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(wd * x[2 * p][b].d),
                                          _mm256_set1_ps(wd * x[2 * p + 1][b].d), 1);
      acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi[p]), acc[p]);
    }
  }
  for (int t = 0; t < 2 * P; ++t) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc[t / 2]);
    out[t] = ReduceLanes<8>(lanes + 8 * (t % 2));
  }
}

// Row r (IQ4_XS) against tokens [t, t + n), n <= 2P: a missing last token of
// a pair repeats the one before it, and its result is dropped.
template <int P>
RINGLM_AVX512BW_TARGET void IQ4_XSPairsAt(const DotJob& job, int64_t r, int64_t t, int64_t n) {
  const int64_t nb = job.cols / kQK_K;
  const BlockQ8_K* x[2 * P];
  for (int64_t i = 0; i < 2 * P; ++i) x[i] = job.x_q8_k + (t + std::min(i, n - 1)) * nb;
  float out[2 * P];
  const uint8_t* row = job.w + r * job.row_bytes;
  DotIQ4_XSPairs<P>(reinterpret_cast<const BlockIQ4_XS*>(row), x, nb,
                    row + kPrefetchAheadRows * job.row_bytes, out);
  for (int64_t i = 0; i < n; ++i) job.y[(t + i) * job.rows + r] = out[i];
}

}  // namespace

void MinIq4DotRowsAvx2(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  constexpr int64_t kTokens = 4;  // per kernel call: the row is unpacked once for them
  for (int64_t t = t0; t < t1; t += kTokens) {
    for (int64_t r = r0; r < r1; ++r) {
      float out[kTokens];
      const int64_t n = std::min(kTokens, t1 - t);
      switch (n) {
        case 1:
          DotTokens<1>(job, r, t, out);
          break;
        case 2:
          DotTokens<2>(job, r, t, out);
          break;
        case 3:
          DotTokens<3>(job, r, t, out);
          break;
        default:
          DotTokens<4>(job, r, t, out);
          break;
      }
      for (int64_t i = 0; i < n; ++i) job.y[(t + i) * job.rows + r] = out[i];
    }
  }
}

void MinIq4DotRowsAvx512(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  // Decode is bound by memory, and only IQ4_XS has pair kernels yet.
  if (t1 - t0 == 1 || job.type != TensorType::kIQ4_XS) {
    return MinIq4DotRowsAvx2(job, r0, r1, t0, t1);
  }
  constexpr int64_t kTokens = 8;  // per kernel call: 4 pairs share the row's unpacking
  for (int64_t t = t0; t < t1; t += kTokens) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = std::min(kTokens, t1 - t);
      switch ((n + 1) / 2) {
        case 1:
          IQ4_XSPairsAt<1>(job, r, t, n);
          break;
        case 2:
          IQ4_XSPairsAt<2>(job, r, t, n);
          break;
        case 3:
          IQ4_XSPairsAt<3>(job, r, t, n);
          break;
        default:
          IQ4_XSPairsAt<4>(job, r, t, n);
          break;
      }
    }
  }
}

}  // namespace ringlm

#endif  // __x86_64__
