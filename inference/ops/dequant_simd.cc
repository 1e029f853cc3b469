// SIMD row dequantization to f32 for the prefill GEMM path (matmul.cc),
// compiled per Highway target and dispatched at run time. Results are
// bit-identical to DequantizeRow: every value is computed with the same
// float operations in the same order (an exact widening, a rounded product
// q * d, or d1 * q - m1 for Q4_K).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "inference/ops/dequant_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target.h must come first.
#include "hwy/highway.h"
#include "inference/ops/fp16.h"
#include "inference/ops/matmul_internal.h"
#include "inference/ops/quant.h"

HWY_BEFORE_NAMESPACE();
namespace ringlm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::CappedTag<float, 16>;
constexpr size_t kN = hn::MaxLanes(DF());

void DequantF16(const uint16_t* src, float* dst, int64_t n) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  int64_t i = 0;
  for (; i + static_cast<int64_t>(kN) <= n; i += kN) {
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(src + i))),
               df, dst + i);
  }
  for (; i < n; ++i) dst[i] = Fp16ToFp32(src[i]);
}

void DequantBf16(const uint16_t* src, float* dst, int64_t n) {
  const DF df;
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  int64_t i = 0;
  for (; i + static_cast<int64_t>(kN) <= n; i += kN) {
    const auto wide = hn::PromoteTo(du32, hn::LoadU(du16, src + i));
    hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(wide)), df, dst + i);
  }
  for (; i < n; ++i) dst[i] = Bf16ToFp32(src[i]);
}

void DequantQ8_0(const BlockQ8_0* b, float* dst, int64_t n_blocks) {
  const DF df;
  const hn::Rebind<int32_t, DF> di32;
  const hn::Rebind<int8_t, DF> di8;
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto d = hn::Set(df, Fp16ToFp32(b[i].d));
    for (size_t j = 0; j < 32; j += kN) {
      const auto q = hn::PromoteTo(di32, hn::LoadU(di8, b[i].qs + j));
      hn::StoreU(hn::Mul(hn::ConvertTo(df, q), d), df, dst + 32 * i + j);
    }
  }
}

void DequantQ4_0(const BlockQ4_0* b, float* dst, int64_t n_blocks) {
  const DF df;
  const hn::Rebind<int32_t, DF> di32;
  const hn::Rebind<uint8_t, DF> du8;
  const auto k15 = hn::Set(di32, 15);
  const auto k8 = hn::Set(di32, 8);
  for (int64_t i = 0; i < n_blocks; ++i) {
    const auto d = hn::Set(df, Fp16ToFp32(b[i].d));
    for (size_t j = 0; j < 16; j += kN) {
      const auto q = hn::BitCast(
          di32, hn::PromoteTo(hn::RebindToUnsigned<decltype(di32)>(), hn::LoadU(du8, b[i].qs + j)));
      const auto lo = hn::Sub(hn::And(q, k15), k8);
      const auto hi = hn::Sub(hn::ShiftRight<4>(q), k8);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, lo), d), df, dst + 32 * i + j);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hi), d), df, dst + 32 * i + 16 + j);
    }
  }
}

// Loads kN bytes as int32 lanes.
HWY_INLINE hn::Vec<hn::Rebind<int32_t, DF>> LoadBytes(const uint8_t* p) {
  const hn::Rebind<int32_t, DF> di32;
  const hn::Rebind<uint8_t, DF> du8;
  return hn::BitCast(di32,
                     hn::PromoteTo(hn::RebindToUnsigned<decltype(di32)>(), hn::LoadU(du8, p)));
}

