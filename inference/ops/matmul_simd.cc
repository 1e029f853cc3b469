// SIMD dot-product kernels for MatMul, compiled once per Highway target and
// chosen at run time (HWY_DYNAMIC_DISPATCH), so one binary uses AVX2 or
// AVX-512 where present and the same code builds for NEON.
//
// Every kernel reproduces the float operation order of the scalar reference
// (matmul_reference.cc) bit for bit, independent of the vector width:
//   - F32/F16 vec-dot keeps all 64 lane accumulators of ggml's 4 x 16-lane
//     AVX-512 loop, as 64/N vectors of N lanes; BF16 keeps its 2 x 16 lanes;
//     the tiled order keeps 16 lanes. Lanes are reduced in scalar code.
//   - Quantized dots compute exact integer lane sums (lane = (position % 32)
//     / 4, as ggml's 256-bit code) and FMA them into 8 float lanes, held in
//     8/N vectors of N <= 8 lanes.
// Targets without a fused multiply-add (SSE4, EMU128, SCALAR, 32-bit ARM)
// fall back to DotOneScalar, because a vector mul+add there rounds twice.
// Hot: DotRows is the inner loop of every MatMul.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "inference/ops/matmul_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target.h must come first.
#include <cmath>
#include <cstring>

#include "hwy/highway.h"
#include "inference/ops/fp16.h"
#include "inference/ops/matmul_internal.h"

HWY_BEFORE_NAMESPACE();
namespace ringlm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#undef RINGLM_SIMD_HAS_FMA
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) || (HWY_ARCH_ARM_A64 && HWY_TARGET == HWY_NEON)
#define RINGLM_SIMD_HAS_FMA 1
#else
#define RINGLM_SIMD_HAS_FMA 0
#endif

#if RINGLM_SIMD_HAS_FMA

using DF = hn::ScalableTag<float>;
constexpr size_t kN = hn::MaxLanes(DF());  // 4, 8 or 16
static_assert(64 % kN == 0 && kN <= 16, "lane layout assumes N in {4, 8, 16}");

// Loads kN weights starting at element k, widened to f32 (exact).
struct LoadF32 {
  const float* p;
  HWY_INLINE hn::Vec<DF> operator()(int64_t k) const { return hn::LoadU(DF(), p + k); }
};
struct LoadF16 {
  const uint16_t* p;
  HWY_INLINE hn::Vec<DF> operator()(int64_t k) const {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(DF(), hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p + k)));
  }
};
struct LoadBf16 {
  const uint16_t* p;
  HWY_INLINE hn::Vec<DF> operator()(int64_t k) const {
    const hn::RebindToUnsigned<DF> du32;
    const hn::Rebind<uint16_t, DF> du16;
    const auto wide = hn::PromoteTo(du32, hn::LoadU(du16, p + k));
    return hn::BitCast(DF(), hn::ShiftLeft<16>(wide));
  }
};

// Scalar tail element k as f32.
HWY_INLINE float TailWeight(const LoadF32& l, int64_t k) { return l.p[k]; }
HWY_INLINE float TailWeight(const LoadF16& l, int64_t k) { return Fp16ToFp32(l.p[k]); }
HWY_INLINE float TailWeight(const LoadBf16& l, int64_t k) { return Bf16ToFp32(l.p[k]); }

