// Internal interface between matmul.cc (activation conversion, threading) and
// the per-target dot-product kernels in matmul_simd.cc. Not for use outside
// inference/ops.
#ifndef RINGLM_INFERENCE_OPS_MATMUL_INTERNAL_H_
#define RINGLM_INFERENCE_OPS_MATMUL_INTERNAL_H_

#include <cstddef>
#include <cstdint>

#include "gguf/tensor_type.h"
#include "inference/ops/matmul.h"
#include "inference/ops/quant.h"
#include "inference/ops/thread_pool.h"

namespace ringlm {

// The target attribute of the x86 AVX2 kernels (qgemm_x86.cc,
// kquant_x86.cc, float_gemm_x86.cc), run only where
// CpuSupports(QGemmTarget::kAvx2).
#define RINGLM_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

// Decode (and a small batch) reads every weight once, from memory: a kernel
// that walks a tile of weight rows calls this at each of its steps, so that
// the rows 8 further on are on their way while it computes (kStepBytes of
// them per step, from `next`). The hardware prefetcher alone follows too
// few rows at once: on a Zen 3 this took Q8_0 decode from 17 to 21 tokens/s
// and a 4-token Q8_0 prompt from 45 to 60, on an Intel Xeon (Emerald
// Rapids) an 8-token Q8_0 prompt from 86 to 130 (x86 kernels: Q8_0/Q4_0
// and K-quant tiles of any batch, the float ones in decode; the NEON ones
// do not use it yet). A prefetch never faults, so `next` may run past the
// weights.
inline constexpr size_t kPrefetchAheadRows = 8;
template <size_t kStepBytes>
inline void PrefetchAhead(const uint8_t* next) {
  for (size_t o = 0; o < kStepBytes; o += 64) {
    __builtin_prefetch(next + o, /*rw=*/0, /*locality=*/3);
  }
}

// One MatMul call after its activations were converted to the vec_dot_type.
struct DotJob {
  TensorType type = TensorType::kF32;
  DotOrder order = DotOrder::kVecDot;
  const uint8_t* w = nullptr;  // rows x row_bytes
  size_t row_bytes = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  const float* x_floats = nullptr;    // F32/F16/BF16: n_tokens x cols, rounded
  const BlockQ8_0* x_q8_0 = nullptr;  // Q8_0/Q4_0/Q5_0/IQ4_NL: n_tokens x cols/32
  const BlockQ8_1* x_q8_1 = nullptr;  // Q4_1/Q5_1: n_tokens x cols/32
  const BlockQ8_K* x_q8_k = nullptr;  // K-quants, IQ4_XS: n_tokens x cols/256
  float* y = nullptr;                 // n_tokens x rows
};

// y[t * rows + r] for r in [r0, r1), t in [t0, t1), on the best SIMD target
// of this CPU (runtime dispatch). Hot.
void DotRows(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1);

// The Highway target (HWY_AVX2, HWY_AVX3, ...) that dynamic dispatch runs
// now: Highway's cached choice, so it costs no CPUID, and it follows
// hwy::SetSupportedTargetsForTest. Hot-path safe.
int64_t DispatchedHwyTarget();

#if defined(__x86_64__)
// DotRows for F32/F16/BF16 jobs in DotOrder::kTiled with the AVX2 register
// tiles of float_gemm_x86.cc, bit-identical to it. Preconditions: cols % 16
// == 0 and CpuSupports(QGemmTarget::kAvx2). Hot.
void FloatTiledDotRowsAvx2(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
// The same with the zmm tiles of float_gemm_avx512.cc, bit-identical to it.
// Preconditions: cols % 16 == 0 and CpuSupports(QGemmTarget::kAvx512Vnni).
void FloatTiledDotRowsAvx512(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1);

// dst[i] = x[i] rounded to `type` (F16 or BF16) and widened back:
// Fp16ToFp32(Fp32ToFp16(x[i])) or Bf16ToFp32(Fp32ToBf16(x[i])), bit for bit
// (NaN and infinity included), with F16C/AVX2. Precondition:
// CpuSupports(QGemmTarget::kAvx2). Hot (every F16/BF16 MatMul's activations).
void RoundToHalfAvx2(TensorType type, const float* x, float* dst, int64_t n);
#endif

// One output element with portable scalar code (bit-identical to DotRows);
// used by targets without FMA, where a vector mul+add would round twice.
float DotOneScalar(const DotJob& job, int64_t r, int64_t t);

// One byte product as ggml's AVX2 mul_add_epi8 forms it for the IQ4 types:
// _mm256_maddubs_epi16(|w|, sign(x, w)), where the sign flip of x = -128
// wraps to -128, so w < 0 against x = -128 counts as w * 128. (Q8_K
// activations hold -128; Q8_0 ones never do.)
inline int32_t SignTrickProduct(int32_t w, int32_t x) {
  // w * x, plus 256 w where the flip applies (w * -128 + 256 w = w * 128);
  // branch-free, for the scalar target's hot loop.
  const int32_t flip = static_cast<int32_t>((w < 0) & (x == -128));
  return w * x + flip * 256 * w;
}

// Reduces `lanes` floats by halving: v[i] += v[i + width] for width =
// lanes/2, ..., 1 (the order of _mm512_reduce_add_ps and hsum_float_8).
template <int kLanes>
inline float ReduceLanes(float* v) {
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) v[i] = v[i] + v[i + width];
  }
  return v[0];
}

// fn(begin, end) over [0, n): split across `pool`, or one call on this thread
// when there is no pool.
template <typename Fn>
void RunParallel(ThreadPool* pool, int64_t n, const Fn& fn) {
  if (pool == nullptr) {
    if (n > 0) fn(0, n);
  } else {
    pool->ParallelFor(n, fn);
  }
}

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_MATMUL_INTERNAL_H_
