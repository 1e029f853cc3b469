// MatMul: converts activations, splits rows over the pool and calls the
// per-target SIMD kernels (matmul_simd.cc). The numerics are specified by
// matmul.h and written out plainly in matmul_reference.cc. This file also
// holds DotOneScalar, the portable fallback for targets without FMA (it uses
// std::fma, a libm call there: correct but slow).
#include "inference/ops/matmul.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "inference/ops/fp16.h"
#include "inference/ops/kquant_internal.h"
#include "inference/ops/matmul_internal.h"
#include "inference/ops/min_iq4_x86.h"
#include "inference/ops/qgemm_internal.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

// Rows per tile when a batch has several tokens: one tile of weights is reused
// for every token while it is hot in cache.
constexpr int64_t kRowTile = 16;

// Loads weight element k of a float-like row as f32 (exact).
struct LoadF32 {
  const float* p;
  float operator()(int64_t k) const { return p[k]; }
};
struct LoadF16 {
  const uint16_t* p;
  float operator()(int64_t k) const { return Fp16ToFp32(p[k]); }
};
struct LoadBf16 {
  const uint16_t* p;
  float operator()(int64_t k) const { return Bf16ToFp32(p[k]); }
};

// ggml_vec_dot_{f32,f16} (AVX-512 order); `x` is already rounded to the
// vec_dot_type and widened to f32.
template <typename Load>
float DotVecDot(Load w, const float* x, int64_t n) {
  const int64_t full = n & ~int64_t{63};
  float acc[4][16] = {};
  for (int64_t i = 0; i < full; i += 64) {
    for (int j = 0; j < 4; ++j) {
      for (int lane = 0; lane < 16; ++lane) {
        const int64_t k = i + 16 * j + lane;
        acc[j][lane] = std::fma(w(k), x[k], acc[j][lane]);
      }
    }
  }
  for (int lane = 0; lane < 16; ++lane) {
    acc[0][lane] = acc[0][lane] + acc[2][lane];
    acc[1][lane] = acc[1][lane] + acc[3][lane];
  }
  for (int lane = 0; lane < 16; ++lane) acc[0][lane] = acc[0][lane] + acc[1][lane];
  double sum = ReduceLanes<16>(acc[0]);
  for (int64_t k = full; k < n; ++k) {
    const float product = w(k) * x[k];
    sum += static_cast<double>(product);
  }
  return static_cast<float>(sum);
}

// ggml_vec_dot_bf16 (AVX-512F order).
float DotVecDotBf16(LoadBf16 w, const float* x, int64_t n) {
  float c1[16] = {};
  float c2[16] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int lane = 0; lane < 16; ++lane) {
      c1[lane] = std::fma(w(i + lane), x[i + lane], c1[lane]);
      c2[lane] = std::fma(w(i + 16 + lane), x[i + 16 + lane], c2[lane]);
    }
  }
  double sum = 0.0;
  sum += static_cast<double>(ReduceLanes<16>(c1));
  sum += static_cast<double>(ReduceLanes<16>(c2));
  for (; i < n; ++i) {
    const float product = w(i) * x[i];
    sum += static_cast<double>(product);
  }
  return static_cast<float>(sum);
}

// tinyBLAS<16>. Precondition: n % 16 == 0.
template <typename Load>
float DotTiled(Load w, const float* x, int64_t n) {
  float acc[16] = {};
  for (int64_t i = 0; i < n; i += 16) {
    for (int lane = 0; lane < 16; ++lane) acc[lane] = std::fma(w(i + lane), x[i + lane], acc[lane]);
  }
  return ReduceLanes<16>(acc);
}

// Q8_0 weights x Q8_0 activations.
float DotQ8_0(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n_blocks) {
  float acc[8] = {};
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t partial[8] = {};
    for (int k = 0; k < 32; ++k) partial[k / 4] += w[b].qs[k] * x[b].qs[k];
    const float scale = Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d);
    for (int lane = 0; lane < 8; ++lane) {
      acc[lane] = std::fma(scale, static_cast<float>(partial[lane]), acc[lane]);
    }
  }
  return ReduceLanes<8>(acc);
}

