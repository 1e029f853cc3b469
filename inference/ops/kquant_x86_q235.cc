// x86 AVX2 dot products of Q2_K, Q3_K and Q5_K rows with Q8_K activations,
// for T <= 4 tokens at once (the row is unpacked once per super-block for
// all of them), called from kquant_x86.cc's token-group loop.
//
// Numerics: exactly DotQ2_K / DotQ3_K / DotQ5_K of matmul.cc (ggml's AVX2
// order). The integer lane sums are exact, only computed with byte
// multiplies (vpmaddubsw takes an unsigned weight byte):
//   - Q5_K: vpmaddubsw(q, x), q < 32, pairs of at most 2 * 31 * 128; then
//     vpmaddwd with the 32-value sub-block's scale (< 64).
//   - Q3_K: vpmaddubsw(q + 4, x) - vpmaddubsw(4, x) = pairs of (q - 4) * x;
//     then vpmaddwd with the signed scales of the two 16-value halves.
//   - Q2_K: vpmaddubsw(q, x), q < 4; then vpmaddwd with the 16-value
//     halves' scales.
// Lane l of a 32-value group holds positions 4l..4l+3, as in the reference.
// Hot: every Q2_K/Q3_K/Q5_K MatMul on x86.
#include "inference/ops/kquant_internal.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "inference/ops/fp16.h"
#include "inference/ops/kquant_x86_internal.h"
#include "inference/ops/matmul_internal.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

// Scales for a 32-value group whose positions 0..15 take `lo` and 16..31 take
// `hi`, as 16-bit lanes for vpmaddwd.
RINGLM_AVX2_TARGET inline __m256i HalvesScales(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(hi)),
                          _mm_set1_epi16(static_cast<int16_t>(lo)));
}

// Bit `bit` of each byte of h, as 0 or `value` (a power of two <= 16).
RINGLM_AVX2_TARGET inline __m256i BitAsValue(__m256i h, int bit, int value_shift) {
  const __m256i one = _mm256_set1_epi8(1);
  return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, bit), one), value_shift);
}

// The 2-bit values of 32-value group g (0..3) of a 32-byte chunk of qs.
RINGLM_AVX2_TARGET inline __m256i TwoBitGroup(__m256i bits, int g) {
  return _mm256_and_si256(_mm256_srli_epi16(bits, 2 * g), _mm256_set1_epi8(3));
}

