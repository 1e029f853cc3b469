// SIMD attention kernels (attention.h), compiled per Highway target and
// dispatched at run time. Bit-identical to the scalar references:
//   - Scores: lanes hold different keys, and each lane sums its products in
//     the reference order (d = 0, 1, ...), with separate Mul and Add. Keys
//     are fetched two f16 at a time by 32-bit gathers (needs an even stride
//     and an even dim, 4-byte aligned keys; otherwise the reference runs);
//     the last partial block re-reads its last key in the unused lanes.
//     Several queries against the same keys (the heads that share a KV head)
//     share each gather.
//   - Weighted sum: lanes hold different d; keys are taken in order j = 0,
//     1, ... with separate Mul and Add. Several queries' weights against
//     the same values share each load of them.
// Targets without F16 conversion instructions (EMU128, SCALAR) run the
// references.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "inference/ops/attention_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target.h must come first.
#include <algorithm>

#include "hwy/highway.h"
#include "inference/ops/attention.h"
#include "inference/ops/fp16.h"

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
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
constexpr size_t kN = hn::MaxLanes(DF());

// The f16 in the low (kHigh = false) or high half of each 32-bit lane, as f32.
template <bool kHigh>
HWY_INLINE hn::Vec<DF> HalfToF32(hn::Vec<DU> v) {
  const hn::Rebind<uint16_t, DU> du16;
  const hn::Rebind<hwy::float16_t, DU> dh;
  const auto bits = kHigh ? hn::ShiftRight<16>(v) : hn::And(v, hn::Set(DU(), 0xFFFFu));
  return hn::PromoteTo(DF(), hn::BitCast(dh, hn::TruncateTo(du16, bits)));
}

// Scores of G queries (q + g * dim) against the keys of one block of lanes
// (`index` picks them; `rem` of them are stored): each key pair is gathered
// and widened once for all G.
template <int G>
HWY_INLINE void ScoresBlock(const float* q, const uint32_t* base, hn::Vec<DI> index, int64_t dim,
                            float scale, size_t rem, float* scores, int64_t scores_stride) {
  const DF df;
  const DU du;
  hn::Vec<DF> acc[G];
  for (int g = 0; g < G; ++g) acc[g] = hn::Zero(df);
  for (int64_t d = 0; d < dim; d += 2) {
    const auto pair = hn::GatherIndex(du, base + d / 2, index);
    const auto lo = HalfToF32<false>(pair);
    const auto hi = HalfToF32<true>(pair);
    for (int g = 0; g < G; ++g) {
      acc[g] = hn::Add(acc[g], hn::Mul(hn::Set(df, q[g * dim + d]), lo));
      acc[g] = hn::Add(acc[g], hn::Mul(hn::Set(df, q[g * dim + d + 1]), hi));
    }
  }
  const auto vscale = hn::Set(df, scale);
  for (int g = 0; g < G; ++g) {
    if (rem == kN) {
      hn::StoreU(hn::Mul(acc[g], vscale), df, scores + g * scores_stride);
    } else {
      HWY_ALIGN float lanes[hn::MaxLanes(DF())];
      hn::Store(hn::Mul(acc[g], vscale), df, lanes);
      for (size_t l = 0; l < rem; ++l) scores[g * scores_stride + l] = lanes[l];
    }
  }
}

// fn.template operator()<n>() for a count 1 <= n <= kMax known only at run
// time: the kernels take their number of queries as a template argument.
template <int kMax, typename Fn>
HWY_INLINE void WithCount(int n, const Fn& fn) {
  if constexpr (kMax > 1) {
    if (n < kMax) return WithCount<kMax - 1>(n, fn);
  }
  fn.template operator()<kMax>();
}

// Up to kMaxQueries queries at a time: their accumulators stay in registers.
constexpr int kMaxQueries = 8;