// Q4_0 weights x Q8_0 activations.
float DotQ4_0(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n_blocks) {
  float acc[8] = {};
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t partial[8] = {};
    for (int k = 0; k < 16; ++k) {
      partial[k / 4] += ((w[b].qs[k] & 0x0F) - 8) * x[b].qs[k];
      partial[4 + k / 4] += ((w[b].qs[k] >> 4) - 8) * x[b].qs[16 + k];
    }
    const float scale = Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d);
    for (int lane = 0; lane < 8; ++lane) {
      acc[lane] = std::fma(scale, static_cast<float>(partial[lane]), acc[lane]);
    }
  }
  return ReduceLanes<8>(acc);
}

// Q4_0 weights x Q8_0 activations in DotOrder::kRepacked: one integer sum and
// one fma per block.
float DotQ4_0Repacked(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n_blocks) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t sum = 0;
    for (int k = 0; k < 16; ++k) {
      sum += ((w[b].qs[k] & 0x0F) - 8) * x[b].qs[k] + ((w[b].qs[k] >> 4) - 8) * x[b].qs[16 + k];
    }
    acc = std::fma(static_cast<float>(sum), Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d), acc);
  }
  return acc;
}

// Q5_0 weights x Q8_0 activations (ggml_vec_dot_q5_0_q8_0, AVX2 order): as
// Q4_0, with 5-bit values.
float DotQ5_0(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n_blocks) {
  float acc[8] = {};
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t partial[8] = {};
    for (int k = 0; k < 32; ++k) partial[k / 4] += Q5_0Value(w[b], k) * x[b].qs[k];
    const float scale = Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d);
    for (int lane = 0; lane < 8; ++lane) {
      acc[lane] = std::fma(scale, static_cast<float>(partial[lane]), acc[lane]);
    }
  }
  return ReduceLanes<8>(acc);
}

// Q4_1 / Q5_1 weights x Q8_1 activations (ggml_vec_dot_q{4,5}_1_q8_1, AVX2
// order): Q4_0's 8 exact integer lanes of unsigned values, FMA'd with d_w *
// d_x per block; the mins term m_w * s_x is FMA-accumulated into one float
// (gcc fuses ggml's `summs += m * s`) added after the lanes' halving sum.
template <typename Block, typename Value>
float DotWithMin(const Block* w, const BlockQ8_1* x, int64_t n_blocks, Value value) {
  float acc[8] = {};
  float summs = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    summs = std::fma(Fp16ToFp32(w[b].m), Fp16ToFp32(x[b].s), summs);
    int32_t partial[8] = {};
    for (int k = 0; k < 32; ++k) partial[k / 4] += value(w[b], k) * x[b].qs[k];
    const float scale = Fp16ToFp32(w[b].d) * Fp16ToFp32(x[b].d);
    for (int lane = 0; lane < 8; ++lane) {
      acc[lane] = std::fma(scale, static_cast<float>(partial[lane]), acc[lane]);
    }
  }
  return ReduceLanes<8>(acc) + summs;
}

int Q4_1Value(const BlockQ4_1& b, int k) { return k < 16 ? (b.qs[k] & 0xF) : (b.qs[k - 16] >> 4); }

// The IQ4 level of index j (0..31) of 16 packed bytes.
int IQ4Level(const uint8_t* qs, int j) {
  return kIq4NlValues[j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4)];
}

