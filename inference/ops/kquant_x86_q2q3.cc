// x86 AVX2 dot products of Q2_K and Q3_K rows with Q8_K activations, for
// T <= 4 tokens at once (the row is unpacked once per super-block for all
// of them), and AVX-512 pair kernels for up to 4 pairs, called from
// kquant_x86.cc's token-group loops.
//
// Numerics: exactly DotQ2_K / DotQ3_K of matmul.cc (ggml's AVX2 order). The
// integer lane sums are exact, only computed with byte multiplies
// (vpmaddubsw takes an unsigned weight byte):
//   - Q3_K: vpmaddubsw(q + 4, x) - vpmaddubsw(4, x) = pairs of (q - 4) * x;
//     then vpmaddwd with the signed scales of the two 16-value halves.
//   - Q2_K: vpmaddubsw(q, x), q < 4; then vpmaddwd with the 16-value
//     halves' scales; its mins go into the float lanes first.
// Lane l of a 32-value group holds positions 4l..4l+3, as in the reference.
// The AVX-512 twins for prompts put two tokens' 8 lanes in one zmm, with the
// same integer and float operations per lane. Hot: every Q2_K/Q3_K MatMul on
// x86.
#include "inference/ops/kquant_internal.h"

#if defined(__x86_64__)

// GCC 12 reports its own _mm512_undefined_*() (used inside insert and
// broadcast intrinsics) as maybe-uninitialized: a false positive.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstring>
#include <type_traits>

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

// One Q2_K or Q3_K super-block unpacked for the byte multiplies: group k
// (values 32k..32k+31) as unsigned bytes q[k] (Q3_K: its values + 4), the
// 16-bit scales of its two halves, and (Q2_K) the 16 mins as 16-bit values.
struct Q2Q3Groups {
  __m256i q[8];
  __m256i scales[8];
  __m256i mins;
  float d, dmin;
};

RINGLM_AVX2_TARGET inline void Unpack(const BlockQ3_K& blk, Q2Q3Groups* u) {
  __m256i halves[2];
  WidenScales(Q3_KScales(blk.scales), halves);
  const __m256i h = Load32(blk.hmask);
  for (int c = 0; c < 2; ++c) {
    const __m256i bits = Load32(blk.qs + 32 * c);
    for (int g = 0; g < 4; ++g) {
      // The high bit of value 128c + 32g + l is bit 4c + g of hmask[l].
      u->q[4 * c + g] = _mm256_or_si256(TwoBitGroup(bits, g), BitAsValue(h, 4 * c + g, 2));
      u->scales[4 * c + g] = GroupScales(halves[c], g);
    }
  }
  u->d = Fp16ToFp32(blk.d);
}

RINGLM_AVX2_TARGET inline void Unpack(const BlockQ2_K& blk, Q2Q3Groups* u) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
  const __m128i low4 = _mm_set1_epi8(0x0F);
  u->mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
  __m256i halves[2];
  WidenScales(_mm_and_si128(packed, low4), halves);
  for (int c = 0; c < 2; ++c) {
    const __m256i bits = Load32(blk.qs + 32 * c);
    for (int g = 0; g < 4; ++g) {
      u->q[4 * c + g] = TwoBitGroup(bits, g);
      u->scales[4 * c + g] = GroupScales(halves[c], g);
    }
  }
  u->d = Fp16ToFp32(blk.d);
  u->dmin = Fp16ToFp32(blk.dmin);
}

// A token's Q2_K mins products of one super-block: lane k holds m[2k] *
// bsums[2k] + m[2k + 1] * bsums[2k + 1].
RINGLM_AVX2_TARGET inline __m256i Q2_KMinsProducts(const Q2Q3Groups& u, const BlockQ8_K& xb) {
  return _mm256_madd_epi16(u.mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums)));
}

// One Q2_K or Q3_K row against T tokens' Q8_K rows (x[t] = token t's
// blocks), unpacked once per super-block for all T; Q2_K puts its mins into
// the lanes before the values.
template <typename Block, int T>
RINGLM_AVX2_TARGET void DotQ23_KAvx2(const Block* w, const BlockQ8_K* const* x, int64_t n_blocks,
                                     const uint8_t* ahead, float* out) {
  constexpr bool kQ3 = std::is_same_v<Block, BlockQ3_K>;
  const __m256i k4 = _mm256_set1_epi8(4);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    PrefetchAhead<sizeof(Block)>(ahead + b * sizeof(Block));
    Q2Q3Groups u;
    Unpack(w[b], &u);
    for (int t = 0; t < T; ++t) {
      const BlockQ8_K& xb = x[t][b];
      if constexpr (!kQ3) {
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(-xb.d * u.dmin),
                                 _mm256_cvtepi32_ps(Q2_KMinsProducts(u, xb)), acc[t]);
      }
      __m256i sumi = _mm256_setzero_si256();
      for (int k = 0; k < 8; ++k) {
        const __m256i xv = Load32(xb.qs + 32 * k);
        __m256i p = _mm256_maddubs_epi16(u.q[k], xv);
        if constexpr (kQ3) p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(k4, xv));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, u.scales[k]));
      }
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(xb.d * u.d), _mm256_cvtepi32_ps(sumi), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = Reduce(acc[t]);
}

