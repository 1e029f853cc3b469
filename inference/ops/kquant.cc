// K-quant reference quantizers (Q2_K..Q6_K), the Q8_K activation quantizer
// and the K-quant dequantizers, following llama.cpp's ggml-quants.c. These
// run once per weight at quantization time (not hot), except
// QuantizeRowQ8_K, which runs once per activation row per MatMul.
//
// Numerics: ggml-base is built without FMA, and this library is built with
// -ffp-contract=off, so every a*b+c below rounds twice, as in ggml.
#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>

#include "inference/ops/fp16.h"
#include "inference/ops/kquant_internal.h"
#include "inference/ops/quant.h"

namespace ringlm {

float SignedMax(int64_t n, const float* x) {
  float max = 0;
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  return max;
}

int NearestInt(float f) {
  assert(std::fabs(f) <= 4194303.f);
  const float val = f + 12582912.f;
  const int32_t i = std::bit_cast<int32_t>(val);
  return (i & 0x007fffff) - 0x00400000;
}

namespace {

constexpr float kGroupMaxEps = 1e-15f;

// ggml's make_qx_quants with rmse_type 1 and no importance weights: a signed
// scale for n values in [-nmax, nmax - 1], refined over 18 trial scales;
// L receives q + nmax.
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L) {
  const float max = SignedMax(n, x);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = NearestInt(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = NearestInt(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// ggml's make_qkx2_quants: scale and min for n values quantized to
// [0, nmax], searched over nstep + 1 trial scales minimizing the weighted
// squared error (absolute error with use_mad). Returns the scale; *the_min
// receives -min (>= 0).
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                     float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                     bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// The part quantize_row_q4_K_ref and quantize_row_q5_K_ref share: one
// super-block's 8 sub-block scales and mins (make_qkx2_quants over [0, nmax]
// with rmin and nstep), packed into 12 bytes of 6-bit values with their f16
// super-scales d and dmin, and the values requantized with those, in L.
void QuantizeScalesMins(const float* x, int nmax, float rmin, int nstep, uint8_t* L,
                        uint8_t packed[12], uint16_t* d_out, uint16_t* dmin_out) {
  uint8_t Laux[32];
  float weights[32];
  float mins[kQK_K / 32];
  float scales[kQK_K / 32];
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < kQK_K / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = MakeQkx2Quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                               0.1f, nstep, /*use_mad=*/false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(packed, 0, 12);
  for (int j = 0; j < kQK_K / 32; ++j) {
    // uint8_t truncation of nearest_int, then clamp, exactly as ggml.
    const uint8_t ls =
        std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_min * mins[j])));
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = Fp32ToFp16(max_scale / 63.f);
  *dmin_out = Fp32ToFp16(max_min / 63.f);
  for (int j = 0; j < kQK_K / 32; ++j) {
    uint8_t sc, m;
    Q4_KScaleMin(j, packed, &sc, &m);
    const float d = Fp16ToFp32(*d_out) * sc;
    if (d == 0.0f) continue;
    const float dm = Fp16ToFp32(*dmin_out) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = NearestInt((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

// ggml's make_q3_quants with do_rmse: a signed scale for n values in
// [-nmax, nmax - 1], refined by up to 5 passes that move one value at a
// time; L receives q + nmax.
float MakeQ3Quants(int n, int nmax, const float* x, int8_t* L) {
  const float max = SignedMax(n, x);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, NearestInt(iscale * x[i])));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        int new_l = NearestInt(x[i] * sl2 / slx);
        new_l = std::max(-nmax, std::min(nmax - 1, new_l));
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return sumlx / suml2;
}

// Packs 256 2-bit values (L < 4) as BlockQ2_K::qs / BlockQ3_K::qs.
void PackTwoBits(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                           (L[j + l + 96] << 6));
    }
  }
}

}  // namespace