// IQ4_NL weights x Q8_0 activations (ggml_vec_dot_iq4_nl_q8_0, AVX2 order):
// 8 exact integer lanes per block, FMA'd with d_x * d_w into two sets of 8
// float lanes (even and odd blocks), added lane by lane and reduced by
// halving; an odd last block is then FMA'd in as one integer sum.
float DotIQ4_NL(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n_blocks) {
  float acc[2][8] = {};
  int64_t b = 0;
  for (; b + 1 < n_blocks; b += 2) {
    for (int h = 0; h < 2; ++h) {
      int32_t partial[8] = {};
      for (int k = 0; k < 32; ++k) partial[k / 4] += IQ4Level(w[b + h].qs, k) * x[b + h].qs[k];
      const float scale = Fp16ToFp32(x[b + h].d) * Fp16ToFp32(w[b + h].d);
      for (int lane = 0; lane < 8; ++lane) {
        acc[h][lane] = std::fma(scale, static_cast<float>(partial[lane]), acc[h][lane]);
      }
    }
  }
  for (int lane = 0; lane < 8; ++lane) acc[0][lane] = acc[0][lane] + acc[1][lane];
  float sum = ReduceLanes<8>(acc[0]);
  if (b < n_blocks) {
    int32_t total = 0;
    for (int k = 0; k < 32; ++k) total += IQ4Level(w[b].qs, k) * x[b].qs[k];
    sum = std::fma(Fp16ToFp32(x[b].d) * Fp16ToFp32(w[b].d), static_cast<float>(total), sum);
  }
  return sum;
}

// IQ4_XS weights x Q8_K activations (ggml_vec_dot_iq4_xs_q8_K, AVX2 order):
// per super-block, 8 exact integer lanes (lane = (position % 32) / 4) of
// scale * level * x, with ggml's sign-trick byte products; FMA'd with
// d_w * d_x into 8 float lanes, reduced by halving.
float DotIQ4_XS(const BlockIQ4_XS* w, const BlockQ8_K* x, int64_t n_blocks) {
  float acc[8] = {};
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t sumi[8] = {};
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* qs = w[b].qs + 16 * ib;
      const int8_t* xq = x[b].qs + 32 * ib;
      int32_t lanes[8] = {};
      for (int k = 0; k < 16; ++k) {
        lanes[k / 4] += SignTrickProduct(kIq4NlValues[qs[k] & 0xF], xq[k]);
        lanes[4 + k / 4] += SignTrickProduct(kIq4NlValues[qs[k] >> 4], xq[16 + k]);
      }
      const int ls = IQ4_XSScale(w[b], ib);
      for (int lane = 0; lane < 8; ++lane) sumi[lane] += ls * lanes[lane];
    }
    const float d = Fp16ToFp32(w[b].d) * x[b].d;
    for (int lane = 0; lane < 8; ++lane) {
      acc[lane] = std::fma(d, static_cast<float>(sumi[lane]), acc[lane]);
    }
  }
  return ReduceLanes<8>(acc);
}

// Q4_K weights x Q8_K activations (ggml_vec_dot_q4_K_q8_K, AVX2 order): per
// super-block, 8 exact integer lane sums (lane = (position % 32) / 4) scaled
// by d and FMA-accumulated; the mins go to 4 lanes; result = halving sum of
// the 8 lanes + ((m0 + m2) + (m1 + m3)).
float DotQ4_K(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n_blocks) {
  float acc[8] = {};
  float acc_m[4] = {};
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = x[b].d * Fp16ToFp32(w[b].d);
    const float dmin = -x[b].d * Fp16ToFp32(w[b].dmin);
    int32_t sumi[8] = {};
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) Q4_KScaleMin(j, w[b].scales, &sc[j], &m[j]);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q = w[b].qs[32 * c + l];
        sumi[l / 4] += sc[2 * c] * (q & 0xF) * x[b].qs[64 * c + l];
        sumi[l / 4] += sc[2 * c + 1] * (q >> 4) * x[b].qs[64 * c + 32 + l];
      }
    }
    for (int k = 0; k < 4; ++k) {
      const int32_t prod = m[2 * k] * (x[b].bsums[4 * k] + x[b].bsums[4 * k + 1]) +
                           m[2 * k + 1] * (x[b].bsums[4 * k + 2] + x[b].bsums[4 * k + 3]);
      acc_m[k] = std::fma(dmin, static_cast<float>(prod), acc_m[k]);
    }
    for (int lane = 0; lane < 8; ++lane) {
      acc[lane] = std::fma(d, static_cast<float>(sumi[lane]), acc[lane]);
    }
  }
  return ReduceLanes<8>(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

// Q6_K weights x Q8_K activations (ggml_vec_dot_q6_K_q8_K, AVX2 order).
float DotQ6_K(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n_blocks) {
  float acc[8] = {};
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = x[b].d * Fp16ToFp32(w[b].d);
    int32_t sumi[8] = {};
    for (int c = 0; c < 2; ++c) {
      const uint8_t* ql = w[b].ql + 64 * c;
      const uint8_t* qh = w[b].qh + 32 * c;
      const int8_t* sc = w[b].scales + 8 * c;
      const int8_t* q8 = x[b].qs + 128 * c;
      for (int l = 0; l < 32; ++l) {
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        const int is = l / 16;
        sumi[l / 4] += sc[is] * q1 * q8[l] + sc[is + 2] * q2 * q8[l + 32] +
                       sc[is + 4] * q3 * q8[l + 64] + sc[is + 6] * q4 * q8[l + 96];
      }
    }
    for (int lane = 0; lane < 8; ++lane) {
      acc[lane] = std::fma(d, static_cast<float>(sumi[lane]), acc[lane]);
    }
  }
  return ReduceLanes<8>(acc);
}

