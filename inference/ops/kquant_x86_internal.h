// AVX2 helpers shared by the K-quant dot kernels of kquant_x86.cc and
// kquant_x86_q2q3.cc. Internal to inference/ops; x86 only, and every
// function here runs only where CpuSupports(QGemmTarget::kAvx2).
#ifndef RINGLM_INFERENCE_OPS_KQUANT_X86_INTERNAL_H_
#define RINGLM_INFERENCE_OPS_KQUANT_X86_INTERNAL_H_

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "inference/ops/fp16.h"
#include "inference/ops/matmul_internal.h"
#include "inference/ops/quant.h"

namespace ringlm {

// 32 bytes from p (unaligned).
RINGLM_AVX2_TARGET inline __m256i Load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// The halving sum of the 8 lanes (ggml's hsum_float_8).
RINGLM_AVX2_TARGET inline float Reduce(__m256 acc) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  return ReduceLanes<8>(lanes);
}

// The 8 scales and 8 mins of a Q4_K super-block as 16-bit values, scales
// first (ggml's kmask unpacking of the 12 bytes; equals Q4_KScaleMin).
RINGLM_AVX2_TARGET inline __m256i Q4_KScalesMins(const uint8_t* packed) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  uint32_t u[4];
  std::memcpy(u, packed, 12);
  u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const uint32_t mins_lo = u[1] & kmask1;
  u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  u[2] = mins_lo;
  u[0] &= kmask1;
  // Bytes: sc0..3 sc4..7 m0..3 m4..7.
  return _mm256_cvtepu8_epi16(_mm_set_epi32(static_cast<int>(u[3]), static_cast<int>(u[2]),
                                            static_cast<int>(u[1]), static_cast<int>(u[0])));
}

// What every token takes from one Q4_K or Q5_K super-block: its scales
// (sc[2c] and sc[2c + 1] for the low and high nibbles of chunk c), mins and
// dmin.
struct Q4_KBlockScales {
  alignas(32) int16_t sc[16];
  __m128i mins;
  float dmin;
};
RINGLM_AVX2_TARGET inline void GetQ4_KBlockScales(const uint8_t* packed, uint16_t dmin,
                                                  Q4_KBlockScales* out) {
  const __m256i scales_mins = Q4_KScalesMins(packed);
  _mm256_store_si256(reinterpret_cast<__m256i*>(out->sc), scales_mins);
  out->mins = _mm256_extracti128_si256(scales_mins, 1);
  out->dmin = Fp16ToFp32(dmin);
}

// A token's exact integer mins products of one Q4_K/Q5_K super-block:
// prod[k] = m[2k] (bs[4k] + bs[4k+1]) + m[2k+1] (bs[4k+2] + bs[4k+3]).
RINGLM_AVX2_TARGET inline __m128i Q4_KMinsProducts(const Q4_KBlockScales& s, const BlockQ8_K& xb) {
  const __m128i pair_sums =
      _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums)),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums + 8)));
  return _mm_madd_epi16(s.mins, pair_sums);
}

// acc_m plus a token's mins term of one Q4_K super-block: -d_x * dmin * prod.
RINGLM_AVX2_TARGET inline __m128 AddQ4_KMins(__m128 acc_m, const Q4_KBlockScales& s,
                                             const BlockQ8_K& xb) {
  return _mm_fmadd_ps(_mm_set1_ps(-xb.d * s.dmin), _mm_cvtepi32_ps(Q4_KMinsProducts(s, xb)), acc_m);
}

// Bit `bit` (0..7) of each byte of h, as 0 or 1 << value_shift.
RINGLM_AVX2_TARGET inline __m256i BitAsValue(__m256i h, int bit, int value_shift) {
  const __m256i one = _mm256_set1_epi8(1);
  return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, bit), one), value_shift);
}

// The target attribute of the AVX-512 pair kernels, run only where
// CpuSupports(QGemmTarget::kAvx512Vnni).
#define RINGLM_AVX512BW_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c")))

// 32 bytes from a in the low half of a zmm, 32 bytes from b in the high one.
RINGLM_AVX512BW_TARGET inline __m512i PairOf(const void* a, const void* b) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(Load32(a)), Load32(b), 1);
}

// Dot of one Q2_K or Q3_K row (job.type) with tokens [t, t + n), 1 <= n <=
// 4, into out[0..n), bit-identical to DotOneScalar; fetches the row
// kPrefetchAheadRows further on meanwhile. Hot.
void Q2Q3_KDotTokensAvx2(const DotJob& job, const void* row, int64_t t, int64_t n, int64_t nb,
                         float* out);
// Dot of one Q2_K or Q3_K row (`type`) with the 2p tokens x[0..2p), 1 <= p <=
// 4, into out[0..2p), bit-identical to Q2Q3_KDotTokensAvx2 (AVX-512 pairs);
// `ahead` is fetched meanwhile. Precondition:
// CpuSupports(QGemmTarget::kAvx512Vnni). Hot.
void Q2Q3_KPairsAvx512(TensorType type, const void* row, const BlockQ8_K* const* x, int p,
                       int64_t nb, const uint8_t* ahead, float* out);

}  // namespace ringlm

#endif  // __x86_64__

#endif  // RINGLM_INFERENCE_OPS_KQUANT_X86_INTERNAL_H_
