// SIMD attention kernels (attention.h), compiled per Highway target and
// dispatched at run time. Bit-identical to the scalar references:
//   - Scores on x86: keys in the lanes (16 on AVX-512, 8 on AVX2), fetched
//     two f16 at a time by 32-bit gathers shared by up to 8 queries; each of
//     ggml's 32 accumulator lanes is a chain of fused multiply-adds, and the
//     reduction tree runs lane-wise; ggml's tail (dim % 32 products, added
//     in double) runs in key lanes too. Elsewhere (ARM, and rows a gather
//     cannot reach): 4 keys at a time widened to f32 once for all the
//     queries, each dot product in ggml's 4 accumulators of 8 lanes (two
//     4-lane halves on ARM), the tree's last steps (two hadds) serving the 4
//     keys together.
//   - Weighted sum: lanes hold different d, so each lane is one of ggml's dot
//     products over the keys. Its 32 accumulators (key j goes to j % 32) are
//     taken one at a time, each a chain over the keys j, j + 32, ... in
//     registers for a slab of the head dimension and up to 4 queries, which
//     share each load of the values, a window of keys at a time; then the
//     reduction tree. What is left narrower than a vector takes 8 lanes,
//     then 4, then the reference.
// Targets without F16 conversion instructions or FMA (EMU128, SCALAR) run
// the references.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "inference/ops/attention_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target.h must come first.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
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

// 8 lanes, one of ggml's AVX2 accumulators: one 256-bit vector on x86, two
// 4-lane halves on ARM.
#if HWY_ARCH_X86
using D8 = hn::FixedTag<float, 8>;
// (Constructors written out: an implicit one would miss the target
// attributes that HWY_BEFORE_NAMESPACE gives the functions here.)
struct Lanes8 {
  HWY_INLINE Lanes8() : v(hn::Zero(D8())) {}
  HWY_INLINE explicit Lanes8(hn::Vec<D8> x) : v(x) {}
  hn::Vec<D8> v;
};
HWY_INLINE Lanes8 Zero8() { return Lanes8(); }
HWY_INLINE Lanes8 Load8(const float* p) { return Lanes8(hn::LoadU(D8(), p)); }
HWY_INLINE Lanes8 MulAdd8(Lanes8 a, Lanes8 b, Lanes8 c) {
  return Lanes8(hn::MulAdd(a.v, b.v, c.v));
}
HWY_INLINE Lanes8 Add8(Lanes8 a, Lanes8 b) { return Lanes8(hn::Add(a.v, b.v)); }
// t[l] = a[l] + a[l + 4], l < 4.
HWY_INLINE hn::Vec<D4> Fold8(Lanes8 a) {
  return hn::Add(hn::LowerHalf(D4(), a.v), hn::UpperHalf(D4(), a.v));
}
#else
struct Lanes8 {
  HWY_INLINE Lanes8() : lo(hn::Zero(D4())), hi(hn::Zero(D4())) {}
  HWY_INLINE Lanes8(hn::Vec<D4> l, hn::Vec<D4> h) : lo(l), hi(h) {}
  hn::Vec<D4> lo, hi;
};
HWY_INLINE Lanes8 Zero8() { return Lanes8(); }
HWY_INLINE Lanes8 Load8(const float* p) {
  return Lanes8(hn::LoadU(D4(), p), hn::LoadU(D4(), p + 4));
}
HWY_INLINE Lanes8 MulAdd8(Lanes8 a, Lanes8 b, Lanes8 c) {
  return Lanes8(hn::MulAdd(a.lo, b.lo, c.lo), hn::MulAdd(a.hi, b.hi, c.hi));
}
HWY_INLINE Lanes8 Add8(Lanes8 a, Lanes8 b) {
  return Lanes8(hn::Add(a.lo, b.lo), hn::Add(a.hi, b.hi));
}
HWY_INLINE hn::Vec<D4> Fold8(Lanes8 a) { return hn::Add(a.lo, a.hi); }
#endif

