// x86 AVX2 dot products of Q2_K and Q3_K rows with Q8_K activations, for
// T <= 4 tokens at once (the row is unpacked once per super-block for all
// of them), called from kquant_x86.cc's token-group loop.
//
// Numerics: exactly DotQ2_K / DotQ3_K of matmul.cc (ggml's AVX2 order). The
// integer lane sums are exact, only computed with byte multiplies
// (vpmaddubsw takes an unsigned weight byte):
//   - Q3_K: vpmaddubsw(q + 4, x) - vpmaddubsw(4, x) = pairs of (q - 4) * x;
//     then vpmaddwd with the signed scales of the two 16-value halves.
//   - Q2_K: vpmaddubsw(q, x), q < 4; then vpmaddwd with the 16-value
//     halves' scales; its mins go into the float lanes first.
// Lane l of a 32-value group holds positions 4l..4l+3, as in the reference.
// Hot: every Q2_K/Q3_K MatMul on x86.
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

// The 16 scales of a Q2_K/Q3_K super-block (bytes of `scales8`, signed) as
// 16-bit values, half c (scales 8c..8c+7) in both 128-bit lanes.
RINGLM_AVX2_TARGET inline void WidenScales(__m128i scales8, __m256i halves[2]) {
  const __m256i all = _mm256_cvtepi8_epi16(scales8);
  const __m128i lo = _mm256_castsi256_si128(all);
  const __m128i hi = _mm256_extracti128_si256(all, 1);
  halves[0] = _mm256_set_m128i(lo, lo);
  halves[1] = _mm256_set_m128i(hi, hi);
}

// For 32-value group g (0..3) of a half from WidenScales: positions 0..15
// take scale 2g, positions 16..31 scale 2g + 1, as 16-bit lanes for vpmaddwd.
RINGLM_AVX2_TARGET inline __m256i GroupScales(__m256i half, int g) {
  const int16_t lo = static_cast<int16_t>(((4 * g + 1) << 8) | (4 * g));
  const int16_t hi = static_cast<int16_t>(((4 * g + 3) << 8) | (4 * g + 2));
  return _mm256_shuffle_epi8(half, _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo)));
}

// The 16 6-bit scales of a Q3_K super-block minus 32, one per byte (the
// layout of BlockQ3_K, unpacked four scales per 32-bit word).
RINGLM_AVX2_TARGET inline __m128i Q3_KScales(const uint8_t* packed) {
  constexpr uint32_t kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  uint32_t a[3];
  std::memcpy(a, packed, 12);
  const __m128i s =
      _mm_set_epi32(static_cast<int>(((a[1] >> 4) & kLow4) | (((a[2] >> 6) & kLow2) << 4)),
                    static_cast<int>(((a[0] >> 4) & kLow4) | (((a[2] >> 4) & kLow2) << 4)),
                    static_cast<int>((a[1] & kLow4) | (((a[2] >> 2) & kLow2) << 4)),
                    static_cast<int>((a[0] & kLow4) | ((a[2] & kLow2) << 4)));
  return _mm_sub_epi8(s, _mm_set1_epi8(32));
}

// The 2-bit values of 32-value group g (0..3) of a 32-byte chunk of qs.
RINGLM_AVX2_TARGET inline __m256i TwoBitGroup(__m256i bits, int g) {
  return _mm256_and_si256(_mm256_srli_epi16(bits, 2 * g), _mm256_set1_epi8(3));
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
    __m256i halves[2];
    WidenScales(Q3_KScales(w[b].scales), halves);
    const __m256i h = Load32(w[b].hmask);
    __m256i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
    for (int c = 0; c < 2; ++c) {
      const __m256i bits = Load32(w[b].qs + 32 * c);
      for (int g = 0; g < 4; ++g) {
        // q + 4, in 0..7: the high bit of value 128c + 32g + l is bit 4c + g.
        const __m256i q = _mm256_or_si256(TwoBitGroup(bits, g), BitAsValue(h, 4 * c + g, 2));
        const __m256i scales = GroupScales(halves[c], g);
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
    const __m128i low4 = _mm_set1_epi8(0x0F);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
    __m256i halves[2];
    WidenScales(_mm_and_si128(packed, low4), halves);
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
        const __m256i scales = GroupScales(halves[c], g);
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
    case TensorType::kQ3_K:
      return DotQ3_KAvx2<T>(static_cast<const BlockQ3_K*>(row), x, nb, ahead, out);
    default:
      return DotQ2_KAvx2<T>(static_cast<const BlockQ2_K*>(row), x, nb, ahead, out);
  }
}

}  // namespace

void Q2Q3_KDotTokensAvx2(const DotJob& job, const void* row, int64_t t, int64_t n, int64_t nb,
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
