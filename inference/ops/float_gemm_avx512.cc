// x86 AVX-512 register tiles for F32, F16 and BF16 weights in the tiled order
// (DotOrder::kTiled), the wider twin of float_gemm_x86.cc; MatMul runs them
// where ActiveQGemmTarget() is kAvx512Vnni.
//
// Numerics: exactly DotTiled of matmul_simd.cc. An output's 16-lane
// accumulator is one zmm (lane l sums the columns 16s + l), takes one FMA per
// lane per step of 16 columns, in column order, and is reduced by halving at
// the end: the FMAs of float_gemm_x86.cc's two ymm halves, lane for lane. A
// tile of R rows x T tokens only shares the loads, so an output's bits never
// depend on the tile it lands in, the batch size, the threads or the target.
// Hot: F32/F16/BF16 MatMul on AVX-512 CPUs.
#include "inference/ops/float_tiles.h"
#include "inference/ops/matmul_internal.h"

#if defined(__x86_64__)

// GCC 12 reports its own _mm512_undefined_*() (used inside convert, cast
// and shuffle intrinsics) as uninitialized: a false positive.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

namespace ringlm {
namespace {

#define RINGLM_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c")))

// 16 weights of element k, as f32 (exact).
struct LoadF32 {
  static constexpr size_t kBytes = 4;
  RINGLM_AVX512_TARGET static __m512 At(const void* row, int64_t k) {
    return _mm512_loadu_ps(static_cast<const float*>(row) + k);
  }
};
struct LoadF16 {
  static constexpr size_t kBytes = 2;
  RINGLM_AVX512_TARGET static __m512 At(const void* row, int64_t k) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + k)));
  }
};
struct LoadBf16 {
  static constexpr size_t kBytes = 2;
  RINGLM_AVX512_TARGET static __m512 At(const void* row, int64_t k) {
    const __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + k));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

// ReduceLanes<16> of the lanes of v, in registers: the same halving tree
// (lane i + lane i + 8, then + 4, + 2, + 1), so the same bits.
RINGLM_AVX512_TARGET inline float ReduceHalving(__m512 v) {
  const __m512 high = _mm512_shuffle_f32x4(v, v, 0xEE);  // lanes 8-15 to 0-7
  const __m256 v8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_castps512_ps256(high));
  const __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
  const __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
  return _mm_cvtss_f32(_mm_add_ss(v2, _mm_movehdup_ps(v2)));
}

constexpr int kRows = 4;    // R of a full tile
constexpr int kTokens = 6;  // T of a full tile: 24 accumulators, 6 activations and a weight

// The kernels of FloatTileWalk: out[i * T + j] = dot(row i, token j) for R
// rows (row_bytes apart) and T tokens (cols apart in x). Precondition: cols %
// 16 == 0. A decode tile (T == 1) fetches the R rows kPrefetchAheadRows
// further on meanwhile.
template <typename Load>
struct Tiles {
  template <int R, int T>
  RINGLM_AVX512_TARGET static void Run(const uint8_t* w, size_t row_bytes, const float* x,
                                       int64_t cols, float* out) {
    constexpr size_t kStepBytes = R * 16 * Load::kBytes;  // R rows' bytes per step, contiguous
    __m512 acc[R][T];
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < T; ++j) acc[i][j] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < cols; k += 16) {
      if constexpr (T == 1) {
        PrefetchAhead<kStepBytes>(w + kPrefetchAheadRows * row_bytes + (k / 16) * kStepBytes);
      }
      __m512 xv[T];
      for (int j = 0; j < T; ++j) xv[j] = _mm512_loadu_ps(x + j * cols + k);
      for (int i = 0; i < R; ++i) {
        const __m512 wv = Load::At(w + i * row_bytes, k);
        for (int j = 0; j < T; ++j) acc[i][j] = _mm512_fmadd_ps(wv, xv[j], acc[i][j]);
      }
    }
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < T; ++j) out[i * T + j] = ReduceHalving(acc[i][j]);
    }
  }
};
template <typename Load>
using DotRowsTiled = FloatTileWalk<kRows, kTokens, Tiles<Load>>;

}  // namespace

void FloatTiledDotRowsAvx512(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  switch (job.type) {
    case TensorType::kF32:
      return DotRowsTiled<LoadF32>::Run(job, r0, r1, t0, t1);
    case TensorType::kF16:
      return DotRowsTiled<LoadF16>::Run(job, r0, r1, t0, t1);
    default:
      return DotRowsTiled<LoadBf16>::Run(job, r0, r1, t0, t1);
  }
}

}  // namespace ringlm

#endif  // __x86_64__