// ggml_vec_dot_{f32,f16}, AVX-512 order (see matmul_reference.cc).
template <typename Load>
float DotVecDot(Load w, const float* x, int64_t n) {
  const DF d;
  constexpr size_t kV = 64 / kN;
  hn::Vec<DF> acc[kV];
  for (size_t j = 0; j < kV; ++j) acc[j] = hn::Zero(d);
  const int64_t full = n & ~int64_t{63};
  for (int64_t i = 0; i < full; i += 64) {
    for (size_t j = 0; j < kV; ++j) {
      const int64_t k = i + static_cast<int64_t>(j * kN);
      acc[j] = hn::MulAdd(w(k), hn::LoadU(d, x + k), acc[j]);
    }
  }
  HWY_ALIGN float lanes[64];
  for (size_t j = 0; j < kV; ++j) hn::Store(acc[j], d, lanes + j * kN);
  // lanes[16 * jj + l] is ggml's accumulator jj, lane l.
  for (int l = 0; l < 16; ++l) {
    lanes[l] = lanes[l] + lanes[32 + l];
    lanes[16 + l] = lanes[16 + l] + lanes[48 + l];
  }
  for (int l = 0; l < 16; ++l) lanes[l] = lanes[l] + lanes[16 + l];
  double sum = ReduceLanes<16>(lanes);
  for (int64_t k = full; k < n; ++k) {
    const float product = TailWeight(w, k) * x[k];
    sum += static_cast<double>(product);
  }
  return static_cast<float>(sum);
}

// ggml_vec_dot_bf16, AVX-512F order: 2 x 16 lanes over steps of 32.
float DotVecDotBf16(LoadBf16 w, const float* x, int64_t n) {
  const DF d;
  constexpr size_t kV = 32 / kN;
  hn::Vec<DF> acc[kV];
  for (size_t j = 0; j < kV; ++j) acc[j] = hn::Zero(d);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (size_t j = 0; j < kV; ++j) {
      const int64_t k = i + static_cast<int64_t>(j * kN);
      acc[j] = hn::MulAdd(w(k), hn::LoadU(d, x + k), acc[j]);
    }
  }
  HWY_ALIGN float lanes[32];
  for (size_t j = 0; j < kV; ++j) hn::Store(acc[j], d, lanes + j * kN);
  double sum = 0.0;
  sum += static_cast<double>(ReduceLanes<16>(lanes));
  sum += static_cast<double>(ReduceLanes<16>(lanes + 16));
  for (; i < n; ++i) {
    const float product = TailWeight(w, i) * x[i];
    sum += static_cast<double>(product);
  }
  return static_cast<float>(sum);
}

// tinyBLAS<16>: one 16-lane accumulator. Precondition: n % 16 == 0.
template <typename Load>
float DotTiled(Load w, const float* x, int64_t n) {
  const DF d;
  constexpr size_t kV = 16 / kN;
  hn::Vec<DF> acc[kV];
  for (size_t j = 0; j < kV; ++j) acc[j] = hn::Zero(d);
  for (int64_t i = 0; i < n; i += 16) {
    for (size_t j = 0; j < kV; ++j) {
      const int64_t k = i + static_cast<int64_t>(j * kN);
      acc[j] = hn::MulAdd(w(k), hn::LoadU(d, x + k), acc[j]);
    }
  }
  HWY_ALIGN float lanes[16];
  for (size_t j = 0; j < kV; ++j) hn::Store(acc[j], d, lanes + j * kN);
  return ReduceLanes<16>(lanes);
}

// ---- Quantized dots: 8 lanes held as 8/kQ vectors of kQ int32/f32 lanes.
using DI = hn::CappedTag<int32_t, 8>;
using DF8 = hn::CappedTag<float, 8>;
constexpr size_t kQ = hn::MaxLanes(DI());  // 4 or 8
constexpr size_t kQV = 8 / kQ;
static_assert(kQ == 4 || kQ == 8, "quantized lanes assume 4 or 8 int32 per vector");

// 4*kQ bytes as kQ int32 lanes.
HWY_INLINE hn::Vec<DI> LoadWords(const void* p) {
  return hn::LoadU(DI(), static_cast<const int32_t*>(p));
}
// Byte t of each lane, sign-extended.
HWY_INLINE hn::Vec<DI> SignedByte(hn::Vec<DI> v, int t) {
  return hn::ShiftRightSame(hn::ShiftLeftSame(v, 24 - 8 * t), 24);
}
// Bits [shift, shift + 4) of each lane.
HWY_INLINE hn::Vec<DI> Nibble(hn::Vec<DI> v, int shift) {
  return hn::And(hn::ShiftRightSame(v, shift), hn::Set(DI(), 0xF));
}