// The same for the 2P tokens x[0..2P) in pairs: one zmm holds token 2p's 8
// lanes in its low half and token 2p + 1's in its high half; out[t] equals
// DotQ23_KAvx2's for that token, bit for bit.
template <typename Block, int P>
RINGLM_AVX512BW_TARGET void DotQ23_KPairs(const Block* w, const BlockQ8_K* const* x,
                                          int64_t n_blocks, const uint8_t* ahead, float* out) {
  constexpr bool kQ3 = std::is_same_v<Block, BlockQ3_K>;
  const __m512i k4 = _mm512_set1_epi8(4);
  __m512 acc[P];
  for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    PrefetchAhead<sizeof(Block)>(ahead + b * sizeof(Block));
    Q2Q3Groups u;
    Unpack(w[b], &u);
    for (int p = 0; p < P; ++p) {
      const BlockQ8_K& xa = x[2 * p][b];
      const BlockQ8_K& xb = x[2 * p + 1][b];
      if constexpr (!kQ3) {
        const __m512i prod = _mm512_inserti64x4(_mm512_zextsi256_si512(Q2_KMinsProducts(u, xa)),
                                                Q2_KMinsProducts(u, xb), 1);
        const __m512 dmin =
            _mm512_insertf32x8(_mm512_set1_ps(-xa.d * u.dmin), _mm256_set1_ps(-xb.d * u.dmin), 1);
        acc[p] = _mm512_fmadd_ps(dmin, _mm512_cvtepi32_ps(prod), acc[p]);
      }
      __m512i sumi = _mm512_setzero_si512();
      for (int k = 0; k < 8; ++k) {
        const __m512i xv = PairOf(xa.qs + 32 * k, xb.qs + 32 * k);
        __m512i prod = _mm512_maddubs_epi16(_mm512_broadcast_i64x4(u.q[k]), xv);
        if constexpr (kQ3) prod = _mm512_sub_epi16(prod, _mm512_maddubs_epi16(k4, xv));
        sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(prod, _mm512_broadcast_i64x4(u.scales[k])));
      }
      const __m512 d =
          _mm512_insertf32x8(_mm512_set1_ps(xa.d * u.d), _mm256_set1_ps(xb.d * u.d), 1);
      acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi), acc[p]);
    }
  }
  for (int t = 0; t < 2 * P; ++t) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc[t / 2]);
    out[t] = ReduceLanes<8>(lanes + 8 * (t % 2));
  }
}

template <int T>
RINGLM_AVX2_TARGET void DotTokens(const DotJob& job, const void* row, int64_t t, int64_t nb,
                                  float* out) {
  const BlockQ8_K* x[T];
  for (int i = 0; i < T; ++i) x[i] = job.x_q8_k + (t + i) * nb;
  const uint8_t* ahead = static_cast<const uint8_t*>(row) + kPrefetchAheadRows * job.row_bytes;
  if (job.type == TensorType::kQ3_K) {
    DotQ23_KAvx2<BlockQ3_K, T>(static_cast<const BlockQ3_K*>(row), x, nb, ahead, out);
  } else {
    DotQ23_KAvx2<BlockQ2_K, T>(static_cast<const BlockQ2_K*>(row), x, nb, ahead, out);
  }
}

template <int P>
RINGLM_AVX512BW_TARGET void Pairs(TensorType type, const void* row, const BlockQ8_K* const* x,
                                  int64_t nb, const uint8_t* ahead, float* out) {
  if (type == TensorType::kQ3_K) {
    DotQ23_KPairs<BlockQ3_K, P>(static_cast<const BlockQ3_K*>(row), x, nb, ahead, out);
  } else {
    DotQ23_KPairs<BlockQ2_K, P>(static_cast<const BlockQ2_K*>(row), x, nb, ahead, out);
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

void Q2Q3_KPairsAvx512(TensorType type, const void* row, const BlockQ8_K* const* x, int p,
                       int64_t nb, const uint8_t* ahead, float* out) {
  switch (p) {
    case 1:
      return Pairs<1>(type, row, x, nb, ahead, out);
    case 2:
      return Pairs<2>(type, row, x, nb, ahead, out);
    case 3:
      return Pairs<3>(type, row, x, nb, ahead, out);
    default:
      return Pairs<4>(type, row, x, nb, ahead, out);
  }
}

}  // namespace ringlm

#endif  // __x86_64__