// _mm_hadd_ps: a0 + a1, a2 + a3, b0 + b1, b2 + b3.
HWY_INLINE hn::Vec<D4> PairSums(hn::Vec<D4> a, hn::Vec<D4> b) {
  const D4 d;
  return hn::Add(hn::ConcatEven(d, b, a), hn::ConcatOdd(d, b, a));
}

// Keys per step of the scores: their folded sums end in one vector.
constexpr int64_t kScoreKeys = 4;

// Queries per step of the scores, which share each load of the keys: their
// accumulators stay in registers (AVX2 has 16 of them, the others 32).
#if HWY_ARCH_X86 && HWY_TARGET != HWY_AVX2
constexpr int kScoreQueries = 2;
#else
constexpr int kScoreQueries = 1;
#endif

// The dot products of 4 widened keys (kf + r * dim) with Q queries over
// their first np values (a multiple of 32), in ggml's order: accumulator k
// of 4 is a chain over the steps of 32; the accumulators are combined as
// ((a0 + a2) + (a1 + a3)), folded to t[l] = a[l] + a[l + 4], and the 4 keys'
// t's reduced together ((t0 + t1) + (t2 + t3), as two _mm_hadd_ps) into
// sums[qi]: one lane per key. One accumulator at a time keeps 3 vectors per
// product in registers.
template <int Q>
HWY_INLINE void DotsOfFourKeys(const float* kf, int64_t dim, const float* const* q, int64_t np,
                               hn::Vec<D4>* sums) {
  // Accumulator k's chain for every key and query, added to `into` unless
  // it is the first of its pair.
  auto chain = [&](int64_t k, bool first, Lanes8(&into)[kScoreKeys][Q]) HWY_ATTR {
    Lanes8 acc[kScoreKeys][Q];
    for (int r = 0; r < kScoreKeys; ++r) {
      for (int qi = 0; qi < Q; ++qi) acc[r][qi] = Zero8();
    }
    for (int64_t i = 8 * k; i < np; i += kDotStep) {
      Lanes8 y[Q];
      for (int qi = 0; qi < Q; ++qi) y[qi] = Load8(q[qi] + i);
      for (int r = 0; r < kScoreKeys; ++r) {
        const Lanes8 x = Load8(kf + r * dim + i);
        for (int qi = 0; qi < Q; ++qi) acc[r][qi] = MulAdd8(x, y[qi], acc[r][qi]);
      }
    }
    for (int r = 0; r < kScoreKeys; ++r) {
      for (int qi = 0; qi < Q; ++qi) {
        into[r][qi] = first ? acc[r][qi] : Add8(into[r][qi], acc[r][qi]);
      }
    }
  };
  Lanes8 s02[kScoreKeys][Q], s13[kScoreKeys][Q];
  chain(0, true, s02);
  chain(2, false, s02);
  chain(1, true, s13);
  chain(3, false, s13);
  for (int qi = 0; qi < Q; ++qi) {
    hn::Vec<D4> t[kScoreKeys];
    for (int r = 0; r < kScoreKeys; ++r) t[r] = Fold8(Add8(s02[r][qi], s13[r][qi]));
    sums[qi] = PairSums(PairSums(t[0], t[1]), PairSums(t[2], t[3]));
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

#if HWY_ARCH_X86
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;

// The f16 in the low (kHigh = false) or high half of each 32-bit lane, as f32.
template <bool kHigh>
HWY_INLINE hn::Vec<DF> HalfToF32(hn::Vec<DU> v) {
  const hn::Rebind<uint16_t, DU> du16;
  const hn::Rebind<hwy::float16_t, DU> dh;
  const auto bits = kHigh ? hn::ShiftRight<16>(v) : hn::And(v, hn::Set(DU(), 0xFFFFu));
  return hn::PromoteTo(DF(), hn::BitCast(dh, hn::TruncateTo(du16, bits)));
}

// dot, one key per lane, plus the products of values [np, dim) (an even
// count) with q, added one by one in double: ggml_vec_dot_f16's leftover
// loop. Rounded back to f32.
HWY_INLINE hn::Vec<DF> AddTailInDouble(hn::Vec<DF> dot, const float* q, int64_t np, int64_t dim,
                                       const uint32_t* base, hn::Vec<DI> index) {
  if (np == dim) return dot;
  const DF df;
  const hn::Half<DF> dh;
  const hn::Rebind<double, hn::Half<DF>> dd;
  auto lo = hn::PromoteTo(dd, hn::LowerHalf(dh, dot));
  auto hi = hn::PromoteTo(dd, hn::UpperHalf(dh, dot));
  auto add = [&](hn::Vec<DF> product) HWY_ATTR {
    lo = hn::Add(lo, hn::PromoteTo(dd, hn::LowerHalf(dh, product)));
    hi = hn::Add(hi, hn::PromoteTo(dd, hn::UpperHalf(dh, product)));
  };
  for (int64_t d = np; d < dim; d += 2) {
    const auto pair = hn::GatherIndex(DU(), base + d / 2, index);
    add(hn::Mul(HalfToF32<false>(pair), hn::Set(df, q[d])));
    add(hn::Mul(HalfToF32<true>(pair), hn::Set(df, q[d + 1])));
  }
  return hn::Combine(df, hn::DemoteTo(dh, hi), hn::DemoteTo(dh, lo));
}

// Scores of G queries against a block of N keys, the keys in the lanes:
// lane r is key r's dot product in ggml's order. Each accumulator lane
// (k, l) of ggml's (d = 32m + 8k + l) is a chain over m, two of them (l, l +
// 1) fed by one 32-bit gather of an f16 pair from every key; the G queries
// share the gathers. `base` + index[r] (32-bit units) is key r's row; the
// first `rem` lanes are stored to scores + g * scores_stride.
template <int G>
HWY_INLINE void ScoresOfKeyLanes(const float* q, int64_t dim, int64_t np, const uint32_t* base,
                                 hn::Vec<DI> index, size_t rem, float scale, float* scores,
                                 int64_t scores_stride) {
  const DF df;
  const DU du;
  constexpr size_t kN = hn::MaxLanes(DF());
  const size_t N = hn::Lanes(df);
  HWY_ALIGN float a[G][8][kN];    // (a0 + a2) + (a1 + a3) of lane l, per key
  HWY_ALIGN float s02[G][2][kN];  // a0 + a2 of lanes l, l + 1 while a1 + a3 runs
  for (int64_t l = 0; l < (np > 0 ? 8 : 0); l += 2) {  // none in heads under 32
    for (int k : {0, 2, 1, 3}) {
      hn::Vec<DF> lo[G], hi[G];
      for (int g = 0; g < G; ++g) lo[g] = hi[g] = hn::Zero(df);
      for (int64_t d = 8 * k + l; d < np; d += kDotStep) {
        const auto pair = hn::GatherIndex(du, base + d / 2, index);
        const auto x0 = HalfToF32<false>(pair);
        const auto x1 = HalfToF32<true>(pair);
        for (int g = 0; g < G; ++g) {
          lo[g] = hn::MulAdd(x0, hn::Set(df, q[g * dim + d]), lo[g]);
          hi[g] = hn::MulAdd(x1, hn::Set(df, q[g * dim + d + 1]), hi[g]);
        }
      }
      for (int g = 0; g < G; ++g) {
        float* p0 = k == 0 || k == 2 ? s02[g][0] : a[g][l];
        float* p1 = k == 0 || k == 2 ? s02[g][1] : a[g][l + 1];
        if (k == 0 || k == 1) {
          hn::Store(lo[g], df, p0);
          hn::Store(hi[g], df, p1);
        } else if (k == 2) {
          hn::Store(hn::Add(hn::Load(df, p0), lo[g]), df, p0);
          hn::Store(hn::Add(hn::Load(df, p1), hi[g]), df, p1);
        } else {  // k == 3: (a0 + a2) + (a1 + a3)
          hn::Store(hn::Add(hn::Load(df, s02[g][0]), hn::Add(hn::Load(df, p0), lo[g])), df, p0);
          hn::Store(hn::Add(hn::Load(df, s02[g][1]), hn::Add(hn::Load(df, p1), hi[g])), df, p1);
        }
      }
    }
  }
  const auto vscale = hn::Set(df, scale);
  HWY_ALIGN float dots[kN];
  for (int g = 0; g < G; ++g) {
    auto dot = hn::Zero(df);
    if (np > 0) {
      hn::Vec<DF> t[4];
      for (int l = 0; l < 4; ++l) t[l] = hn::Add(hn::Load(df, a[g][l]), hn::Load(df, a[g][l + 4]));
      dot = hn::Add(hn::Add(t[0], t[1]), hn::Add(t[2], t[3]));
    }
    const auto scaled = hn::Mul(AddTailInDouble(dot, q + g * dim, np, dim, base, index), vscale);
    float* out = scores + g * scores_stride;
    if (rem == N) {
      hn::StoreU(scaled, df, out);
      continue;
    }
    hn::Store(scaled, df, dots);
    std::copy(dots, dots + rem, out);
  }
}

// Whether the key-lane kernel can gather rows [j0, j0 + rem): 4-byte
// aligned and within 2^31 32-bit units of the first; sets their indices
// (lanes past rem repeat the last key).
HWY_INLINE bool KeyLaneIndex(const uint16_t* const* rows, size_t rem, hn::Vec<DI>* index) {
  constexpr size_t kN = hn::MaxLanes(DF());
  HWY_ALIGN int32_t idx[kN];
  const auto first = reinterpret_cast<intptr_t>(rows[0]);
  for (size_t r = 0; r < hn::Lanes(DF()); ++r) {
    const auto at = reinterpret_cast<intptr_t>(rows[std::min(r, rem - 1)]);
    const intptr_t diff = at - first;
    if (at % 4 != 0 || diff / 4 > INT32_MAX || diff / 4 < INT32_MIN) return false;
    idx[r] = static_cast<int32_t>(diff / 4);
  }
  *index = hn::Load(DI(), idx);
  return true;
}

// Queries per ScoresOfKeyLanes, which share each gather: their 2 chains
// each stay in registers.
#if HWY_TARGET == HWY_AVX2
constexpr int kLaneQueries = 4;
#else
constexpr int kLaneQueries = 8;
#endif
#endif  // HWY_ARCH_X86

void ScoresImpl(const float* q, int64_t n_q, const uint16_t* const* keys, int64_t n_keys,
                int64_t dim, float scale, float* scores, int64_t scores_stride) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const D4 d4;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t np = dim - dim % kDotStep;
  // kScoreKeys keys widened to f32, once for all the queries.
  thread_local std::vector<float> widened;
  if (widened.size() < static_cast<size_t>(kScoreKeys * dim)) widened.resize(kScoreKeys * dim);
  const float* kf = widened.data();
  // The rest of a key's dot in double (dim % 32 values).
  auto finish = [&](float dot, int64_t r, const float* qi) {
    if (np == dim) return dot;
    double sum = dot;
    for (int64_t d = np; d < dim; ++d) {
      const float product = kf[r * dim + d] * qi[d];
      sum += static_cast<double>(product);
    }
    return static_cast<float>(sum);
  };
  HWY_ALIGN float lanes[4];
#if HWY_ARCH_X86
  // Keys in lanes, where they can be gathered (even dim: pairs of f16).
  if (dim % 2 == 0) {
    const size_t NK = hn::Lanes(df);
    int64_t j0 = 0;
    for (; j0 < n_keys; j0 += static_cast<int64_t>(NK)) {
      const size_t rem = static_cast<size_t>(std::min<int64_t>(NK, n_keys - j0));
      hn::Vec<DI> index;
      if (!KeyLaneIndex(keys + j0, rem, &index)) break;
      const auto* base = reinterpret_cast<const uint32_t*>(keys[j0]);
      int64_t i = 0;
      for (; i + kLaneQueries <= n_q; i += kLaneQueries) {
        ScoresOfKeyLanes<kLaneQueries>(q + i * dim, dim, np, base, index, rem, scale,
                                       scores + i * scores_stride + j0, scores_stride);
      }
      if (i < n_q) {
        WithCount<kLaneQueries>(static_cast<int>(n_q - i), [&]<int G>() HWY_ATTR {
          ScoresOfKeyLanes<G>(q + i * dim, dim, np, base, index, rem, scale,
                              scores + i * scores_stride + j0, scores_stride);
        });
      }
    }
    if (j0 >= n_keys) return;
    // The rest by the widened rows below (not reached for a KV cache).
    keys += j0;
    scores += j0;
    n_keys -= j0;
  }
#endif
  for (int64_t j0 = 0; j0 < n_keys; j0 += kScoreKeys) {
    const int64_t nb = std::min(kScoreKeys, n_keys - j0);
    for (int64_t r = 0; r < kScoreKeys; ++r) {
      // Past the last key: any row (its sums are not stored).
      const uint16_t* row = keys[j0 + std::min(r, nb - 1)];
      const auto* k = reinterpret_cast<const hwy::float16_t*>(row);
      float* w = widened.data() + r * dim;
      int64_t d = 0;
      for (; d + N <= dim; d += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, k + d)), df, w + d);
      for (; d < dim; ++d) w[d] = Fp16ToFp32(row[d]);
    }
    // The scores of queries [i, i + Q) against these keys.
    auto dots = [&]<int Q>(int64_t i) HWY_ATTR {
      const float* qs[Q];
      for (int qi = 0; qi < Q; ++qi) qs[qi] = q + (i + qi) * dim;
      hn::Vec<D4> sums[Q];
      DotsOfFourKeys<Q>(kf, dim, qs, np, sums);
      for (int qi = 0; qi < Q; ++qi) {
        hn::Store(sums[qi], d4, lanes);
        float* out = scores + (i + qi) * scores_stride + j0;
        for (int64_t r = 0; r < nb; ++r) out[r] = finish(lanes[r], r, qs[qi]) * scale;
      }
    };
    int64_t i = 0;
    for (; i + kScoreQueries <= n_q; i += kScoreQueries) dots.template operator()<kScoreQueries>(i);
    for (; i < n_q; ++i) dots.template operator()<1>(i);
  }
}