void ScoresImpl(const float* q, int64_t n_q, const uint16_t* keys, int64_t stride, int64_t n_keys,
                int64_t dim, float scale, float* scores, int64_t scores_stride) {
  const bool gather_ok = stride % 2 == 0 && dim % 2 == 0 &&
                         reinterpret_cast<uintptr_t>(keys) % 4 == 0 &&
                         n_keys * stride < (int64_t{1} << 30);
  if (!gather_ok) {
    for (int64_t i = 0; i < n_q; ++i) {
      AttentionScoresF16Reference(q + i * dim, keys, stride, n_keys, dim, scale,
                                  scores + i * scores_stride);
    }
    return;
  }
  const DI di;
  const auto index = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(stride / 2)));
  for (int64_t j0 = 0; j0 < n_keys; j0 += static_cast<int64_t>(kN)) {
    const auto* base = reinterpret_cast<const uint32_t*>(keys + j0 * stride);
    const size_t rem = static_cast<size_t>(std::min<int64_t>(kN, n_keys - j0));
    // The last, partial block: lanes past the end re-read the last key and
    // are not stored.
    const auto block_index =
        rem == kN ? index
                  : hn::Mul(hn::Min(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(rem - 1))),
                            hn::Set(di, static_cast<int32_t>(stride / 2)));
    for (int64_t i = 0; i < n_q; i += kMaxQueries) {
      const int n = static_cast<int>(std::min<int64_t>(kMaxQueries, n_q - i));
      WithCount<kMaxQueries>(n, [&]<int G>() HWY_ATTR {
        ScoresBlock<G>(q + i * dim, base, block_index, dim, scale, rem,
                       scores + i * scores_stride + j0, scores_stride);
      });
    }
  }
}

// out[g] += p[g][j] * V_j over keys j for G queries (p + g * p_stride, out +
// g * out_stride) and the 4 vectors of dims [d0, d0 + 4N): each V vector is
// loaded and widened once for all G. Each lane's sum is the reference's.
template <int G>
HWY_INLINE void WeightedSumBlock(const float* p, int64_t p_stride, const uint16_t* values,
                                 int64_t stride, int64_t n_keys, int64_t d0, float* out,
                                 int64_t out_stride) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  constexpr int64_t N = static_cast<int64_t>(kN);
  hn::Vec<DF> acc[G][4];
  for (int g = 0; g < G; ++g) {
    for (int k = 0; k < 4; ++k) acc[g][k] = hn::LoadU(df, out + g * out_stride + d0 + k * N);
  }
  for (int64_t j = 0; j < n_keys; ++j) {
    const auto* v = reinterpret_cast<const hwy::float16_t*>(values + j * stride + d0);
    hn::Vec<DF> vj[4];
    for (int k = 0; k < 4; ++k) vj[k] = hn::PromoteTo(df, hn::LoadU(dh, v + k * N));
    for (int g = 0; g < G; ++g) {
      const auto pj = hn::Set(df, p[g * p_stride + j]);
      for (int k = 0; k < 4; ++k) acc[g][k] = hn::Add(acc[g][k], hn::Mul(pj, vj[k]));
    }
  }
  for (int g = 0; g < G; ++g) {
    for (int k = 0; k < 4; ++k) hn::StoreU(acc[g][k], df, out + g * out_stride + d0 + k * N);
  }
}

// Queries per WeightedSumBlock: their accumulators (4 vectors each) and the
// 4 values stay in registers (AVX2 has 16 of them, the others 32).
#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
constexpr int kMaxSumQueries = 2;
#else
constexpr int kMaxSumQueries = 4;
#endif

void WeightedSumImpl(const float* p, int64_t n_q, int64_t p_stride, const uint16_t* values,
                     int64_t stride, int64_t n_keys, int64_t dim, float* out, int64_t out_stride) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  auto load = [&](int64_t j, int64_t d) {
    return hn::PromoteTo(
        df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(values + j * stride + d)));
  };
  constexpr int64_t N = static_cast<int64_t>(kN);
  int64_t d_tail = 0;
  for (; d_tail + 4 * N <= dim; d_tail += 4 * N) {
    for (int64_t i = 0; i < n_q; i += kMaxSumQueries) {
      const int n = static_cast<int>(std::min<int64_t>(kMaxSumQueries, n_q - i));
      WithCount<kMaxSumQueries>(n, [&]<int G>() HWY_ATTR {
        WeightedSumBlock<G>(p + i * p_stride, p_stride, values, stride, n_keys, d_tail,
                            out + i * out_stride, out_stride);
      });
    }
  }
  for (int64_t i = 0; i < n_q; ++i) {
    const float* pi = p + i * p_stride;
    float* oi = out + i * out_stride;
    int64_t d0 = d_tail;
    for (; d0 + N <= dim; d0 += N) {
      auto a = hn::LoadU(df, oi + d0);
      for (int64_t j = 0; j < n_keys; ++j) a = hn::Add(a, hn::Mul(hn::Set(df, pi[j]), load(j, d0)));
      hn::StoreU(a, df, oi + d0);
    }
    for (int64_t d = d0; d < dim; ++d) {
      float a = oi[d];
      for (int64_t j = 0; j < n_keys; ++j) a += pi[j] * Fp16ToFp32(values[j * stride + d]);
      oi[d] = a;
    }
  }
}