// The 8 exact integer lanes of one K-quant super-block, as ggml's AVX2 code
// sums them: lane (p % 32) / 4 gets sc[p / 16] * q[p] * x[p].
void KQuantLaneSums(const int8_t* q, const int* sc, const int8_t* x, int32_t sumi[8]) {
  for (int lane = 0; lane < 8; ++lane) sumi[lane] = 0;
  for (int p = 0; p < kQK_K; ++p) sumi[(p % 32) / 4] += sc[p / 16] * q[p] * x[p];
}

// acc[lane] = fma(d, sumi[lane], acc[lane]).
void FmaLanes(float d, const int32_t sumi[8], float acc[8]) {
  for (int lane = 0; lane < 8; ++lane)
    acc[lane] = std::fma(d, static_cast<float>(sumi[lane]), acc[lane]);
}

// Q5_K weights x Q8_K activations (ggml_vec_dot_q5_K_q8_K, AVX2 order): the
// lanes as Q4_K's; the mins term of each super-block is one exact integer,
// FMA-accumulated into a scalar added after the lanes' halving sum.
float DotQ5_K(const BlockQ5_K* w, const BlockQ8_K* x, int64_t n_blocks) {
  float acc[8] = {};
  float summs = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = x[b].d * Fp16ToFp32(w[b].d);
    const float dmin = -x[b].d * Fp16ToFp32(w[b].dmin);
    int sc[16];
    int32_t mins = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t s, m;
      Q4_KScaleMin(j, w[b].scales, &s, &m);
      sc[2 * j] = sc[2 * j + 1] = s;
      mins += m * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
    }
    summs = std::fma(dmin, static_cast<float>(mins), summs);
    int8_t q[kQK_K];
    for (int p = 0; p < kQK_K; ++p) {
      const uint8_t byte = w[b].qs[32 * (p / 64) + p % 32];
      const int low = (p % 64) < 32 ? (byte & 0xF) : (byte >> 4);
      q[p] = static_cast<int8_t>(low | (((w[b].qh[p % 32] >> (p / 32)) & 1) << 4));
    }
    int32_t sumi[8];
    KQuantLaneSums(q, sc, x[b].qs, sumi);
    FmaLanes(d, sumi, acc);
  }
  return ReduceLanes<8>(acc) + summs;
}

// Q3_K weights x Q8_K activations (ggml_vec_dot_q3_K_q8_K, AVX2 order):
// signed scales s - 32 and values q - 4 in the integer lanes.
float DotQ3_K(const BlockQ3_K* w, const BlockQ8_K* x, int64_t n_blocks) {
  float acc[8] = {};
  for (int64_t b = 0; b < n_blocks; ++b) {
    int sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = Q3_KScale(j, w[b].scales) - 32;
    int8_t q[kQK_K];
    for (int p = 0; p < kQK_K; ++p) {
      q[p] =
          static_cast<int8_t>(TwoBits(w[b].qs, p) + 4 * ((w[b].hmask[p % 32] >> (p / 32)) & 1) - 4);
    }
    int32_t sumi[8];
    KQuantLaneSums(q, sc, x[b].qs, sumi);
    FmaLanes(x[b].d * Fp16ToFp32(w[b].d), sumi, acc);
  }
  return ReduceLanes<8>(acc);
}