// The weighted sum takes the head dimension in slabs of kSlab vectors and
// up to kSumQueries queries at a time, which share each load of the values:
// their kSlab * kSumQueries chains stay in registers (AVX2 has 16 of them,
// the others 32).
#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
constexpr int kSlab = 4;
constexpr int kSumQueries = 2;
#elif HWY_ARCH_X86
constexpr int kSlab = 4;
constexpr int kSumQueries = 4;
#else
constexpr int kSlab = 8;
constexpr int kSumQueries = 2;
#endif

// Keys per window of the weighted sum: the rows of a window stay in L1
// while its 32 chains run over them.
constexpr int64_t kSumWindow = 256;

// Lanes [d0, d0 + C * N) of G queries' weighted sums (p + g * p_stride into
// out + g * out_stride): lane by lane, ggml's dot product over the keys,
// zero weights padding them to a multiple of 32. Lane l (of 8) of
// accumulator k (of 4) is a chain over the keys j = l + 8k + 32m in order of
// m; each such chain runs for the whole slab and the G queries at once, a
// window of keys at a time (it is stored and picked up again in the next
// window: the same bits), so every row of values is read once. The chains
// of a lane are combined as (a0 + a2) + (a1 + a3), the lanes as t[l] = a[l]
// + a[l + 4], then (t0 + t1) + (t2 + t3).
template <class D, int G, int C>
HWY_INLINE void WeightedSumSlab(const float* p, int64_t p_stride, const uint16_t* const* values,
                                int64_t n_keys, int64_t d0, float* out, int64_t out_stride) {
  const D df;
  const hn::Rebind<hwy::float16_t, D> dh;
  constexpr size_t kN = hn::MaxLanes(D());
  const size_t N = hn::Lanes(df);
  // The chains of accumulator k, lane l, between windows of keys.
  HWY_ALIGN float chains[8][4][G][C * kN];
  for (int64_t w0 = 0; w0 < n_keys; w0 += kSumWindow) {
    const int64_t w1 = std::min(n_keys, w0 + kSumWindow);
    for (int64_t l = 0; l < 8; ++l) {
      for (int64_t k = 0; k < 4; ++k) {
        hn::Vec<D> c[G][C];
        for (int g = 0; g < G; ++g) {
          for (int v = 0; v < C; ++v) {
            c[g][v] = w0 == 0 ? hn::Zero(df) : hn::Load(df, chains[l][k][g] + v * N);
          }
        }
        for (int64_t j = w0 + l + 8 * k; j < w1; j += kDotStep) {
          const auto* row = reinterpret_cast<const hwy::float16_t*>(values[j]) + d0;
          hn::Vec<D> pj[G];
          for (int g = 0; g < G; ++g) pj[g] = hn::Set(df, p[g * p_stride + j]);
          for (int v = 0; v < C; ++v) {
            const auto x = hn::PromoteTo(df, hn::LoadU(dh, row + v * N));
            for (int g = 0; g < G; ++g) c[g][v] = hn::MulAdd(x, pj[g], c[g][v]);
          }
        }
        for (int g = 0; g < G; ++g) {
          for (int v = 0; v < C; ++v) hn::Store(c[g][v], df, chains[l][k][g] + v * N);
        }
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    for (int v = 0; v < C; ++v) {
      hn::Vec<D> a[8];
      for (int l = 0; l < 8; ++l) {
        auto chain = [&](int k) HWY_ATTR { return hn::Load(df, chains[l][k][g] + v * N); };
        a[l] = hn::Add(hn::Add(chain(0), chain(2)), hn::Add(chain(1), chain(3)));
      }
      hn::Vec<D> t[4];
      for (int l = 0; l < 4; ++l) t[l] = hn::Add(a[l], a[l + 4]);
      hn::StoreU(hn::Add(hn::Add(t[0], t[1]), hn::Add(t[2], t[3])), df,
                 out + g * out_stride + d0 + v * N);
    }
  }
}

// Lanes [d0, d0 + C * Lanes(D)) of every query's weighted sums.
template <class D, int C>
HWY_INLINE void WeightedSumColumns(const float* p, int64_t n_q, int64_t p_stride,
                                   const uint16_t* const* values, int64_t n_keys, int64_t d0,
                                   float* out, int64_t out_stride) {
  for (int64_t i = 0; i < n_q; i += kSumQueries) {
    const int n = static_cast<int>(std::min<int64_t>(kSumQueries, n_q - i));
    WithCount<kSumQueries>(n, [&]<int G>() HWY_ATTR {
      WeightedSumSlab<D, G, C>(p + i * p_stride, p_stride, values, n_keys, d0, out + i * out_stride,
                               out_stride);
    });
  }
}

void WeightedSumImpl(const float* p, int64_t n_q, int64_t p_stride, const uint16_t* const* values,
                     int64_t n_keys, int64_t dim, float* out, int64_t out_stride) {
  int64_t d0 = 0;
  auto columns = [&]<class D, int C>() HWY_ATTR {
    const int64_t width = C * static_cast<int64_t>(hn::Lanes(D()));
    for (; d0 + width <= dim; d0 += width) {
      WeightedSumColumns<D, C>(p, n_q, p_stride, values, n_keys, d0, out, out_stride);
    }
  };
  columns.template operator()<DF, kSlab>();
  columns.template operator()<DF, 1>();
  // What is narrower than a vector (small heads, as stories260K's 8 on
  // AVX-512): 8 lanes, then 4, the same chains in narrower vectors.
  if constexpr (hn::MaxLanes(DF()) > 8) columns.template operator()<hn::CappedTag<float, 8>, 1>();
  if constexpr (hn::MaxLanes(DF()) > 4) columns.template operator()<D4, 1>();
  if (d0 == dim) return;
  // The last dim % 4 lanes: the reference, per lane.
  thread_local std::vector<const uint16_t*> shifted;
  shifted.resize(n_keys);
  for (int64_t j = 0; j < n_keys; ++j) shifted[j] = values[j] + d0;
  AttentionWeightedSumF16Reference(p, n_q, p_stride, shifted.data(), n_keys, dim - d0, out + d0,
                                   out_stride);
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