// VCVTPS2PH (F16C) / FCVTN round to nearest even, as Fp32ToFp16 specifies.
void RoundImpl(float* x, int64_t n) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  int64_t i = 0;
  for (; i + static_cast<int64_t>(kN) <= n; i += kN) {
    hn::StoreU(hn::PromoteTo(df, hn::DemoteTo(dh, hn::LoadU(df, x + i))), df, x + i);
  }
  for (; i < n; ++i) x[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
}

#else  // !RINGLM_ATTN_SIMD

void RoundImpl(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
}

void ScoresImpl(const float* q, int64_t n_q, const uint16_t* keys, int64_t stride, int64_t n_keys,
                int64_t dim, float scale, float* scores, int64_t scores_stride) {
  for (int64_t i = 0; i < n_q; ++i) {
    AttentionScoresF16Reference(q + i * dim, keys, stride, n_keys, dim, scale,
                                scores + i * scores_stride);
  }
}
void WeightedSumImpl(const float* p, int64_t n_q, int64_t p_stride, const uint16_t* values,
                     int64_t stride, int64_t n_keys, int64_t dim, float* out, int64_t out_stride) {
  for (int64_t i = 0; i < n_q; ++i) {
    AttentionWeightedSumF16Reference(p + i * p_stride, values, stride, n_keys, dim,
                                     out + i * out_stride);
  }
}

#endif  // RINGLM_ATTN_SIMD

}  // namespace HWY_NAMESPACE
}  // namespace ringlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ringlm {

HWY_EXPORT(ScoresImpl);
HWY_EXPORT(WeightedSumImpl);
HWY_EXPORT(RoundImpl);

void RoundThroughF16(float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(RoundImpl)(x, n); }

void AttentionScoresF16(const float* q, const uint16_t* keys, int64_t stride, int64_t n_keys,
                        int64_t dim, float scale, float* scores) {
  HWY_DYNAMIC_DISPATCH(ScoresImpl)(q, 1, keys, stride, n_keys, dim, scale, scores, n_keys);
}

void AttentionScoresF16Queries(const float* q, int64_t n_q, const uint16_t* keys, int64_t stride,
                               int64_t n_keys, int64_t dim, float scale, float* scores,
                               int64_t scores_stride) {
  HWY_DYNAMIC_DISPATCH(ScoresImpl)(q, n_q, keys, stride, n_keys, dim, scale, scores, scores_stride);
}

void AttentionWeightedSumF16(const float* p, const uint16_t* values, int64_t stride, int64_t n_keys,
                             int64_t dim, float* out) {
  HWY_DYNAMIC_DISPATCH(WeightedSumImpl)(p, 1, n_keys, values, stride, n_keys, dim, out, dim);
}

void AttentionWeightedSumF16Queries(const float* p, int64_t n_q, int64_t p_stride,
                                    const uint16_t* values, int64_t stride, int64_t n_keys,
                                    int64_t dim, float* out, int64_t out_stride) {
  HWY_DYNAMIC_DISPATCH(WeightedSumImpl)
  (p, n_q, p_stride, values, stride, n_keys, dim, out, out_stride);
}

void AttentionScoresF16Reference(const float* q, const uint16_t* keys, int64_t stride,
                                 int64_t n_keys, int64_t dim, float scale, float* scores) {
  for (int64_t j = 0; j < n_keys; ++j) {
    const uint16_t* k = keys + j * stride;
    float dot = 0.0f;
    for (int64_t d = 0; d < dim; ++d) dot += q[d] * Fp16ToFp32(k[d]);
    scores[j] = dot * scale;
  }
}

void AttentionWeightedSumF16Reference(const float* p, const uint16_t* values, int64_t stride,
                                      int64_t n_keys, int64_t dim, float* out) {
  for (int64_t j = 0; j < n_keys; ++j) {
    const uint16_t* v = values + j * stride;
    for (int64_t d = 0; d < dim; ++d) out[d] += p[j] * Fp16ToFp32(v[d]);
  }
}

}  // namespace ringlm
#endif  // HWY_ONCE
