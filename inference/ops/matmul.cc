// Fast MatMul. The numerics are specified by matmul.h and written out plainly
// in matmul_reference.cc; this file computes the same bits with loops the
// compiler can vectorize (fixed-size lane arrays, no per-call allocation).
// Hot: the Dot* functions run rows x n_tokens times per call.
#include "inference/ops/matmul.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "inference/ops/fp16.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

// Rows per tile when a batch has several tokens: one tile of weights is reused
// for every token while it is hot in cache.
constexpr int64_t kRowTile = 16;

template <int kLanes>
inline float ReduceLanes(float* v) {
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) v[i] = v[i] + v[i + width];
  }
  return v[0];
}

// Loads weight element k of a float-like row as f32 (exact).
struct LoadF32 {
  const float* p;
  float operator()(int64_t k) const { return p[k]; }
};
struct LoadF16 {
  const uint16_t* p;
  float operator()(int64_t k) const { return Fp16ToFp32(p[k]); }
};
struct LoadBf16 {
  const uint16_t* p;
  float operator()(int64_t k) const { return Bf16ToFp32(p[k]); }
};

// ggml_vec_dot_{f32,f16} (AVX-512 order); `x` is already rounded to the
// vec_dot_type and widened to f32.
template <typename Load>
float DotVecDot(Load w, const float* x, int64_t n) {
  const int64_t full = n & ~int64_t{63};
  float acc[4][16] = {};
  for (int64_t i = 0; i < full; i += 64) {
    for (int j = 0; j < 4; ++j) {
      for (int lane = 0; lane < 16; ++lane) {
        const int64_t k = i + 16 * j + lane;
        acc[j][lane] = std::fma(w(k), x[k], acc[j][lane]);
      }
    }
  }
  for (int lane = 0; lane < 16; ++lane) {
    acc[0][lane] = acc[0][lane] + acc[2][lane];
    acc[1][lane] = acc[1][lane] + acc[3][lane];
  }
  for (int lane = 0; lane < 16; ++lane) acc[0][lane] = acc[0][lane] + acc[1][lane];
  double sum = ReduceLanes<16>(acc[0]);
  for (int64_t k = full; k < n; ++k) {
    const float product = w(k) * x[k];
    sum += static_cast<double>(product);
  }
  return static_cast<float>(sum);
}

// ggml_vec_dot_bf16 (AVX-512F order).
float DotVecDotBf16(LoadBf16 w, const float* x, int64_t n) {
  float c1[16] = {};
  float c2[16] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int lane = 0; lane < 16; ++lane) {
      c1[lane] = std::fma(w(i + lane), x[i + lane], c1[lane]);
      c2[lane] = std::fma(w(i + 16 + lane), x[i + 16 + lane], c2[lane]);
    }
  }
  double sum = 0.0;
  sum += static_cast<double>(ReduceLanes<16>(c1));
  sum += static_cast<double>(ReduceLanes<16>(c2));
  for (; i < n; ++i) {
    const float product = w(i) * x[i];
    sum += static_cast<double>(product);
  }
  return static_cast<float>(sum);
}

// tinyBLAS<16>. Precondition: n % 16 == 0.
template <typename Load>
float DotTiled(Load w, const float* x, int64_t n) {
  float acc[16] = {};
  for (int64_t i = 0; i < n; i += 16) {
    for (int lane = 0; lane < 16; ++lane) acc[lane] = std::fma(w(i + lane), x[i + lane], acc[lane]);
  }
  return ReduceLanes<16>(acc);
}

// Q8_0 weights x Q8_0 activations.
float DotQ8_0(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n_blocks) {
  float acc[8] = {};
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t partial[8] = {};
    for (int k = 0; k < 32; ++k) partial[k / 4] += w[b].qs[k] * x[b].qs[k];
    const float scale = Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d);
    for (int lane = 0; lane < 8; ++lane) {
      acc[lane] = std::fma(scale, static_cast<float>(partial[lane]), acc[lane]);
    }
  }
  return ReduceLanes<8>(acc);
}

// Q4_0 weights x Q8_0 activations.
float DotQ4_0(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n_blocks) {
  float acc[8] = {};
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t partial[8] = {};
    for (int k = 0; k < 16; ++k) {
      partial[k / 4] += ((w[b].qs[k] & 0x0F) - 8) * x[b].qs[k];
      partial[4 + k / 4] += ((w[b].qs[k] >> 4) - 8) * x[b].qs[16 + k];
    }
    const float scale = Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d);
    for (int lane = 0; lane < 8; ++lane) {
      acc[lane] = std::fma(scale, static_cast<float>(partial[lane]), acc[lane]);
    }
  }
  return ReduceLanes<8>(acc);
}

