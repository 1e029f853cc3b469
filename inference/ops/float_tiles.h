// The walk over a float MatMul job's outputs in register tiles, shared by the
// x86 float kernels (float_gemm_x86.cc, float_gemm_avx512.cc). Not for use
// outside inference/ops.
#ifndef RINGLM_INFERENCE_OPS_FLOAT_TILES_H_
#define RINGLM_INFERENCE_OPS_FLOAT_TILES_H_

#include <algorithm>
#include <cstdint>

#include "inference/ops/matmul_internal.h"

namespace ringlm {

// Rows [r0, r1) times tokens [t0, t1) of `job`, into job.y: each group of
// kTokens tokens visits every row before the next group (its activations
// stay in L1 while the rows come from L2), in tiles of kRows rows and then
// single rows. Tiles supplies the kernels, with their target attributes:
//   template <int R, int T>
//   static void Run(const uint8_t* w, size_t row_bytes, const float* x,
//                   int64_t cols, float* out);  // out[i * T + j] = dot(row i, token j)
// for 1 <= T <= kTokens and R in {kRows, 1}. A tile's bits must not depend
// on R or T; this walk only decides which tiles run.
template <int kRows, int kTokens, typename Tiles>
class FloatTileWalk {
 public:
  static void Run(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t += kTokens) {
      const int n = static_cast<int>(std::min<int64_t>(kTokens, t1 - t));
      int64_t r = r0;
      for (; r + kRows <= r1; r += kRows) TileAt<kRows>(job, r, t, n);
      for (; r < r1; ++r) TileAt<1>(job, r, t, n);
    }
  }

 private:
  // Tiles::Run<R, n> for n <= T tokens (a tail has fewer).
  template <int R, int T = kTokens>
  static void TileOf(int n, const uint8_t* w, size_t row_bytes, const float* x, int64_t cols,
                     float* out) {
    if constexpr (T > 1) {
      if (n < T) return TileOf<R, T - 1>(n, w, row_bytes, x, cols, out);
    }
    Tiles::template Run<R, T>(w, row_bytes, x, cols, out);
  }

  // Rows [r, r + R) times tokens [t, t + n).
  template <int R>
  static void TileAt(const DotJob& job, int64_t r, int64_t t, int n) {
    float out[R * kTokens];
    TileOf<R>(n, job.w + r * job.row_bytes, job.row_bytes, job.x_floats + t * job.cols, job.cols,
              out);
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < n; ++j) job.y[(t + j) * job.rows + r + i] = out[i * n + j];
    }
  }
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_FLOAT_TILES_H_