float ReduceAcc8(const hn::Vec<DF8>* acc) {
  HWY_ALIGN float lanes[8];
  for (size_t v = 0; v < kQV; ++v) hn::Store(acc[v], DF8(), lanes + v * kQ);
  return ReduceLanes<8>(lanes);
}

float DotQ8_0(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n_blocks) {
  const DI di;
  const DF8 df;
  hn::Vec<DF8> acc[kQV];
  for (size_t v = 0; v < kQV; ++v) acc[v] = hn::Zero(df);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const auto scale = hn::Set(df, Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d));
    for (size_t v = 0; v < kQV; ++v) {
      const auto wv = LoadWords(w[b].qs + 4 * kQ * v);
      const auto xv = LoadWords(x[b].qs + 4 * kQ * v);
      auto p = hn::Mul(SignedByte(wv, 0), SignedByte(xv, 0));
      for (int t = 1; t < 4; ++t) p = hn::Add(p, hn::Mul(SignedByte(wv, t), SignedByte(xv, t)));
      acc[v] = hn::MulAdd(scale, hn::ConvertTo(df, p), acc[v]);
    }
  }
  return ReduceAcc8(acc);
}

// Q5_0: Q4_0's lanes, each nibble joined with its bit 4 from qh: the value in
// byte t of lane l (of the 8) is 4l + t, so its bit is qh >> (4l + t).
// The 16 bytes of 32 packed nibbles (value j in byte j's low nibble, value
// j + 16 in its high one), as words whose byte lanes Nibble() reads: with
// 8 lanes, lanes 0-3 hold the low nibbles and lanes 4-7 the high ones; with
// 4, wv[0] the low and wv[1] the high.
inline void LoadNibbleWords(const uint8_t* qs, hn::Vec<DI> wv[kQV]) {
  const DI di;
  if constexpr (kQ == 8) {
    const hn::Half<DI> dh;
    const auto q = hn::LoadU(dh, reinterpret_cast<const int32_t*>(qs));
    wv[0] = hn::Combine(di, hn::ShiftRight<4>(q), q);
  } else {
    const auto q = LoadWords(qs);
    wv[0] = q;
    wv[kQV - 1] = hn::ShiftRight<4>(q);
  }
}

// One Q5 block (fifth bits `qh`, packed nibbles `qs`) against 32 Q8
// activations `xs`, added to acc as scale * each lane group's integer dot.
// Each of the 32 values is its nibble (LoadNibbleWords) with the fifth bit
// from qh (bit 4l + t for byte t of lane l of the 8) above it, less `offset`
// (16 for Q5_0, 0 for Q5_1). Exact integers: the order of their sums does
// not matter.
class FiveBitDot {
 public:
  explicit FiveBitDot(int32_t offset) : offset_(hn::Set(DI(), offset)) {
    const DI di;
    for (size_t v = 0; v < kQV; ++v) {
      bit_of_lane_[v] = hn::Mul(hn::Add(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(kQ * v))),
                                hn::Set(di, 4));
    }
  }
  void Accumulate(const uint8_t* qh, const uint8_t* qs, const int8_t* xs, float scale,
                  hn::Vec<DF8> acc[kQV]) const {
    const DI di;
    const DF8 df;
    const auto one = hn::Set(di, 1);
    int32_t qh_bits;
    std::memcpy(&qh_bits, qh, sizeof(qh_bits));
    const auto high_bits = hn::Set(di, qh_bits);
    hn::Vec<DI> nibbles[kQV];
    LoadNibbleWords(qs, nibbles);
    for (size_t v = 0; v < kQV; ++v) {
      const auto xv = LoadWords(xs + 4 * kQ * v);
      hn::Vec<DI> p = hn::Zero(di);
      for (int t = 0; t < 4; ++t) {
        const auto high =
            hn::And(hn::Shr(high_bits, hn::Add(bit_of_lane_[v], hn::Set(di, t))), one);
        const auto q = hn::Sub(hn::Or(Nibble(nibbles[v], 8 * t), hn::ShiftLeft<4>(high)), offset_);
        p = hn::Add(p, hn::Mul(q, SignedByte(xv, t)));
      }
      acc[v] = hn::MulAdd(hn::Set(df, scale), hn::ConvertTo(df, p), acc[v]);
    }
  }

 private:
  hn::Vec<DI> offset_;
  hn::Vec<DI> bit_of_lane_[kQV];  // 4 * (lane index among the 8)
};

