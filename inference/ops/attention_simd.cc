// SIMD attention kernels (attention.h), compiled per Highway target and
// dispatched at run time. Bit-identical to the scalar references:
//   - Scores: each key is widened to f32 once for all the queries that
//     share it; each dot product then runs ggml's 4 accumulators of 8 lanes
//     as two 4-lane halves each, with fused multiply-adds, and the same
//     reduction tree.
//   - Weighted sum: lanes hold different d, so each lane is one of ggml's dot
//     products over the keys. Its 32 accumulators (key j goes to j % 32) are
//     taken one at a time: the chain over keys j, j + 32, ... in registers,
//     then folded into the reduction tree.
// Targets without F16 conversion instructions or FMA (EMU128, SCALAR) run
// the references.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "inference/ops/attention_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target.h must come first.
#include <algorithm>
#include <cmath>
#include <vector>

#include "hwy/highway.h"
#include "inference/ops/attention.h"
#include "inference/ops/fp16.h"

#ifndef RINGLM_INFERENCE_OPS_ATTENTION_SIMD_ONCE_
#define RINGLM_INFERENCE_OPS_ATTENTION_SIMD_ONCE_
namespace ringlm {
// ggml_vec_dot_f16's shape on AVX2: steps of 32 products, 4 accumulators of
// 8 lanes.
inline constexpr int64_t kDotStep = 32;
}  // namespace ringlm
#endif

HWY_BEFORE_NAMESPACE();
namespace ringlm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#undef RINGLM_ATTN_SIMD
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) || (HWY_ARCH_ARM_A64 && HWY_TARGET == HWY_NEON)
#define RINGLM_ATTN_SIMD 1
#else
#define RINGLM_ATTN_SIMD 0
#endif

#if RINGLM_ATTN_SIMD

using DF = hn::ScalableTag<float>;
using D4 = hn::FixedTag<float, 4>;

// DotF16Ggml(x, y, n) with x already widened to f32.
HWY_INLINE float DotOrdered(const float* x, const float* y, int64_t n) {
  const D4 d;
  const int64_t np = n - n % kDotStep;
  // acc[2a] and acc[2a + 1]: lanes 0-3 and 4-7 of ggml's accumulator a.
  hn::Vec<D4> acc[8];
  for (auto& a : acc) a = hn::Zero(d);
  for (int64_t i = 0; i < np; i += kDotStep) {
    for (int k = 0; k < 8; ++k) {
      acc[k] = hn::MulAdd(hn::LoadU(d, x + i + 4 * k), hn::LoadU(d, y + i + 4 * k), acc[k]);
    }
  }
  const auto lo = hn::Add(hn::Add(acc[0], acc[4]), hn::Add(acc[2], acc[6]));
  const auto hi = hn::Add(hn::Add(acc[1], acc[5]), hn::Add(acc[3], acc[7]));
  const auto t = hn::Add(lo, hi);                     // t[l] = a[l] + a[l + 4]
  const auto pairs = hn::Add(t, hn::Reverse2(d, t));  // t0 + t1, -, t2 + t3, -
  double sum = hn::GetLane(pairs) + hn::ExtractLane(pairs, 2);
  for (int64_t i = np; i < n; ++i) {
    const float product = x[i] * y[i];
    sum += static_cast<double>(product);
  }
  return static_cast<float>(sum);
}

void ScoresImpl(const float* q, int64_t n_q, const uint16_t* const* keys, int64_t n_keys,
                int64_t dim, float scale, float* scores, int64_t scores_stride) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  thread_local std::vector<float> widened;
  if (widened.size() < static_cast<size_t>(dim)) widened.resize(dim);
  float* kf = widened.data();
  for (int64_t j = 0; j < n_keys; ++j) {
    const auto* k = reinterpret_cast<const hwy::float16_t*>(keys[j]);
    int64_t d = 0;
    for (; d + N <= dim; d += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, k + d)), df, kf + d);
    for (; d < dim; ++d) kf[d] = Fp16ToFp32(keys[j][d]);
    for (int64_t i = 0; i < n_q; ++i) {
      scores[i * scores_stride + j] = DotOrdered(kf, q + i * dim, dim) * scale;
    }
  }
}

// Lanes [d0, d0 + N) of one query's weighted sum: lane by lane, ggml's dot
// product over the keys, zero weights padding them to a multiple of 32.
HWY_INLINE hn::Vec<DF> WeightedSumLanes(const float* p, const uint16_t* const* values,
                                        int64_t n_keys, int64_t d0) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  hn::Vec<DF> a[8];  // a[l]: (acc0 + acc2) + (acc1 + acc3) at lane l
  for (int l = 0; l < 8; ++l) {
    hn::Vec<DF> c[4];
    for (int k = 0; k < 4; ++k) {
      c[k] = hn::Zero(df);
      for (int64_t j = 8 * k + l; j < n_keys; j += kDotStep) {
        const auto v = hn::PromoteTo(
            df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(values[j]) + d0));
        c[k] = hn::MulAdd(v, hn::Set(df, p[j]), c[k]);
      }
    }
    a[l] = hn::Add(hn::Add(c[0], c[2]), hn::Add(c[1], c[3]));
  }
  const auto t0 = hn::Add(a[0], a[4]);
  const auto t1 = hn::Add(a[1], a[5]);
  const auto t2 = hn::Add(a[2], a[6]);
  const auto t3 = hn::Add(a[3], a[7]);
  return hn::Add(hn::Add(t0, t1), hn::Add(t2, t3));
}

