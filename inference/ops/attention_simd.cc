// SIMD attention kernels (attention.h), compiled per Highway target and
// dispatched at run time. Bit-identical to the scalar references:
//   - Scores: lanes hold different keys, and each lane sums its products in
//     the reference order (d = 0, 1, ...), with separate Mul and Add. Keys
//     are fetched two f16 at a time by 32-bit gathers (needs an even stride
//     and an even dim, 4-byte aligned keys; otherwise the reference runs);
//     the last partial block re-reads its last key in the unused lanes.
//   - Weighted sum: lanes hold different d; keys are taken in order j = 0,
//     1, ... with separate Mul and Add.
// Targets without F16 conversion instructions (EMU128, SCALAR) run the
// references.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "inference/ops/attention_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target.h must come first.
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

void ScoresImpl(const float* q, const uint16_t* keys, int64_t stride, int64_t n_keys, int64_t dim,
                float scale, float* scores) {
  const bool gather_ok = stride % 2 == 0 && dim % 2 == 0 &&
                         reinterpret_cast<uintptr_t>(keys) % 4 == 0 &&
                         n_keys * stride < (int64_t{1} << 30);
  int64_t j0 = 0;
  if (gather_ok) {
    const DF df;
    const DU du;
    const DI di;
    const auto index = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(stride / 2)));
    const auto vscale = hn::Set(df, scale);
    for (; j0 + static_cast<int64_t>(kN) <= n_keys; j0 += kN) {
      const auto* base = reinterpret_cast<const uint32_t*>(keys + j0 * stride);
      auto acc = hn::Zero(df);
      for (int64_t d = 0; d < dim; d += 2) {
        const auto pair = hn::GatherIndex(du, base + d / 2, index);
        acc = hn::Add(acc, hn::Mul(hn::Set(df, q[d]), HalfToF32<false>(pair)));
        acc = hn::Add(acc, hn::Mul(hn::Set(df, q[d + 1]), HalfToF32<true>(pair)));
      }
      hn::StoreU(hn::Mul(acc, vscale), df, scores + j0);
    }
    if (j0 < n_keys) {
      // The last, partial block: lanes past the end re-read the last key and
      // are not stored.
      const size_t rem = static_cast<size_t>(n_keys - j0);
      const auto lane = hn::Min(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(rem - 1)));
      const auto tail_index = hn::Mul(lane, hn::Set(di, static_cast<int32_t>(stride / 2)));
      const auto* base = reinterpret_cast<const uint32_t*>(keys + j0 * stride);
      auto acc = hn::Zero(df);
      for (int64_t d = 0; d < dim; d += 2) {
        const auto pair = hn::GatherIndex(du, base + d / 2, tail_index);
        acc = hn::Add(acc, hn::Mul(hn::Set(df, q[d]), HalfToF32<false>(pair)));
        acc = hn::Add(acc, hn::Mul(hn::Set(df, q[d + 1]), HalfToF32<true>(pair)));
      }
      HWY_ALIGN float lanes[hn::MaxLanes(DF())];
      hn::Store(hn::Mul(acc, vscale), df, lanes);
      for (size_t l = 0; l < rem; ++l) scores[j0 + l] = lanes[l];
      return;
    }
  }
  AttentionScoresF16Reference(q, keys + j0 * stride, stride, n_keys - j0, dim, scale, scores + j0);
}

void WeightedSumImpl(const float* p, const uint16_t* values, int64_t stride, int64_t n_keys,
                     int64_t dim, float* out) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  auto load = [&](int64_t j, int64_t d) {
    return hn::PromoteTo(
        df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(values + j * stride + d)));
  };
  constexpr int64_t N = static_cast<int64_t>(kN);
  int64_t d0 = 0;
  for (; d0 + 4 * N <= dim; d0 += 4 * N) {
    auto a0 = hn::LoadU(df, out + d0), a1 = hn::LoadU(df, out + d0 + N);
    auto a2 = hn::LoadU(df, out + d0 + 2 * N), a3 = hn::LoadU(df, out + d0 + 3 * N);
    for (int64_t j = 0; j < n_keys; ++j) {
      const auto pj = hn::Set(df, p[j]);
      a0 = hn::Add(a0, hn::Mul(pj, load(j, d0)));
      a1 = hn::Add(a1, hn::Mul(pj, load(j, d0 + N)));
      a2 = hn::Add(a2, hn::Mul(pj, load(j, d0 + 2 * N)));
      a3 = hn::Add(a3, hn::Mul(pj, load(j, d0 + 3 * N)));
    }
    hn::StoreU(a0, df, out + d0);
    hn::StoreU(a1, df, out + d0 + N);
    hn::StoreU(a2, df, out + d0 + 2 * N);
    hn::StoreU(a3, df, out + d0 + 3 * N);
  }
  for (; d0 + N <= dim; d0 += N) {
    auto a = hn::LoadU(df, out + d0);
    for (int64_t j = 0; j < n_keys; ++j) a = hn::Add(a, hn::Mul(hn::Set(df, p[j]), load(j, d0)));
    hn::StoreU(a, df, out + d0);
  }
  for (int64_t d = d0; d < dim; ++d) {
    float a = out[d];
    for (int64_t j = 0; j < n_keys; ++j) a += p[j] * Fp16ToFp32(values[j * stride + d]);
    out[d] = a;
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

void ScoresImpl(const float* q, const uint16_t* keys, int64_t stride, int64_t n_keys, int64_t dim,
                float scale, float* scores) {
  AttentionScoresF16Reference(q, keys, stride, n_keys, dim, scale, scores);
}
void WeightedSumImpl(const float* p, const uint16_t* values, int64_t stride, int64_t n_keys,
                     int64_t dim, float* out) {
  AttentionWeightedSumF16Reference(p, values, stride, n_keys, dim, out);
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
  HWY_DYNAMIC_DISPATCH(ScoresImpl)(q, keys, stride, n_keys, dim, scale, scores);
}

void AttentionWeightedSumF16(const float* p, const uint16_t* values, int64_t stride, int64_t n_keys,
                             int64_t dim, float* out) {
  HWY_DYNAMIC_DISPATCH(WeightedSumImpl)(p, values, stride, n_keys, dim, out);
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