void QuantizeRowQ2_K(const float* x, void* dst, int64_t n) {
  assert(n % kQK_K == 0);
  auto* y = static_cast<BlockQ2_K*>(dst);
  uint8_t L[kQK_K];
  uint8_t Laux[16];
  float weights[16];
  float mins[kQK_K / 16];
  float scales[kQK_K / 16];
  constexpr float kQ4Scale = 15.f;
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < kQK_K / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = MakeQkx2Quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                                 0.1f, 15, /*use_mad=*/true);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    if (max_scale > 0) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < kQK_K / 16; ++j) {
        y[i].scales[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
      }
      y[i].d = Fp32ToFp16(max_scale / kQ4Scale);
    } else {
      std::memset(y[i].scales, 0, sizeof(y[i].scales));
      y[i].d = Fp32ToFp16(0.f);
    }
    if (max_min > 0) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < kQK_K / 16; ++j) {
        y[i].scales[j] |= static_cast<uint8_t>(NearestInt(iscale * mins[j]) << 4);
      }
      y[i].dmin = Fp32ToFp16(max_min / kQ4Scale);
    } else {
      y[i].dmin = Fp32ToFp16(0.f);
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = Fp16ToFp32(y[i].d) * (y[i].scales[j] & 0xF);
      if (d == 0.0f) continue;
      const float dm = Fp16ToFp32(y[i].dmin) * (y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = NearestInt((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
      }
    }
    PackTwoBits(L, y[i].qs);
  }
}

void QuantizeRowQ3_K(const float* x, void* dst, int64_t n) {
  assert(n % kQK_K == 0);
  auto* y = static_cast<BlockQ3_K*>(dst);
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    for (int j = 0; j < kQK_K / 16; ++j) scales[j] = MakeQ3Quants(16, 4, x + 16 * j, L + 16 * j);
    const float max_scale = SignedMax(kQK_K / 16, scales);
    std::memset(y[i].scales, 0, sizeof(y[i].scales));
    if (max_scale != 0.0f) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < kQK_K / 16; ++j) {
        // int8_t truncation of nearest_int, then clamp, exactly as ggml.
        int l = static_cast<int8_t>(NearestInt(iscale * scales[j]));
        l = std::max(-32, std::min(31, l)) + 32;
        if (j < 8) {
          y[i].scales[j] = static_cast<uint8_t>(l & 0xF);
        } else {
          y[i].scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        }
        y[i].scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      y[i].d = Fp32ToFp16(1 / iscale);
    } else {
      y[i].d = Fp32ToFp16(0.f);
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = Fp16ToFp32(y[i].d) * (Q3_KScale(j, y[i].scales) - 32);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = NearestInt(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, l)) + 4);
      }
    }
    // The high bit of value j goes to bit j / 32 of hmask[j % 32].
    std::memset(y[i].hmask, 0, sizeof(y[i].hmask));
    uint8_t low[kQK_K];
    for (int j = 0; j < kQK_K; ++j) {
      if (L[j] > 3) y[i].hmask[j % 32] |= static_cast<uint8_t>(1 << (j / 32));
      low[j] = static_cast<uint8_t>(L[j] & 3);
    }
    PackTwoBits(low, y[i].qs);
  }
}

void QuantizeRowQ4_K(const float* x, void* dst, int64_t n) {
  assert(n % kQK_K == 0);
  auto* y = static_cast<BlockQ4_K*>(dst);
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    QuantizeScalesMins(x, 15, -1.f, 20, L, y[i].scales, &y[i].d, &y[i].dmin);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void QuantizeRowQ5_K(const float* x, void* dst, int64_t n) {
  assert(n % kQK_K == 0);
  auto* y = static_cast<BlockQ5_K*>(dst);
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    QuantizeScalesMins(x, 31, -0.5f, 15, L, y[i].scales, &y[i].d, &y[i].dmin);
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    uint8_t* q = y[i].qs;
    for (int j = 0, c = 0; j < kQK_K; j += 64, q += 32, ++c) {
      for (int l = 0; l < 32; ++l) {
        const int l1 = L[j + l];
        const int l2 = L[j + l + 32];
        y[i].qh[l] |= static_cast<uint8_t>(((l1 >> 4) << (2 * c)) | ((l2 >> 4) << (2 * c + 1)));
        q[l] = static_cast<uint8_t>((l1 & 0xF) | ((l2 & 0xF) << 4));
      }
    }
  }
}