// One Q5_K row against T tokens' Q8_K rows (x[t] = token t's blocks).
template <int T>
RINGLM_AVX2_TARGET void DotQ5_KAvx2(const BlockQ5_K* w, const BlockQ8_K* const* x, int64_t n_blocks,
                                    const uint8_t* ahead, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[T];
  __m128 summs[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm256_setzero_ps();
    summs[t] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    PrefetchAhead<sizeof(BlockQ5_K)>(ahead + b * sizeof(BlockQ5_K));
    const float wd = Fp16ToFp32(w[b].d);
    Q4_KBlockScales bs;
    GetQ4_KBlockScales(w[b].scales, w[b].dmin, &bs);
    const int16_t* sc = bs.sc;
    const __m256i h = Load32(w[b].qh);
    __m256i lo[4], hi[4];
    for (int c = 0; c < 4; ++c) {
      const __m256i q = Load32(w[b].qs + 32 * c);
      lo[c] = _mm256_or_si256(_mm256_and_si256(q, m4), BitAsValue(h, 2 * c, 4));
      hi[c] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                              BitAsValue(h, 2 * c + 1, 4));
    }
    for (int t = 0; t < T; ++t) {
      const BlockQ8_K& xb = x[t][b];
      // The mins: one exact integer per super-block, into a scalar.
      const __m128i prod = Q4_KMinsProducts(bs, xb);
      const __m128i pair = _mm_add_epi32(prod, _mm_shuffle_epi32(prod, 0x4E));
      const int32_t mins = _mm_cvtsi128_si32(_mm_add_epi32(pair, _mm_shuffle_epi32(pair, 0xB1)));
      summs[t] =
          _mm_fmadd_ss(_mm_set_ss(-xb.d * bs.dmin), _mm_set_ss(static_cast<float>(mins)), summs[t]);
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
  for (int t = 0; t < T; ++t) out[t] = Reduce(acc[t]) + _mm_cvtss_f32(summs[t]);
}

// One Q3_K row against T tokens, unpacked once per half super-block.
template <int T>
RINGLM_AVX2_TARGET void DotQ3_KAvx2(const BlockQ3_K* w, const BlockQ8_K* const* x, int64_t n_blocks,
                                    const uint8_t* ahead, float* out) {
  const __m256i k4 = _mm256_set1_epi8(4);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    PrefetchAhead<sizeof(BlockQ3_K)>(ahead + b * sizeof(BlockQ3_K));
    const float wd = Fp16ToFp32(w[b].d);
    int sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = Q3_KScale(j, w[b].scales) - 32;
    const __m256i h = Load32(w[b].hmask);
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    for (int c = 0; c < 2; ++c) {
      const __m256i bits = Load32(w[b].qs + 32 * c);
      for (int g = 0; g < 4; ++g) {
        // q + 4, in 0..7: the high bit of value 128c + 32g + l is bit 4c + g.
        const __m256i q = _mm256_or_si256(TwoBitGroup(bits, g), BitAsValue(h, 4 * c + g, 2));
        const __m256i scales = HalvesScales(sc[8 * c + 2 * g], sc[8 * c + 2 * g + 1]);
        for (int t = 0; t < T; ++t) {
          const __m256i xv = Load32(x[t][b].qs + 128 * c + 32 * g);
          const __m256i p =
              _mm256_sub_epi16(_mm256_maddubs_epi16(q, xv), _mm256_maddubs_epi16(k4, xv));
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

// One Q2_K row against T tokens: per super-block, the mins into the lanes
// first, then the values.
template <int T>
RINGLM_AVX2_TARGET void DotQ2_KAvx2(const BlockQ2_K* w, const BlockQ8_K* const* x, int64_t n_blocks,
                                    const uint8_t* ahead, float* out) {
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    PrefetchAhead<sizeof(BlockQ2_K)>(ahead + b * sizeof(BlockQ2_K));
    const float wd = Fp16ToFp32(w[b].d);
    const float wdmin = Fp16ToFp32(w[b].dmin);
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    const __m256i mins =
        _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F)));
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) {
      const BlockQ8_K& xb = x[t][b];
      const __m256i prod =
          _mm256_madd_epi16(mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums)));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(-xb.d * wdmin), _mm256_cvtepi32_ps(prod), acc[t]);
      sumi[t] = _mm256_setzero_si256();
    }
    for (int c = 0; c < 2; ++c) {
      const __m256i bits = Load32(w[b].qs + 32 * c);
      for (int g = 0; g < 4; ++g) {
        const __m256i q = TwoBitGroup(bits, g);
        const int j = 8 * c + 2 * g;
        const __m256i scales = HalvesScales(w[b].scales[j] & 0xF, w[b].scales[j + 1] & 0xF);
        for (int t = 0; t < T; ++t) {
          const __m256i p = _mm256_maddubs_epi16(q, Load32(x[t][b].qs + 128 * c + 32 * g));
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

template <int T>
RINGLM_AVX2_TARGET void DotTokens(const DotJob& job, const void* row, int64_t t, int64_t nb,
                                  float* out) {
  const BlockQ8_K* x[T];
  for (int i = 0; i < T; ++i) x[i] = job.x_q8_k + (t + i) * nb;
  const uint8_t* ahead = static_cast<const uint8_t*>(row) + kPrefetchAheadRows * job.row_bytes;
  switch (job.type) {
    case TensorType::kQ5_K:
      return DotQ5_KAvx2<T>(static_cast<const BlockQ5_K*>(row), x, nb, ahead, out);
    case TensorType::kQ3_K:
      return DotQ3_KAvx2<T>(static_cast<const BlockQ3_K*>(row), x, nb, ahead, out);
    default:
      return DotQ2_KAvx2<T>(static_cast<const BlockQ2_K*>(row), x, nb, ahead, out);
  }
}

}  // namespace

void KQuant235DotTokensAvx2(const DotJob& job, const void* row, int64_t t, int64_t n, int64_t nb,
                            float* out) {
  switch (n) {
    case 1:
      return DotTokens<1>(job, row, t, nb, out);
    case 2:
      return DotTokens<2>(job, row, t, nb, out);
    case 3:
      return DotTokens<3>(job, row, t, nb, out);
    default:
      return DotTokens<4>(job, row, t, nb, out);
  }
}

}  // namespace ringlm

#endif  // __x86_64__