float DotQ5_0(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n_blocks) {
  const DF8 df;
  const FiveBitDot dot(16);
  hn::Vec<DF8> acc[kQV];
  for (size_t v = 0; v < kQV; ++v) acc[v] = hn::Zero(df);
  for (int64_t b = 0; b < n_blocks; ++b) {
    dot.Accumulate(w[b].qh, w[b].qs, x[b].qs, Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d), acc);
  }
  return ReduceAcc8(acc);
}

float DotQ4_0(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n_blocks) {
  const DI di;
  const DF8 df;
  const auto k8 = hn::Set(di, 8);
  hn::Vec<DF8> acc[kQV];
  for (size_t v = 0; v < kQV; ++v) acc[v] = hn::Zero(df);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const auto scale = hn::Set(df, Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d));
    // Lanes 0-3: low nibbles of qs[0..15] (values 0..15); lanes 4-7: high
    // nibbles (values 16..31).
    hn::Vec<DI> wv[kQV];
    LoadNibbleWords(w[b].qs, wv);
    for (size_t v = 0; v < kQV; ++v) {
      const auto xv = LoadWords(x[b].qs + 4 * kQ * v);
      auto p = hn::Mul(hn::Sub(Nibble(wv[v], 0), k8), SignedByte(xv, 0));
      for (int t = 1; t < 4; ++t) {
        p = hn::Add(p, hn::Mul(hn::Sub(Nibble(wv[v], 8 * t), k8), SignedByte(xv, t)));
      }
      acc[v] = hn::MulAdd(scale, hn::ConvertTo(df, p), acc[v]);
    }
  }
  return ReduceAcc8(acc);
}

// DotOrder::kRepacked: the same integer products, each block's summed into
// one integer (exact, in any order), then one fma per block.
float DotQ4_0Repacked(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n_blocks) {
  const DI di;
  const auto k8 = hn::Set(di, 8);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    hn::Vec<DI> wv[kQV];
    LoadNibbleWords(w[b].qs, wv);
    auto p = hn::Zero(di);
    for (size_t v = 0; v < kQV; ++v) {
      const auto xv = LoadWords(x[b].qs + 4 * kQ * v);
      for (int t = 0; t < 4; ++t) {
        p = hn::Add(p, hn::Mul(hn::Sub(Nibble(wv[v], 8 * t), k8), SignedByte(xv, t)));
      }
    }
    const auto sum = static_cast<float>(hn::GetLane(hn::SumOfLanes(di, p)));
    acc = std::fma(sum, Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d), acc);
  }
  return acc;
}

// Q4_1/Q5_1: Q4_0's/Q5_0's lanes over the unsigned values; the mins m_w *
// s_x FMA'd into one float added after the halving sum.
float DotQ4_1(const BlockQ4_1* w, const BlockQ8_1* x, int64_t n_blocks) {
  const DF8 df;
  hn::Vec<DF8> acc[kQV];
  for (size_t v = 0; v < kQV; ++v) acc[v] = hn::Zero(df);
  float summs = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    summs = std::fma(Fp16ToFp32(w[b].m), Fp16ToFp32(x[b].s), summs);
    const auto scale = hn::Set(df, Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d));
    hn::Vec<DI> wv[kQV];
    LoadNibbleWords(w[b].qs, wv);
    for (size_t v = 0; v < kQV; ++v) {
      const auto xv = LoadWords(x[b].qs + 4 * kQ * v);
      auto p = hn::Mul(Nibble(wv[v], 0), SignedByte(xv, 0));
      for (int t = 1; t < 4; ++t) p = hn::Add(p, hn::Mul(Nibble(wv[v], 8 * t), SignedByte(xv, t)));
      acc[v] = hn::MulAdd(scale, hn::ConvertTo(df, p), acc[v]);
    }
  }
  return ReduceAcc8(acc) + summs;
}

