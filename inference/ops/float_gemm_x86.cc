// x86 AVX2 register tiles for F32, F16 and BF16 weights in the tiled order
// (DotOrder::kTiled, llamafile tinyBLAS<16>), under a target attribute like
// qgemm_x86.cc; MatMul runs them only where CpuSupports(QGemmTarget::kAvx2).
//
// Numerics: exactly DotTiled of matmul_simd.cc. Each output keeps its own
// 16-lane accumulator (two ymm: lanes 0-7 and 8-15), takes one FMA per lane
// per step of 16 columns, in column order, and is reduced by halving at the
// end. A tile of R rows x T tokens only shares the loads: the weights are
// widened once per step for all T tokens, and each token's activations are
// read once for all R rows. So an output's bits never depend on the tile it
// lands in, the batch size or the threads. Hot: F32/F16/BF16 MatMul on x86.
#include "inference/ops/matmul_internal.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>

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

// out[i * T + j] = dot(row i, token j) for R rows (row_bytes apart) and T
// tokens (x rows `cols` apart). Precondition: cols % 16 == 0. With one token
// (decode), the R rows kPrefetchAheadRows further on are fetched meanwhile.
template <typename Load, int R, int T>
RINGLM_AVX2_TARGET void Tile(const uint8_t* w, size_t row_bytes, const float* x, int64_t cols,
                             float* out) {
  constexpr size_t kStepBytes = R * 16 * Load::kBytes;  // R rows' bytes per step, contiguous
  __m256 acc[R][T][2];
  for (int i = 0; i < R; ++i) {
    for (int j = 0; j < T; ++j) acc[i][j][0] = acc[i][j][1] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < cols; k += 16) {
    if constexpr (T == 1) {
      PrefetchAhead<kStepBytes>(w + kPrefetchAheadRows * row_bytes + (k / 16) * kStepBytes);
    }
    for (int i = 0; i < R; ++i) {
      const void* row = w + i * row_bytes;
      const __m256 w0 = Load::At(row, k);
      const __m256 w1 = Load::At(row, k + 8);
      for (int j = 0; j < T; ++j) {
        const float* xj = x + j * cols + k;
        acc[i][j][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xj), acc[i][j][0]);
        acc[i][j][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xj + 8), acc[i][j][1]);
      }
    }
  }
  for (int i = 0; i < R; ++i) {
    for (int j = 0; j < T; ++j) {
      alignas(32) float lanes[16];
      _mm256_store_ps(lanes, acc[i][j][0]);
      _mm256_store_ps(lanes + 8, acc[i][j][1]);
      out[i * T + j] = ReduceLanes<16>(lanes);
    }
  }
}

constexpr int kRows = 2;    // R of a full tile
constexpr int kTokens = 3;  // T of a full tile: 12 accumulators of 16 hide the FMA latency

// Tile<Load, R, n> for a tail of n < T tokens too.
template <typename Load, int R, int T = kTokens>
RINGLM_AVX2_TARGET void TileOf(int n, const uint8_t* w, size_t row_bytes, const float* x,
                               int64_t cols, float* out) {
  if constexpr (T > 1) {
    if (n < T) return TileOf<Load, R, T - 1>(n, w, row_bytes, x, cols, out);
  }
  Tile<Load, R, T>(w, row_bytes, x, cols, out);
}

template <typename Load, int R>
RINGLM_AVX2_TARGET void RowsTimesTokens(const DotJob& job, int64_t r, int64_t t0, int64_t t1) {
  const uint8_t* w = job.w + r * job.row_bytes;
  for (int64_t t = t0; t < t1; t += kTokens) {
    float out[kRows * kTokens];
    const int n = static_cast<int>(std::min<int64_t>(kTokens, t1 - t));
    TileOf<Load, R>(n, w, job.row_bytes, job.x_floats + t * job.cols, job.cols, out);
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < n; ++j) job.y[(t + j) * job.rows + r + i] = out[i * n + j];
    }
  }
}

template <typename Load>
RINGLM_AVX2_TARGET void DotRowsTiled(const DotJob& job, int64_t r0, int64_t r1, int64_t t0,
                                     int64_t t1) {
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) RowsTimesTokens<Load, kRows>(job, r, t0, t1);
  for (; r < r1; ++r) RowsTimesTokens<Load, 1>(job, r, t0, t1);
}

}  // namespace

void FloatTiledDotRowsAvx2(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  switch (job.type) {
    case TensorType::kF32:
      return DotRowsTiled<LoadF32>(job, r0, r1, t0, t1);
    case TensorType::kF16:
      return DotRowsTiled<LoadF16>(job, r0, r1, t0, t1);
    default:
      return DotRowsTiled<LoadBf16>(job, r0, r1, t0, t1);
  }
}

}  // namespace ringlm

#endif  // __x86_64__
