// x86 AVX2 register tiles for F32, F16 and BF16 weights in the tiled order
// (DotOrder::kTiled, llamafile tinyBLAS<16>), under a target attribute like
// qgemm_x86.cc; MatMul runs them only where CpuSupports(QGemmTarget::kAvx2).
//
// Numerics: exactly DotTiled of matmul_simd.cc. Each output keeps its own
// 16-lane accumulator, takes one FMA per lane per step of 16 columns, in
// column order, and is reduced by halving at the end. Lanes 0-7 and 8-15 are
// independent FMA chains, so a tile may run them in one pass (DecodeTile: one
// token) or in two (PromptTile: R rows x T tokens, a pass per half over each
// 256-column chunk) without changing a bit. A tile only shares the loads: the
// weights are widened once for all T tokens, and each token's activations are
// read once for all R rows. So an output's bits never depend on the tile it
// lands in, the batch size or the threads. Hot: F32/F16/BF16 MatMul on x86.
#include "inference/ops/float_tiles.h"
#include "inference/ops/matmul_internal.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>

#include "inference/ops/fp16.h"

namespace ringlm {
namespace {

// 8 weights of element k, as f32 (exact).
struct LoadF32 {
  static constexpr size_t kBytes = 4;
  RINGLM_AVX2_TARGET static __m256 At(const void* row, int64_t k) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + k);
  }
};
struct LoadF16 {
  static constexpr size_t kBytes = 2;
  RINGLM_AVX2_TARGET static __m256 At(const void* row, int64_t k) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + k)));
  }
};
struct LoadBf16 {
  static constexpr size_t kBytes = 2;
  RINGLM_AVX2_TARGET static __m256 At(const void* row, int64_t k) {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};

// out[i * T + j] = dot(row i, token j) for R rows (row_bytes apart) and one
// token (decode), with both halves of each accumulator in one pass; the R
// rows kPrefetchAheadRows further on are fetched meanwhile. Precondition:
// cols % 16 == 0.
template <typename Load, int R>
RINGLM_AVX2_TARGET void DecodeTile(const uint8_t* w, size_t row_bytes, const float* x, int64_t cols,
                                   float* out) {
  constexpr size_t kStepBytes = R * 16 * Load::kBytes;  // R rows' bytes per step, contiguous
  __m256 acc[R][2];
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < cols; k += 16) {
    PrefetchAhead<kStepBytes>(w + kPrefetchAheadRows * row_bytes + (k / 16) * kStepBytes);
    const __m256 x0 = _mm256_loadu_ps(x + k);
    const __m256 x1 = _mm256_loadu_ps(x + k + 8);
    for (int i = 0; i < R; ++i) {
      const void* row = w + i * row_bytes;
      acc[i][0] = _mm256_fmadd_ps(Load::At(row, k), x0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(Load::At(row, k + 8), x1, acc[i][1]);
    }
  }
  for (int i = 0; i < R; ++i) {
    alignas(32) float lanes[16];
    _mm256_store_ps(lanes, acc[i][0]);
    _mm256_store_ps(lanes + 8, acc[i][1]);
    out[i] = ReduceLanes<16>(lanes);
  }
}

// The same outputs for R rows and T tokens (a prompt). Lanes 0-7 and 8-15
// of an accumulator are independent FMA chains (columns 16s+0..7 and
// 16s+8..15), so they are run as two passes over the columns, one ymm per
// output each: R x T accumulators, T activation vectors and one weight
// vector fill the 16 registers, and every load feeds several FMAs.
constexpr int64_t kPassCols = 256;
template <typename Load, int R, int T>
RINGLM_AVX2_TARGET void PromptTile(const uint8_t* w, size_t row_bytes, const float* x, int64_t cols,
                                   float* out) {
  alignas(32) float lanes[R][T][16] = {};  // the accumulators between passes
  for (int64_t k0 = 0; k0 < cols; k0 += kPassCols) {
    const int64_t k1 = std::min(cols, k0 + kPassCols);
    for (int half = 0; half < 2; ++half) {
      __m256 acc[R][T];
      for (int i = 0; i < R; ++i) {
        for (int j = 0; j < T; ++j) acc[i][j] = _mm256_load_ps(&lanes[i][j][8 * half]);
      }
      for (int64_t k = k0 + 8 * half; k < k1; k += 16) {
        __m256 xv[T];
        for (int j = 0; j < T; ++j) xv[j] = _mm256_loadu_ps(x + j * cols + k);
        for (int i = 0; i < R; ++i) {
          const __m256 wv = Load::At(w + i * row_bytes, k);
          for (int j = 0; j < T; ++j) acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
        }
      }
      for (int i = 0; i < R; ++i) {
        for (int j = 0; j < T; ++j) _mm256_store_ps(&lanes[i][j][8 * half], acc[i][j]);
      }
    }
  }
  for (int i = 0; i < R; ++i) {
    for (int j = 0; j < T; ++j) out[i * T + j] = ReduceLanes<16>(lanes[i][j]);
  }
}

constexpr int kRows = 4;    // R of a full prompt tile
constexpr int kTokens = 3;  // T of a full prompt tile: 12 accumulators hide the FMA latency

// The kernels of FloatTileWalk: DecodeTile for one token, else PromptTile.
template <typename Load>
struct Tiles {
  template <int R, int T>
  RINGLM_AVX2_TARGET static void Run(const uint8_t* w, size_t row_bytes, const float* x,
                                     int64_t cols, float* out) {
    if constexpr (T == 1) {
      DecodeTile<Load, R>(w, row_bytes, x, cols, out);
    } else {
      PromptTile<Load, R, T>(w, row_bytes, x, cols, out);
    }
  }
};
template <typename Load>
using DotRowsTiled = FloatTileWalk<kRows, kTokens, Tiles<Load>>;

RINGLM_AVX2_TARGET void RoundToHalf(TensorType type, const float* x, float* dst, int64_t n) {
  int64_t i = 0;
  if (type == TensorType::kF16) {
    for (; i + 8 <= n; i += 8) {
      const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; ++i) dst[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
    return;
  }
  // BF16 (Fp32ToBf16): add 0x7fff plus the kept part's lowest bit and drop
  // the low half; a NaN keeps its top bits and is made quiet.
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i high = _mm256_set1_epi32(static_cast<int32_t>(0xffff0000u));
  const __m256i quiet = _mm256_set1_epi32(0x00400000);
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    const __m256i rounded =
        _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), high);
    const __m256i nan = _mm256_or_si256(_mm256_and_si256(u, high), quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_blendv_epi8(rounded, nan, is_nan));
  }
  for (; i < n; ++i) dst[i] = Bf16ToFp32(Fp32ToBf16(x[i]));
}

}  // namespace

void RoundToHalfAvx2(TensorType type, const float* x, float* dst, int64_t n) {
  RoundToHalf(type, x, dst, n);
}

void FloatTiledDotRowsAvx2(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
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