float DotQ5_1(const BlockQ5_1* w, const BlockQ8_1* x, int64_t n_blocks) {
  const DF8 df;
  const FiveBitDot dot(0);
  hn::Vec<DF8> acc[kQV];
  for (size_t v = 0; v < kQV; ++v) acc[v] = hn::Zero(df);
  float summs = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    summs = std::fma(Fp16ToFp32(w[b].m), Fp16ToFp32(x[b].s), summs);
    dot.Accumulate(w[b].qh, w[b].qs, x[b].qs, Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d), acc);
  }
  return ReduceAcc8(acc) + summs;
}

// The 32 IQ4 levels of 16 packed bytes (index j in byte j's low nibble, j +
// 16 in its high one), as words whose byte t of lane l (of the 8) is level
// 4l + t: the nibbles are split into bytes and looked up in the 16-byte level
// table (pshufb / tbl).
inline void LoadLevelWords(const uint8_t* qs, hn::Vec<DI> wv[kQV]) {
  const hn::Repartition<uint8_t, DI> du8;
  const hn::Half<decltype(du8)> dh;  // 16 bytes when kQ == 8
  const auto table = hn::LoadDup128(du8, reinterpret_cast<const uint8_t*>(kIq4NlValues));
  if constexpr (kQ == 8) {
    const auto q = hn::LoadU(dh, qs);
    const auto idx = hn::Combine(du8, hn::ShiftRight<4>(q), hn::And(q, hn::Set(dh, 0xF)));
    wv[0] = hn::BitCast(DI(), hn::TableLookupBytes(table, idx));
  } else {
    const auto q = hn::LoadU(du8, qs);
    wv[0] = hn::BitCast(DI(), hn::TableLookupBytes(table, hn::And(q, hn::Set(du8, 0xF))));
    wv[1] = hn::BitCast(DI(), hn::TableLookupBytes(table, hn::ShiftRight<4>(q)));
  }
}

// IQ4_NL: even and odd blocks in two sets of lanes, added before the halving
// sum; an unpaired last block FMA'd in as one integer sum.
float DotIQ4_NL(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n_blocks) {
  const DF8 df;
  hn::Vec<DF8> acc[2][kQV];
  for (size_t v = 0; v < kQV; ++v) acc[0][v] = acc[1][v] = hn::Zero(df);
  int64_t b = 0;
  for (; b + 1 < n_blocks; b += 2) {
    for (int h = 0; h < 2; ++h) {
      const auto scale = hn::Set(df, Fp16ToFp32(x[b + h].d) * Fp16ToFp32(w[b + h].d));
      hn::Vec<DI> wv[kQV];
      LoadLevelWords(w[b + h].qs, wv);
      for (size_t v = 0; v < kQV; ++v) {
        const auto xv = LoadWords(x[b + h].qs + 4 * kQ * v);
        auto p = hn::Mul(SignedByte(wv[v], 0), SignedByte(xv, 0));
        for (int t = 1; t < 4; ++t)
          p = hn::Add(p, hn::Mul(SignedByte(wv[v], t), SignedByte(xv, t)));
        acc[h][v] = hn::MulAdd(scale, hn::ConvertTo(df, p), acc[h][v]);
      }
    }
  }
  for (size_t v = 0; v < kQV; ++v) acc[0][v] = hn::Add(acc[0][v], acc[1][v]);
  float sum = ReduceAcc8(acc[0]);
  if (b < n_blocks) {
    int32_t total = 0;
    for (int k = 0; k < 16; ++k) {
      total += kIq4NlValues[w[b].qs[k] & 0xF] * x[b].qs[k];
      total += kIq4NlValues[w[b].qs[k] >> 4] * x[b].qs[16 + k];
    }
    sum = std::fma(Fp16ToFp32(x[b].d) * Fp16ToFp32(w[b].d), static_cast<float>(total), sum);
  }
  return sum;
}