// Activations converted to the vec_dot_type, once per call. Float-like types
// keep one rounded f32 per value; quantized types keep Q8_0 blocks.
struct ConvertedActivations {
  const float* floats = nullptr;      // n_tokens x cols
  const BlockQ8_0* blocks = nullptr;  // n_tokens x cols/32
};

// One output element.
float DotOne(TensorType type, DotOrder order, const void* w, int64_t r, int64_t cols,
             const ConvertedActivations& act, int64_t t) {
  switch (type) {
    case TensorType::kF32: {
      const LoadF32 load{static_cast<const float*>(w) + r * cols};
      const float* x = act.floats + t * cols;
      return order == DotOrder::kTiled ? DotTiled(load, x, cols) : DotVecDot(load, x, cols);
    }
    case TensorType::kF16: {
      const LoadF16 load{static_cast<const uint16_t*>(w) + r * cols};
      const float* x = act.floats + t * cols;
      return order == DotOrder::kTiled ? DotTiled(load, x, cols) : DotVecDot(load, x, cols);
    }
    case TensorType::kBF16: {
      const LoadBf16 load{static_cast<const uint16_t*>(w) + r * cols};
      const float* x = act.floats + t * cols;
      return order == DotOrder::kTiled ? DotTiled(load, x, cols) : DotVecDotBf16(load, x, cols);
    }
    case TensorType::kQ8_0: {
      const int64_t nb = cols / kQ8_0BlockSize;
      return DotQ8_0(static_cast<const BlockQ8_0*>(w) + r * nb, act.blocks + t * nb, nb);
    }
    case TensorType::kQ4_0: {
      const int64_t nb = cols / kQ4_0BlockSize;
      return DotQ4_0(static_cast<const BlockQ4_0*>(w) + r * nb, act.blocks + t * nb, nb);
    }
    default:
      return 0.0f;
  }
}

void RunParallel(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool == nullptr) {
    if (n > 0) fn(0, n);
  } else {
    pool->ParallelFor(n, fn);
  }
}

}  // namespace

void MatMul(TensorType type, const void* w, int64_t rows, int64_t cols, const float* x,
            int64_t n_tokens, float* y, ThreadPool* pool) {
  assert(IsComputeSupported(type));
  assert(cols % TraitsOf(type).block_size == 0);
  if (rows <= 0 || n_tokens <= 0) return;

  // Scratch for converted activations, reused across calls on this thread.
  thread_local std::vector<float> float_scratch;
  thread_local std::vector<BlockQ8_0> block_scratch;

  ConvertedActivations act;
  switch (type) {
    case TensorType::kF32:
      act.floats = x;
      break;
    case TensorType::kF16:
    case TensorType::kBF16: {
      const size_t needed = static_cast<size_t>(n_tokens * cols);
      if (float_scratch.size() < needed) float_scratch.resize(needed);
      float* dst = float_scratch.data();
      const bool f16 = type == TensorType::kF16;
      RunParallel(pool, n_tokens, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin * cols; i < end * cols; ++i) {
          dst[i] = f16 ? Fp16ToFp32(Fp32ToFp16(x[i])) : Bf16ToFp32(Fp32ToBf16(x[i]));
        }
      });
      act.floats = dst;
      break;
    }
    case TensorType::kQ8_0:
    case TensorType::kQ4_0: {
      const int64_t nb = cols / kQ8_0BlockSize;
      const size_t needed = static_cast<size_t>(n_tokens * nb);
      if (block_scratch.size() < needed) block_scratch.resize(needed);
      BlockQ8_0* dst = block_scratch.data();
      RunParallel(pool, n_tokens, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          QuantizeRowQ8_0Activations(x + t * cols, dst + t * nb, cols);
        }
      });
      act.blocks = dst;
      break;
    }
    default:
      return;
  }

  const DotOrder order = MatMulDotOrder(type, rows, cols, n_tokens);
  // Each worker takes a contiguous range of output rows; within it, a tile of
  // kRowTile weight rows is applied to every token before moving on.
  RunParallel(pool, rows, [&](int64_t row_begin, int64_t row_end) {
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kRowTile) {
      const int64_t r1 = std::min(row_end, r0 + kRowTile);
      for (int64_t t = 0; t < n_tokens; ++t) {
        float* y_row = y + t * rows;
        for (int64_t r = r0; r < r1; ++r) y_row[r] = DotOne(type, order, w, r, cols, act, t);
      }
    }
  });
}

}  // namespace ringlm