// Q2_K weights x Q8_K activations (ggml_vec_dot_q2_K_q8_K, AVX2 order): per
// super-block the mins go first into the same 8 lanes (lane k: m[2k] *
// bsums[2k] + m[2k + 1] * bsums[2k + 1], times -d_x * dmin), then the values.
float DotQ2_K(const BlockQ2_K* w, const BlockQ8_K* x, int64_t n_blocks) {
  float acc[8] = {};
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = x[b].d * Fp16ToFp32(w[b].d);
    const float dmin = -x[b].d * Fp16ToFp32(w[b].dmin);
    int sc[16];
    int32_t mins[8];
    for (int k = 0; k < 8; ++k) {
      mins[k] = (w[b].scales[2 * k] >> 4) * x[b].bsums[2 * k] +
                (w[b].scales[2 * k + 1] >> 4) * x[b].bsums[2 * k + 1];
    }
    FmaLanes(dmin, mins, acc);
    for (int j = 0; j < 16; ++j) sc[j] = w[b].scales[j] & 0xF;
    int8_t q[kQK_K];
    for (int p = 0; p < kQK_K; ++p) q[p] = static_cast<int8_t>(TwoBits(w[b].qs, p));
    int32_t sumi[8];
    KQuantLaneSums(q, sc, x[b].qs, sumi);
    FmaLanes(d, sumi, acc);
  }
  return ReduceLanes<8>(acc);
}

// RoundToHalfAvx2's definition, in portable code.
void RoundToHalf(TensorType type, const float* x, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = type == TensorType::kF16 ? Fp16ToFp32(Fp32ToFp16(x[i])) : Bf16ToFp32(Fp32ToBf16(x[i]));
  }
}

}  // namespace

