// IQ4_NL and IQ4_XS: the non-linear 4-bit formats. Quantizers as
// llama-quantize runs them without an importance matrix, and dequantizers as
// ggml's to_float. Written from the formats' definition; every float step
// (products, sums, the trial scales) is rounded where ggml-base rounds it,
// since llama-quantize's bytes are the reference (ringlm_ops builds with
// -ffp-contract=off, and ggml-base has no FMA).
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "inference/ops/fp16.h"
#include "inference/ops/kquant_internal.h"
#include "inference/ops/quant.h"
#include "inference/ops/quant_internal.h"

namespace ringlm {
namespace {

constexpr float kGroupMaxEps = 1e-15f;
constexpr int kLevels = 16;
constexpr int kTrials = 7;  // trial scales (level[0] + t) / max, t in -7..7

// The index of the level nearest to x: of the two levels around x, v[hi - 1]
// <= x < v[hi], the upper one unless the lower is strictly nearer (the
// differences rounded as floats). hi is found by counting, not bisection:
// the same index, without the branches a random x mispredicts.
int NearestLevel(float x) {
  const int8_t* v = kIq4NlValues;
  if (x <= v[0]) return 0;
  if (x >= v[kLevels - 1]) return kLevels - 1;
  int hi = 0;
  for (int i = 0; i < kLevels; ++i) hi += static_cast<float>(v[i]) <= x ? 1 : 0;
  return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

// Weighted sums of the levels picked at inverse scale `id`, weights x^2:
// sum w * q * x and sum w * q * q (each product rounded left to right).
void LevelSums(const float* x, float id, float* sumqx, float* sumq2) {
  float qx = 0;
  float q2 = 0;
  for (int j = 0; j < 32; ++j) {
    const float q = kIq4NlValues[NearestLevel(id * x[j])];
    const float w = x[j] * x[j];
    qx += w * q * x[j];
    q2 += w * q * q;
  }
  *sumqx = qx;
  *sumq2 = q2;
}

// The best scale for 32 values (0 below kGroupMaxEps): first d = max / 127
// refined by least squares, then each trial inverse scale (level[0] + t) /
// max; a trial wins when it improves sumqx^2 / sumq2.
float BestScale(const float* x) {
  const float max = SignedMax(32, x);
  if (std::fabs(max) < kGroupMaxEps) return 0.0f;
  const float d0 = -max / kIq4NlValues[0];
  float sumqx;
  float sumq2;
  LevelSums(x, 1 / d0, &sumqx, &sumq2);
  float d = sumqx / sumq2;
  float best = d * sumqx;
  for (int t = -kTrials; t <= kTrials; ++t) {
    const float id = (t + kIq4NlValues[0]) / max;
    LevelSums(x, id, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Packs 32 level indices: index j in the low nibble of qs[j], j + 16 high.
void PackIndices(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[16 + j] << 4));
}

}  // namespace

void QuantizeRowIQ4_NL(const float* x, void* dst, int64_t n) {
  assert(n % kIQ4_NLBlockSize == 0);
  auto* y = static_cast<BlockIQ4_NL*>(dst);
  for (int64_t i = 0; i < n / kIQ4_NLBlockSize; ++i) {
    const float* xb = x + i * kIQ4_NLBlockSize;
    const float d = BestScale(xb);
    y[i].d = Fp32ToFp16(d);
    // The levels are picked again at the unrounded scale.
    const float id = d != 0.0f ? 1 / d : 0.0f;
    uint8_t L[32];
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(NearestLevel(id * xb[j]));
    PackIndices(L, y[i].qs);
  }
}

void QuantizeRowIQ4_XS(const float* x, void* dst, int64_t n) {
  assert(n % kQK_K == 0);
  auto* y = static_cast<BlockIQ4_XS*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* xs = x + i * kQK_K;
    float scales[8];
    for (int ib = 0; ib < 8; ++ib) scales[ib] = BestScale(xs + 32 * ib);
    const float max_scale = SignedMax(8, scales);
    // Sub-block scales as 6-bit multiples of d = -max_scale / 32.
    const float d = -max_scale / 32;
    y[i].d = Fp32ToFp16(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    y[i].scales_h = 0;
    std::memset(y[i].scales_l, 0, sizeof(y[i].scales_l));
    for (int ib = 0; ib < 8; ++ib) {
      const int l = std::max(-32, std::min(31, NearestInt(id * scales[ib])));
      const float dl = d * l;
      const float idl = dl != 0.0f ? 1 / dl : 0.0f;
      uint8_t L[32];
      for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(NearestLevel(idl * xs[32 * ib + j]));
      PackIndices(L, y[i].qs + 16 * ib);
      const int u = l + 32;
      y[i].scales_l[ib / 2] |= static_cast<uint8_t>((u & 0xF) << (4 * (ib % 2)));
      y[i].scales_h |= static_cast<uint16_t>((u >> 4) << (2 * ib));
    }
  }
}

void DequantizeRowIQ4_NL(const void* src, float* dst, int64_t n) {
  assert(n % kIQ4_NLBlockSize == 0);
  const auto* b = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t i = 0; i < n / kIQ4_NLBlockSize; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    float* y = dst + i * kIQ4_NLBlockSize;
    for (int j = 0; j < 16; ++j) {
      y[j] = d * kIq4NlValues[b[i].qs[j] & 0xF];
      y[16 + j] = d * kIq4NlValues[b[i].qs[j] >> 4];
    }
  }
}

void DequantizeRowIQ4_XS(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* b = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      const float dl = d * IQ4_XSScale(b[i], ib);
      const uint8_t* qs = b[i].qs + 16 * ib;
      float* y = dst + i * kQK_K + 32 * ib;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * kIq4NlValues[qs[j] & 0xF];
        y[16 + j] = dl * kIq4NlValues[qs[j] >> 4];
      }
    }
  }
}

}  // namespace ringlm