// IQ4_XS: K-quant lanes with signed sub-block scales; ggml's byte products
// count a negative level against x = -128 as level * 128 (SignTrickProduct).
float DotIQ4_XS(const BlockIQ4_XS* w, const BlockQ8_K* x, int64_t n_blocks) {
  const DI di;
  const DF8 df;
  const auto zero = hn::Zero(di);
  const auto k_m128 = hn::Set(di, -128);
  const auto k128 = hn::Set(di, 128);
  hn::Vec<DF8> acc[kQV];
  for (size_t v = 0; v < kQV; ++v) acc[v] = hn::Zero(df);
  for (int64_t b = 0; b < n_blocks; ++b) {
    hn::Vec<DI> sumi[kQV];
    for (size_t v = 0; v < kQV; ++v) sumi[v] = zero;
    for (int ib = 0; ib < 8; ++ib) {
      const auto ls = hn::Set(di, IQ4_XSScale(w[b], ib));
      hn::Vec<DI> wv[kQV];
      LoadLevelWords(w[b].qs + 16 * ib, wv);
      for (size_t v = 0; v < kQV; ++v) {
        const auto xv = LoadWords(x[b].qs + 32 * ib + 4 * kQ * v);
        hn::Vec<DI> p = zero;
        for (int t = 0; t < 4; ++t) {
          const auto level = SignedByte(wv[v], t);
          const auto xt = SignedByte(xv, t);
          const auto flip = hn::And(hn::Eq(xt, k_m128), hn::Lt(level, zero));
          p = hn::Add(p, hn::Mul(level, hn::IfThenElse(flip, k128, xt)));
        }
        sumi[v] = hn::Add(sumi[v], hn::Mul(ls, p));
      }
    }
    const auto d = hn::Set(df, Fp16ToFp32(w[b].d) * x[b].d);
    for (size_t v = 0; v < kQV; ++v) acc[v] = hn::MulAdd(d, hn::ConvertTo(df, sumi[v]), acc[v]);
  }
  return ReduceAcc8(acc);
}

float DotQ4_K(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n_blocks) {
  const DI di;
  const DF8 df;
  const hn::FixedTag<float, 4> d4;
  const hn::FixedTag<int32_t, 4> di4;
  hn::Vec<DF8> acc[kQV];
  for (size_t v = 0; v < kQV; ++v) acc[v] = hn::Zero(df);
  auto acc_m = hn::Zero(d4);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = x[b].d * Fp16ToFp32(w[b].d);
    const float dmin = -x[b].d * Fp16ToFp32(w[b].dmin);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) Q4_KScaleMin(j, w[b].scales, &sc[j], &m[j]);
    HWY_ALIGN int32_t prod[4];
    const int16_t* bs = x[b].bsums;
    for (int k = 0; k < 4; ++k) {
      prod[k] =
          m[2 * k] * (bs[4 * k] + bs[4 * k + 1]) + m[2 * k + 1] * (bs[4 * k + 2] + bs[4 * k + 3]);
    }
    acc_m = hn::MulAdd(hn::Set(d4, dmin), hn::ConvertTo(d4, hn::Load(di4, prod)), acc_m);
    hn::Vec<DI> sumi[kQV];
    for (size_t v = 0; v < kQV; ++v) sumi[v] = hn::Zero(di);
    for (int c = 0; c < 4; ++c) {
      const auto sc_lo = hn::Set(di, sc[2 * c]);
      const auto sc_hi = hn::Set(di, sc[2 * c + 1]);
      for (size_t v = 0; v < kQV; ++v) {
        const auto wv = LoadWords(w[b].qs + 32 * c + 4 * kQ * v);
        const auto xl = LoadWords(x[b].qs + 64 * c + 4 * kQ * v);
        const auto xh = LoadWords(x[b].qs + 64 * c + 32 + 4 * kQ * v);
        auto pl = hn::Mul(Nibble(wv, 0), SignedByte(xl, 0));
        auto ph = hn::Mul(Nibble(wv, 4), SignedByte(xh, 0));
        for (int t = 1; t < 4; ++t) {
          pl = hn::Add(pl, hn::Mul(Nibble(wv, 8 * t), SignedByte(xl, t)));
          ph = hn::Add(ph, hn::Mul(Nibble(wv, 8 * t + 4), SignedByte(xh, t)));
        }
        sumi[v] = hn::Add(sumi[v], hn::Add(hn::Mul(sc_lo, pl), hn::Mul(sc_hi, ph)));
      }
    }
    const auto vd = hn::Set(df, d);
    for (size_t v = 0; v < kQV; ++v) acc[v] = hn::MulAdd(vd, hn::ConvertTo(df, sumi[v]), acc[v]);
  }
  HWY_ALIGN float am[4];
  hn::Store(acc_m, d4, am);
  return ReduceAcc8(acc) + ((am[0] + am[2]) + (am[1] + am[3]));
}