float DotOneScalar(const DotJob& job, int64_t r, int64_t t) {
  const int64_t cols = job.cols;
  const void* row = job.w + r * job.row_bytes;
  const DotOrder order = job.order;
  switch (job.type) {
    case TensorType::kF32: {
      const LoadF32 load{static_cast<const float*>(row)};
      const float* x = job.x_floats + t * cols;
      return order == DotOrder::kTiled ? DotTiled(load, x, cols) : DotVecDot(load, x, cols);
    }
    case TensorType::kF16: {
      const LoadF16 load{static_cast<const uint16_t*>(row)};
      const float* x = job.x_floats + t * cols;
      return order == DotOrder::kTiled ? DotTiled(load, x, cols) : DotVecDot(load, x, cols);
    }
    case TensorType::kBF16: {
      const LoadBf16 load{static_cast<const uint16_t*>(row)};
      const float* x = job.x_floats + t * cols;
      return order == DotOrder::kTiled ? DotTiled(load, x, cols) : DotVecDotBf16(load, x, cols);
    }
    case TensorType::kQ8_0: {
      const int64_t nb = cols / kQ8_0BlockSize;
      return DotQ8_0(static_cast<const BlockQ8_0*>(row), job.x_q8_0 + t * nb, nb);
    }
    case TensorType::kQ4_0: {
      const int64_t nb = cols / kQ4_0BlockSize;
      const auto* w = static_cast<const BlockQ4_0*>(row);
      return order == DotOrder::kRepacked ? DotQ4_0Repacked(w, job.x_q8_0 + t * nb, nb)
                                          : DotQ4_0(w, job.x_q8_0 + t * nb, nb);
    }
    case TensorType::kQ5_0: {
      const int64_t nb = cols / kQ5_0BlockSize;
      return DotQ5_0(static_cast<const BlockQ5_0*>(row), job.x_q8_0 + t * nb, nb);
    }
    case TensorType::kQ4_1: {
      const int64_t nb = cols / kQ4_1BlockSize;
      return DotWithMin(static_cast<const BlockQ4_1*>(row), job.x_q8_1 + t * nb, nb, &Q4_1Value);
    }
    case TensorType::kQ5_1: {
      const int64_t nb = cols / kQ5_1BlockSize;
      return DotWithMin(static_cast<const BlockQ5_1*>(row), job.x_q8_1 + t * nb, nb, &Q5_1Value);
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
    case TensorType::kQ5_K: {
      const int64_t nb = cols / kQK_K;
      return DotQ5_K(static_cast<const BlockQ5_K*>(row), job.x_q8_k + t * nb, nb);
    }
    case TensorType::kQ3_K: {
      const int64_t nb = cols / kQK_K;
      return DotQ3_K(static_cast<const BlockQ3_K*>(row), job.x_q8_k + t * nb, nb);
    }
    case TensorType::kQ2_K: {
      const int64_t nb = cols / kQK_K;
      return DotQ2_K(static_cast<const BlockQ2_K*>(row), job.x_q8_k + t * nb, nb);
    }
    default:
      return 0.0f;
  }
}

void MatMul(TensorType type, const void* w, int64_t rows, int64_t cols, const float* x,
            int64_t n_tokens, float* y, ThreadPool* pool, WeightLayout layout) {
  assert(IsComputeSupported(type));
  assert(cols % TraitsOf(type).block_size == 0);
  assert(LayoutFits(layout, type, rows));
  if (rows <= 0 || n_tokens <= 0) return;
  const DotOrder order = MatMulDotOrder(type, rows, cols, n_tokens);
  if (layout == WeightLayout::kQ4_0x8) {
    const QGemmTarget target = ActiveQGemmTarget();
    if (target != QGemmTarget::kNone && QGemmHasKind(target, QGemmKind::kQ4_0x8)) {
      QGemm(target, QGemmKind::kQ4_0x8, w, rows, cols, x, n_tokens, y, pool);
      return;
    }
    // No kernel reads that layout here (another --cpu-target than the one
    // the weights were packed for): the GGUF rows again, for this call.
    thread_local std::vector<uint8_t> gguf_rows;
    gguf_rows.resize(RowBytes(type, cols) * rows);
    UnpackQ4_0x8(w, rows, cols, gguf_rows.data());
    w = gguf_rows.data();
  }
  // Q8_0/Q4_0/Q5_0/IQ4_NL: the batch-invariant integer GEMM, for every batch
  // size (its results equal the per-dot kernels' below bit for bit;
  // qgemm_internal.h). IQ4_NL's decode stays on the per-dot kernels, which
  // are as fast (its tiles would compute a padding token).
  if (type == TensorType::kQ8_0 || type == TensorType::kQ4_0 || type == TensorType::kQ5_0 ||
      (type == TensorType::kIQ4_NL && n_tokens > 1)) {
    const QGemmTarget target = ActiveQGemmTarget();
    const QGemmKind qkind = type == TensorType::kQ8_0      ? QGemmKind::kQ8_0
                            : type == TensorType::kQ5_0    ? QGemmKind::kQ5_0
                            : type == TensorType::kIQ4_NL  ? QGemmKind::kIQ4_NL
                            : order == DotOrder::kRepacked ? QGemmKind::kQ4_0Repacked
                                                           : QGemmKind::kQ4_0;
    if (target != QGemmTarget::kNone && QGemmHasKind(target, qkind)) {
      QGemm(target, qkind, w, rows, cols, x, n_tokens, y, pool);
      return;
    }
  }

  // Scratch for converted activations, reused across calls on this thread.
  thread_local std::vector<float> float_scratch;
  thread_local std::vector<BlockQ8_0> block_scratch;
  thread_local std::vector<BlockQ8_K> kblock_scratch;
  thread_local std::vector<BlockQ8_1> block1_scratch;

  DotJob job;
  job.type = type;
  job.order = order;
  job.w = static_cast<const uint8_t*>(w);
  job.row_bytes = RowBytes(type, cols);
  job.rows = rows;
  job.cols = cols;
  job.y = y;
  switch (type) {
    case TensorType::kF32:
      job.x_floats = x;
      break;
    case TensorType::kF16:
    case TensorType::kBF16: {
      const size_t needed = static_cast<size_t>(n_tokens * cols);
      if (float_scratch.size() < needed) float_scratch.resize(needed);
      float* dst = float_scratch.data();
      auto round_to_half = &RoundToHalf;
#if defined(__x86_64__)
      if (ActiveQGemmTarget() != QGemmTarget::kNone) round_to_half = &RoundToHalfAvx2;
#endif
      RunParallel(pool, n_tokens, [&](int64_t begin, int64_t end) {
        round_to_half(type, x + begin * cols, dst + begin * cols, (end - begin) * cols);
      });
      job.x_floats = dst;
      break;
    }
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
    case TensorType::kQ5_0:
    case TensorType::kIQ4_NL: {
      const int64_t nb = cols / kQ8_0BlockSize;
      const size_t needed = static_cast<size_t>(n_tokens * nb);
      if (block_scratch.size() < needed) block_scratch.resize(needed);
      BlockQ8_0* dst = block_scratch.data();
      RunParallel(pool, n_tokens, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          QuantizeRowQ8_0Activations(x + t * cols, dst + t * nb, cols);
        }
      });
      job.x_q8_0 = dst;
      break;
    }
    case TensorType::kQ4_1:
    case TensorType::kQ5_1: {
      const int64_t nb = cols / 32;
      const size_t needed = static_cast<size_t>(n_tokens * nb);
      if (block1_scratch.size() < needed) block1_scratch.resize(needed);
      BlockQ8_1* dst = block1_scratch.data();
      RunParallel(pool, n_tokens, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          QuantizeRowQ8_1Activations(x + t * cols, dst + t * nb, cols);
        }
      });
      job.x_q8_1 = dst;
      break;
    }
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kIQ4_XS: {
      const int64_t nb = cols / kQK_K;
      const size_t needed = static_cast<size_t>(n_tokens * nb);
      if (kblock_scratch.size() < needed) kblock_scratch.resize(needed);
      BlockQ8_K* dst = kblock_scratch.data();
      RunParallel(pool, n_tokens, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) QuantizeRowQ8_K(x + t * cols, dst + t * nb, cols);
      });
      job.x_q8_k = dst;
      break;
    }
    default:
      return;
  }

  // On x86, wherever the quantized GEMM's AVX2 or AVX-512 target runs (so a
  // forced Highway target forces this choice too): the K-quants' byte
  // multiplies (kquant_x86.cc), those of Q4_1/Q5_1/IQ4_NL/IQ4_XS
  // (min_iq4_x86.cc), and register tiles for the float types in
  // the tiled order (float_gemm_x86.cc, float_gemm_avx512.cc). All
  // bit-identical to DotRows.
  auto dot_rows = &DotRows;
