// SIMD row dequantization to f32 for the prefill GEMM path (matmul.cc),
// compiled per Highway target and dispatched at run time. Results are
// bit-identical to DequantizeRow: every value is one exact widening or one
// rounded product q * d, computed the same way in both. K-quants use
// DequantizeRow itself.
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
      const auto q = hn::BitCast(di32, hn::PromoteTo(hn::RebindToUnsigned<decltype(di32)>(),
                                                     hn::LoadU(du8, b[i].qs + j)));
      const auto lo = hn::Sub(hn::And(q, k15), k8);
      const auto hi = hn::Sub(hn::ShiftRight<4>(q), k8);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, lo), d), df, dst + 32 * i + j);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hi), d), df, dst + 32 * i + 16 + j);
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