void WeightedSumImpl(const float* p, int64_t n_q, int64_t p_stride, const uint16_t* const* values,
                     int64_t n_keys, int64_t dim, float* out, int64_t out_stride) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t d_tail = dim - dim % N;
  for (int64_t i = 0; i < n_q; ++i) {
    for (int64_t d0 = 0; d0 < d_tail; d0 += N) {
      hn::StoreU(WeightedSumLanes(p + i * p_stride, values, n_keys, d0), df,
                 out + i * out_stride + d0);
    }
  }
  if (d_tail == dim) return;
  // The last dim % N lanes: the reference, per lane.
  thread_local std::vector<const uint16_t*> shifted;
  shifted.resize(n_keys);
  for (int64_t j = 0; j < n_keys; ++j) shifted[j] = values[j] + d_tail;
  AttentionWeightedSumF16Reference(p, n_q, p_stride, shifted.data(), n_keys, dim - d_tail,
                                   out + d_tail, out_stride);
}

// VCVTPS2PH (F16C) / FCVTN round to nearest even, as Fp32ToFp16 specifies.
void RoundImpl(float* x, int64_t n) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::PromoteTo(df, hn::DemoteTo(dh, hn::LoadU(df, x + i))), df, x + i);
  }
  for (; i < n; ++i) x[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
}

#else  // !RINGLM_ATTN_SIMD

void RoundImpl(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
}

void ScoresImpl(const float* q, int64_t n_q, const uint16_t* const* keys, int64_t n_keys,
                int64_t dim, float scale, float* scores, int64_t scores_stride) {
  AttentionScoresF16Reference(q, n_q, keys, n_keys, dim, scale, scores, scores_stride);
}

void WeightedSumImpl(const float* p, int64_t n_q, int64_t p_stride, const uint16_t* const* values,
                     int64_t n_keys, int64_t dim, float* out, int64_t out_stride) {
  AttentionWeightedSumF16Reference(p, n_q, p_stride, values, n_keys, dim, out, out_stride);
}

#endif  // RINGLM_ATTN_SIMD

}  // namespace HWY_NAMESPACE
}  // namespace ringlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ringlm {
namespace {

// ggml_vec_dot_f16's order (attention.h) over n products x(k) * y(k).
template <typename X, typename Y>
float DotGgmlOrder(const X& x, const Y& y, int64_t n) {
  const int64_t np = n - n % kDotStep;
  float acc[4][8] = {};
  for (int64_t i = 0; i < np; i += kDotStep) {
    for (int a = 0; a < 4; ++a) {
      for (int l = 0; l < 8; ++l) {
        const int64_t k = i + 8 * a + l;
        acc[a][l] = std::fma(x(k), y(k), acc[a][l]);
      }
    }
  }
  float lanes[8];
  for (int l = 0; l < 8; ++l) lanes[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  float t[4];
  for (int l = 0; l < 4; ++l) t[l] = lanes[l] + lanes[l + 4];
  double sum = (t[0] + t[1]) + (t[2] + t[3]);
  for (int64_t k = np; k < n; ++k) {
    const float product = x(k) * y(k);
    sum += static_cast<double>(product);
  }
  return static_cast<float>(sum);
}

}  // namespace

HWY_EXPORT(ScoresImpl);
HWY_EXPORT(WeightedSumImpl);
HWY_EXPORT(RoundImpl);

float DotF16Ggml(const uint16_t* x, const float* y, int64_t n) {
  return DotGgmlOrder([x](int64_t k) { return Fp16ToFp32(x[k]); }, [y](int64_t k) { return y[k]; },
                      n);
}

void RoundThroughF16(float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(RoundImpl)(x, n); }

void AttentionScoresF16(const float* q, int64_t n_q, const uint16_t* const* keys, int64_t n_keys,
                        int64_t dim, float scale, float* scores, int64_t scores_stride) {
  HWY_DYNAMIC_DISPATCH(ScoresImpl)(q, n_q, keys, n_keys, dim, scale, scores, scores_stride);
}

void AttentionWeightedSumF16(const float* p, int64_t n_q, int64_t p_stride,
                             const uint16_t* const* values, int64_t n_keys, int64_t dim, float* out,
                             int64_t out_stride) {
  HWY_DYNAMIC_DISPATCH(WeightedSumImpl)(p, n_q, p_stride, values, n_keys, dim, out, out_stride);
}

void AttentionScoresF16Reference(const float* q, int64_t n_q, const uint16_t* const* keys,
                                 int64_t n_keys, int64_t dim, float scale, float* scores,
                                 int64_t scores_stride) {
  for (int64_t i = 0; i < n_q; ++i) {
    for (int64_t j = 0; j < n_keys; ++j) {
      scores[i * scores_stride + j] = DotF16Ggml(keys[j], q + i * dim, dim) * scale;
    }
  }
}

void AttentionWeightedSumF16Reference(const float* p, int64_t n_q, int64_t p_stride,
                                      const uint16_t* const* values, int64_t n_keys, int64_t dim,
                                      float* out, int64_t out_stride) {
  const int64_t padded = (n_keys + kDotStep - 1) / kDotStep * kDotStep;
  for (int64_t i = 0; i < n_q; ++i) {
    const float* pi = p + i * p_stride;
    for (int64_t d = 0; d < dim; ++d) {
      out[i * out_stride + d] =
          DotGgmlOrder([&](int64_t j) { return j < n_keys ? Fp16ToFp32(values[j][d]) : 0.0f; },
                       [&](int64_t j) { return j < n_keys ? pi[j] : 0.0f; }, padded);
    }
  }
}

}  // namespace ringlm
#endif  // HWY_ONCE