#if defined(__x86_64__)
  const QGemmTarget x86_target = ActiveQGemmTarget();
  if (x86_target != QGemmTarget::kNone) {
    if (IsKQuantWeight(type)) {
      dot_rows = x86_target == QGemmTarget::kAvx512Vnni ? &KQuantDotRowsAvx512 : &KQuantDotRowsAvx2;
    } else if (IsMinOrIq4Weight(type)) {
      dot_rows = x86_target == QGemmTarget::kAvx512Vnni ? &MinIq4DotRowsAvx512 : &MinIq4DotRowsAvx2;
    } else if (job.order == DotOrder::kTiled && TraitsOf(type).block_size == 1) {  // F32/F16/BF16
      dot_rows = x86_target == QGemmTarget::kAvx512Vnni ? &FloatTiledDotRowsAvx512
                                                        : &FloatTiledDotRowsAvx2;
    }
  }
#endif
  // Each worker takes a contiguous range of output rows; within it, a tile of
  // kRowTile weight rows is applied to every token before moving on, so each
  // weight row is read from memory once per call.
  RunParallel(pool, rows, [&](int64_t row_begin, int64_t row_end) {
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kRowTile) {
      dot_rows(job, r0, std::min(row_end, r0 + kRowTile), 0, n_tokens);
    }
  });
}

}  // namespace ringlm