void QuantizeRowQ6_K(const float* x, void* dst, int64_t n) {
  assert(n % kQK_K == 0);
  auto* y = static_cast<BlockQ6_K*>(dst);
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const float scale = MakeQxQuants(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      const float abs_scale = std::fabs(scale);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = Fp32ToFp16(1 / iscale);
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      y[i].scales[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = Fp16ToFp32(y[i].d) * y[i].scales[j];
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = NearestInt(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l] & 0xF;
        const uint8_t q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF;
        const uint8_t q4 = L[j + l + 96] & 0xF;
        ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                     ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

void QuantizeRowQ8_K(const float* x, void* dst, int64_t n) {
  assert(n % kQK_K == 0);
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    const float max = SignedMax(kQK_K, x);
    if (max == 0.0f) {
      y[i].d = 0;
      std::memset(y[i].qs, 0, sizeof(y[i].qs));
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::min(127, NearestInt(iscale * x[j])));
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[16 * j + ii];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

namespace {

// ggml's dequantize_row_q4_K, and with `qh` its q5_K: sub-block is's value
// is d * sc * q - dmin * m, q the nibble plus, for Q5_K, bit `is` of qh as
// its fifth bit.
void DequantizeSuperBlockK(const uint8_t* scales, float d, float min, const uint8_t* q,
                           const uint8_t* qh, float* dst) {
  for (int j = 0, is = 0; j < kQK_K; j += 64, q += 32, is += 2) {
    uint8_t sc, m;
    Q4_KScaleMin(is, scales, &sc, &m);
    const float d1 = d * sc;
    const float m1 = min * m;
    Q4_KScaleMin(is + 1, scales, &sc, &m);
    const float d2 = d * sc;
    const float m2 = min * m;
    for (int l = 0; l < 32; ++l) {
      const int high = qh != nullptr ? ((qh[l] >> is) & 1) << 4 : 0;
      *dst++ = d1 * ((q[l] & 0xF) | high) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int high = qh != nullptr ? ((qh[l] >> (is + 1)) & 1) << 4 : 0;
      *dst++ = d2 * ((q[l] >> 4) | high) - m2;
    }
  }
}

}  // namespace

void DequantizeRowQ4_K(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* x = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    DequantizeSuperBlockK(x[i].scales, Fp16ToFp32(x[i].d), Fp16ToFp32(x[i].dmin), x[i].qs, nullptr,
                          dst);
  }
}

void DequantizeRowQ5_K(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* x = static_cast<const BlockQ5_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    DequantizeSuperBlockK(x[i].scales, Fp16ToFp32(x[i].d), Fp16ToFp32(x[i].dmin), x[i].qs, x[i].qh,
                          dst);
  }
}

void DequantizeRowQ3_K(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* x = static_cast<const BlockQ3_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const float d = Fp16ToFp32(x[i].d);
    for (int p = 0; p < kQK_K; ++p) {
      const float dl = d * (Q3_KScale(p / 16, x[i].scales) - 32);
      dst[p] = dl * (TwoBits(x[i].qs, p) - ((x[i].hmask[p % 32] >> (p / 32)) & 1 ? 0 : 4));
    }
  }
}

void DequantizeRowQ2_K(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* x = static_cast<const BlockQ2_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const float d = Fp16ToFp32(x[i].d);
    const float min = Fp16ToFp32(x[i].dmin);
    for (int p = 0; p < kQK_K; ++p) {
      const uint8_t sc = x[i].scales[p / 16];
      const float dl = d * (sc & 0xF);
      const float ml = min * (sc >> 4);
      dst[p] = dl * TwoBits(x[i].qs, p) - ml;
    }
  }
}

void DequantizeRowQ6_K(const void* src, float* dst, int64_t n) {
  assert(n % kQK_K == 0);
  const auto* x = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int c = 0; c < kQK_K; c += 128, dst += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        dst[l] = d * sc[is] * q1;
        dst[l + 32] = d * sc[is + 2] * q2;
        dst[l + 64] = d * sc[is + 4] * q3;
        dst[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

}  // namespace ringlm