float DotQ6_K(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n_blocks) {
  const DI di;
  const DF8 df;
  const auto k32 = hn::Set(di, 32);
  const auto k3 = hn::Set(di, 3);
  hn::Vec<DF8> acc[kQV];
  for (size_t v = 0; v < kQV; ++v) acc[v] = hn::Zero(df);
  HWY_ALIGN int32_t sc_lanes[64];  // sc_lanes[i] = scales[i / 4]
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int i = 0; i < 64; ++i) sc_lanes[i] = w[b].scales[i / 4];
    hn::Vec<DI> sumi[kQV];
    for (size_t v = 0; v < kQV; ++v) sumi[v] = hn::Zero(di);
    for (int c = 0; c < 2; ++c) {
      for (size_t v = 0; v < kQV; ++v) {
        const auto l1 = LoadWords(w[b].ql + 64 * c + 4 * kQ * v);
        const auto l2 = LoadWords(w[b].ql + 64 * c + 32 + 4 * kQ * v);
        const auto h = LoadWords(w[b].qh + 32 * c + 4 * kQ * v);
        for (int m = 0; m < 4; ++m) {
          const auto& src = (m & 1) ? l2 : l1;
          const int nib = m >= 2 ? 4 : 0;
          const auto xv = LoadWords(x[b].qs + 128 * c + 32 * m + 4 * kQ * v);
          hn::Vec<DI> p = hn::Zero(di);
          for (int t = 0; t < 4; ++t) {
            const auto hi = hn::And(hn::ShiftRightSame(h, 8 * t + 2 * m), k3);
            const auto q = hn::Sub(hn::Or(Nibble(src, 8 * t + nib), hn::ShiftLeft<4>(hi)), k32);
            p = hn::Add(p, hn::Mul(q, SignedByte(xv, t)));
          }
          const auto scl = hn::Load(di, sc_lanes + 32 * c + 8 * m + kQ * v);
          sumi[v] = hn::Add(sumi[v], hn::Mul(scl, p));
        }
      }
    }
    const auto vd = hn::Set(df, x[b].d * Fp16ToFp32(w[b].d));
    for (size_t v = 0; v < kQV; ++v) acc[v] = hn::MulAdd(vd, hn::ConvertTo(df, sumi[v]), acc[v]);
  }
  return ReduceAcc8(acc);
}

