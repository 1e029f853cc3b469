// SIMD ggml_v_expf for SwiGlu and SoftmaxInPlace (activations_internal.h),
// compiled per Highway target and dispatched at run time. Each lane runs the
// same fused multiply-adds as ExpGgmlVector (its AVX2 form), so results are
// bit-identical, as long as -126 <= n <= 126 (2^n a normal float). Vectors
// with a lane outside that range (exp below ~-87.3 or above ~87.3, or NaN)
// run ExpGgmlVector per lane. Targets without FMA (EMU128, SCALAR) run the
// scalar code.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "inference/ops/activations_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target.h must come first.
#include "hwy/highway.h"
#include "inference/ops/activations.h"
#include "inference/ops/activations_internal.h"
#include "inference/ops/matmul_internal.h"

HWY_BEFORE_NAMESPACE();
namespace ringlm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#undef RINGLM_ACT_SIMD
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) || (HWY_ARCH_ARM_A64 && HWY_TARGET == HWY_NEON)
#define RINGLM_ACT_SIMD 1
#else
#define RINGLM_ACT_SIMD 0
#endif

#if RINGLM_ACT_SIMD

constexpr int64_t kG = kActivationGroup;
using DF = hn::CappedTag<float, kG>;
constexpr size_t kN = hn::MaxLanes(DF());
static_assert(kG % kN == 0, "groups of 8 lanes");

// ExpGgmlVector per lane; false (and *out untouched) if some lane needs the
// scalar path.
HWY_INLINE bool ExpV(hn::Vec<DF> x, hn::Vec<DF>* out) {
  const DF d;
  const hn::RebindToUnsigned<DF> du;
  const auto r = hn::Set(d, 0x1.8p23f);
  const auto z = hn::MulAdd(x, hn::Set(d, 0x1.715476p+0f), r);
  const auto n = hn::Sub(z, r);
  const auto b =
      hn::NegMulAdd(n, hn::Set(d, 0x1.7f7d1cp-20f), hn::NegMulAdd(n, hn::Set(d, 0x1.62e4p-1f), x));
  const auto u = hn::Mul(b, b);
  const auto j = hn::MulAdd(
      hn::MulAdd(hn::MulAdd(hn::Set(d, 0x1.0e4020p-7f), b, hn::Set(d, 0x1.573e2ep-5f)), u,
                 hn::MulAdd(hn::Set(d, 0x1.555e66p-3f), b, hn::Set(d, 0x1.fffdb6p-2f))),
      u, hn::Mul(hn::Set(d, 0x1.ffffecp-1f), b));
  // NaN compares false, so it fails this test too.
  if (!hn::AllTrue(d, hn::Le(hn::Abs(n), hn::Set(d, 126.0f)))) return false;
  // 2^n from z's low bits.
  const auto k = hn::BitCast(
      d, hn::Add(hn::ShiftLeft<23>(hn::BitCast(du, z)), hn::Set(du, uint32_t{0x3f800000})));
  *out = hn::MulAdd(k, j, k);
  return true;
}

void SwiGluImpl(const float* gate, const float* up, float* out, int64_t n_groups) {
  const DF d;
  const auto one = hn::Set(d, 1.0f);
  const auto zero = hn::Zero(d);
  for (int64_t i = 0; i < kG * n_groups; i += kN) {
    const auto x = hn::LoadU(d, gate + i);
    hn::Vec<DF> e;
    if (ExpV(hn::Sub(zero, x), &e)) {
      const auto s = hn::Div(x, hn::Add(one, e));
      hn::StoreU(hn::Mul(s, hn::LoadU(d, up + i)), d, out + i);
    } else {
      for (size_t l = 0; l < kN; ++l) {
        const float g = gate[i + l];
        const float s = g / (1.0f + ExpGgmlVector(0.0f - g));
        out[i + l] = s * up[i + l];
      }
    }
  }
}

double SoftmaxExpImpl(float* x, float max, int64_t n_groups) {
  const DF d;
  const auto vmax = hn::Set(d, max);
  double sum = 0.0;
  HWY_ALIGN float group[kG];
  for (int64_t g = 0; g < n_groups; ++g) {
    float* xg = x + kG * g;
    for (size_t l = 0; l < kG; l += kN) {
      hn::Vec<DF> e;
      if (ExpV(hn::Sub(hn::LoadU(d, xg + l), vmax), &e)) {
        hn::StoreU(e, d, xg + l);
      } else {
        for (size_t k = l; k < l + kN; ++k) xg[k] = ExpGgmlVector(xg[k] - max);
      }
    }
    for (int l = 0; l < kG; ++l) group[l] = xg[l];
    sum += static_cast<double>(ReduceLanes<kG>(group));
  }
  return sum;
}

#else  // !RINGLM_ACT_SIMD

void SwiGluImpl(const float* gate, const float* up, float* out, int64_t n_groups) {
  for (int64_t i = 0; i < kActivationGroup * n_groups; ++i) {
    const float g = gate[i];
    const float s = g / (1.0f + ExpGgmlVector(0.0f - g));
    out[i] = s * up[i];
  }
}

double SoftmaxExpImpl(float* x, float max, int64_t n_groups) {
  constexpr int64_t kG = kActivationGroup;
  double sum = 0.0;
  float group[kG];
  for (int64_t g = 0; g < n_groups; ++g) {
    for (int l = 0; l < kG; ++l) {
      group[l] = ExpGgmlVector(x[kG * g + l] - max);
      x[kG * g + l] = group[l];
    }
    sum += static_cast<double>(ReduceLanes<kG>(group));
  }
  return sum;
}

#endif  // RINGLM_ACT_SIMD

}  // namespace HWY_NAMESPACE
}  // namespace ringlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ringlm {

HWY_EXPORT(SwiGluImpl);
HWY_EXPORT(SoftmaxExpImpl);

void SwiGluGroups8(const float* gate, const float* up, float* out, int64_t n_groups) {
  HWY_DYNAMIC_DISPATCH(SwiGluImpl)(gate, up, out, n_groups);
}

double SoftmaxExpGroups8(float* x, float max, int64_t n_groups) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxExpImpl)(x, max, n_groups);
}

}  // namespace ringlm
#endif  // HWY_ONCE