// DequantizeRowQ4_K: value = d1 * q - m1 (a product, then a difference).
void DequantQ4_K(const BlockQ4_K* x, float* dst, int64_t n_blocks) {
  const DF df;
  const hn::Rebind<int32_t, DF> di32;
  const auto k15 = hn::Set(di32, 15);
  for (int64_t i = 0; i < n_blocks; ++i) {
    const uint8_t* q = x[i].qs;
    const float d = Fp16ToFp32(x[i].d);
    const float min = Fp16ToFp32(x[i].dmin);
    for (int j = 0, is = 0; j < kQK_K; j += 64, q += 32, is += 2) {
      uint8_t sc, m;
      Q4_KScaleMin(is, x[i].scales, &sc, &m);
      const auto d1 = hn::Set(df, d * sc);
      const auto m1 = hn::Set(df, min * m);
      Q4_KScaleMin(is + 1, x[i].scales, &sc, &m);
      const auto d2 = hn::Set(df, d * sc);
      const auto m2 = hn::Set(df, min * m);
      for (size_t l = 0; l < 32; l += kN) {
        const auto b = LoadBytes(q + l);
        const auto lo = hn::ConvertTo(df, hn::And(b, k15));
        const auto hi = hn::ConvertTo(df, hn::ShiftRight<4>(b));
        hn::StoreU(hn::Sub(hn::Mul(d1, lo), m1), df, dst + j + l);
        hn::StoreU(hn::Sub(hn::Mul(d2, hi), m2), df, dst + j + 32 + l);
      }
    }
    dst += kQK_K;
  }
}

// DequantizeRowQ6_K: value = (d * scale) * (q - 32).
void DequantQ6_K(const BlockQ6_K* x, float* dst, int64_t n_blocks) {
  const DF df;
  const hn::Rebind<int32_t, DF> di32;
  const auto k15 = hn::Set(di32, 15);
  const auto k3 = hn::Set(di32, 3);
  const auto k32 = hn::Set(di32, 32);
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int c = 0; c < kQK_K; c += 128, dst += 128, ql += 64, qh += 32, sc += 8) {
      for (size_t l = 0; l < 32; l += kN) {
        const int is = static_cast<int>(l / 16);  // kN <= 16: one scale per chunk
        const auto a = LoadBytes(ql + l);
        const auto b = LoadBytes(ql + l + 32);
        const auto h = LoadBytes(qh + l);
        const auto q1 = hn::Sub(hn::Or(hn::And(a, k15), hn::ShiftLeft<4>(hn::And(h, k3))), k32);
        const auto q2 = hn::Sub(
            hn::Or(hn::And(b, k15), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(h), k3))), k32);
        const auto q3 = hn::Sub(
            hn::Or(hn::ShiftRight<4>(a), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(h), k3))), k32);
        const auto q4 = hn::Sub(
            hn::Or(hn::ShiftRight<4>(b), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<6>(h), k3))), k32);
        hn::StoreU(hn::Mul(hn::Set(df, d * sc[is]), hn::ConvertTo(df, q1)), df, dst + l);
        hn::StoreU(hn::Mul(hn::Set(df, d * sc[is + 2]), hn::ConvertTo(df, q2)), df, dst + l + 32);
        hn::StoreU(hn::Mul(hn::Set(df, d * sc[is + 4]), hn::ConvertTo(df, q3)), df, dst + l + 64);
        hn::StoreU(hn::Mul(hn::Set(df, d * sc[is + 6]), hn::ConvertTo(df, q4)), df, dst + l + 96);
      }
    }
  }
}

void DequantizeRowFastImpl(TensorType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case TensorType::kF16:
      DequantF16(static_cast<const uint16_t*>(src), dst, n);
      return;
    case TensorType::kBF16:
      DequantBf16(static_cast<const uint16_t*>(src), dst, n);
      return;
    case TensorType::kQ8_0:
      DequantQ8_0(static_cast<const BlockQ8_0*>(src), dst, n / kQ8_0BlockSize);
      return;
    case TensorType::kQ4_0:
      DequantQ4_0(static_cast<const BlockQ4_0*>(src), dst, n / kQ4_0BlockSize);
      return;
    case TensorType::kQ4_K:
      DequantQ4_K(static_cast<const BlockQ4_K*>(src), dst, n / kQK_K);
      return;
    case TensorType::kQ6_K:
      DequantQ6_K(static_cast<const BlockQ6_K*>(src), dst, n / kQK_K);
      return;
    default:
      DequantizeRow(type, src, dst, n);
      return;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ringlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ringlm {

HWY_EXPORT(DequantizeRowFastImpl);

void DequantizeRowFast(TensorType type, const void* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(DequantizeRowFastImpl)(type, src, dst, n);
}

}  // namespace ringlm
#endif  // HWY_ONCE