float DotOne(const DotJob& job, int64_t r, int64_t t) {
  const int64_t cols = job.cols;
  const void* row = job.w + r * job.row_bytes;
  const bool tiled = job.order == DotOrder::kTiled;
  switch (job.type) {
    case TensorType::kF32: {
      const LoadF32 load{static_cast<const float*>(row)};
      const float* x = job.x_floats + t * cols;
      return tiled ? DotTiled(load, x, cols) : DotVecDot(load, x, cols);
    }
    case TensorType::kF16: {
      const LoadF16 load{static_cast<const uint16_t*>(row)};
      const float* x = job.x_floats + t * cols;
      return tiled ? DotTiled(load, x, cols) : DotVecDot(load, x, cols);
    }
    case TensorType::kBF16: {
      const LoadBf16 load{static_cast<const uint16_t*>(row)};
      const float* x = job.x_floats + t * cols;
      return tiled ? DotTiled(load, x, cols) : DotVecDotBf16(load, x, cols);
    }
    case TensorType::kQ8_0: {
      const int64_t nb = cols / kQ8_0BlockSize;
      return DotQ8_0(static_cast<const BlockQ8_0*>(row), job.x_q8_0 + t * nb, nb);
    }
    case TensorType::kQ4_0: {
      const int64_t nb = cols / kQ4_0BlockSize;
      const auto* w = static_cast<const BlockQ4_0*>(row);
      return job.order == DotOrder::kRepacked ? DotQ4_0Repacked(w, job.x_q8_0 + t * nb, nb)
                                              : DotQ4_0(w, job.x_q8_0 + t * nb, nb);
    }
    case TensorType::kQ5_0: {
      const int64_t nb = cols / kQ5_0BlockSize;
      return DotQ5_0(static_cast<const BlockQ5_0*>(row), job.x_q8_0 + t * nb, nb);
    }
    case TensorType::kQ4_1: {
      const int64_t nb = cols / kQ4_1BlockSize;
      return DotQ4_1(static_cast<const BlockQ4_1*>(row), job.x_q8_1 + t * nb, nb);
    }
    case TensorType::kQ5_1: {
      const int64_t nb = cols / kQ5_1BlockSize;
      return DotQ5_1(static_cast<const BlockQ5_1*>(row), job.x_q8_1 + t * nb, nb);
    }
    case TensorType::kIQ4_NL: {
      const int64_t nb = cols / kIQ4_NLBlockSize;
      return DotIQ4_NL(static_cast<const BlockIQ4_NL*>(row), job.x_q8_0 + t * nb, nb);
    }
    case TensorType::kIQ4_XS: {
      const int64_t nb = cols / kQK_K;
      return DotIQ4_XS(static_cast<const BlockIQ4_XS*>(row), job.x_q8_k + t * nb, nb);
    }
    case TensorType::kQ4_K: {
      const int64_t nb = cols / kQK_K;
      return DotQ4_K(static_cast<const BlockQ4_K*>(row), job.x_q8_k + t * nb, nb);
    }
    case TensorType::kQ6_K: {
      const int64_t nb = cols / kQK_K;
      return DotQ6_K(static_cast<const BlockQ6_K*>(row), job.x_q8_k + t * nb, nb);
    }
    default:
      // Q2_K, Q3_K, Q5_K: no Highway kernels yet (x86 runs kquant_x86*.cc;
      // NEON runs this portable code, whose std::fma is one instruction there).
      return DotOneScalar(job, r, t);
  }
}

#else  // !RINGLM_SIMD_HAS_FMA

float DotOne(const DotJob& job, int64_t r, int64_t t) { return DotOneScalar(job, r, t); }

#endif  // RINGLM_SIMD_HAS_FMA

void DotRowsImpl(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; ++t) {
    float* y_row = job.y + t * job.rows;
    for (int64_t r = r0; r < r1; ++r) y_row[r] = DotOne(job, r, t);
  }
}

int64_t HwyTargetImpl() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace ringlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ringlm {

HWY_EXPORT(DotRowsImpl);
HWY_EXPORT(HwyTargetImpl);

int64_t DispatchedHwyTarget() { return HWY_DYNAMIC_DISPATCH(HwyTargetImpl)(); }

void DotRows(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  HWY_DYNAMIC_DISPATCH(DotRowsImpl)(job, r0, r1, t0, t1);
}

}  // namespace ringlm
#endif  // HWY_ONCE
