// DotRowReference and the dispatch rule: the plain, slow statement of the
// numerics that matmul.cc implements quickly. Kept separate from the fast
// code on purpose so the two do not share bugs.
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "inference/ops/fp16.h"
#include "inference/ops/matmul.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

// Sums `lanes` floats by repeatedly adding the upper half onto the lower half,
// the order of _mm512_reduce_add_ps (16 lanes) and ggml's hsum_float_8 (8).
float ReduceByHalving(std::vector<float> v) {
  for (size_t width = v.size() / 2; width >= 1; width /= 2) {
    for (size_t i = 0; i < width; ++i) v[i] = v[i] + v[i + width];
  }
  return v[0];
}

// ggml_vec_dot_{f32,f16} with AVX-512: four 16-lane FMA accumulators over
// steps of 64 values, combined pairwise (0+2, 1+3, then 0+1) and reduced; the
// tail past the last full step is added in double, one float product at a time.
float VecDotFloat(const std::vector<float>& w, const std::vector<float>& x) {
  const size_t n = w.size();
  const size_t full = n - n % 64;
  std::vector<std::vector<float>> acc(4, std::vector<float>(16, 0.0f));
  for (size_t i = 0; i < full; i += 64) {
    for (size_t j = 0; j < 4; ++j) {
      for (size_t lane = 0; lane < 16; ++lane) {
        const size_t k = i + 16 * j + lane;
        acc[j][lane] = std::fma(w[k], x[k], acc[j][lane]);
      }
    }
  }
  for (size_t lane = 0; lane < 16; ++lane) {
    acc[0][lane] = acc[0][lane] + acc[2][lane];
    acc[1][lane] = acc[1][lane] + acc[3][lane];
  }
  for (size_t lane = 0; lane < 16; ++lane) acc[0][lane] = acc[0][lane] + acc[1][lane];
  double sum = ReduceByHalving(acc[0]);
  for (size_t k = full; k < n; ++k) {
    const float product = w[k] * x[k];
    sum += static_cast<double>(product);
  }
  return static_cast<float>(sum);
}

// ggml_vec_dot_bf16 with AVX-512F (no AVX512_BF16): two 16-lane accumulators
// over steps of 32 (FMA, as gcc contracts ggml's mul+add), each reduced and
// added in double, then the tail in double.
float VecDotBf16(const std::vector<float>& w, const std::vector<float>& x) {
  const size_t n = w.size();
  std::vector<float> c1(16, 0.0f);
  std::vector<float> c2(16, 0.0f);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (size_t lane = 0; lane < 16; ++lane) {
      c1[lane] = std::fma(w[i + lane], x[i + lane], c1[lane]);
      c2[lane] = std::fma(w[i + 16 + lane], x[i + 16 + lane], c2[lane]);
    }
  }
  double sum = 0.0;
  sum += static_cast<double>(ReduceByHalving(c1));
  sum += static_cast<double>(ReduceByHalving(c2));
  for (; i < n; ++i) {
    const float product = w[i] * x[i];
    sum += static_cast<double>(product);
  }
  return static_cast<float>(sum);
}

// llamafile tinyBLAS<16>: one 16-lane FMA accumulator, then reduced.
// Precondition: n % 16 == 0.
float TiledFloat(const std::vector<float>& w, const std::vector<float>& x) {
  std::vector<float> acc(16, 0.0f);
  for (size_t i = 0; i < w.size(); ++i) acc[i % 16] = std::fma(w[i], x[i], acc[i % 16]);
  return ReduceByHalving(acc);
}

// Q8_0 x Q8_0 or Q4_0 x Q8_0: `wq` holds the weight's integer values and
// `wd` its per-block scales.
float QuantDot(const std::vector<int>& wq, const std::vector<float>& wd, const void* xq_blocks,
               int64_t cols) {
  const auto* xb = static_cast<const BlockQ8_0*>(xq_blocks);
  std::vector<float> acc(8, 0.0f);
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float scale = wd[b] * Fp16ToFp32(xb[b].d);
    for (int lane = 0; lane < 8; ++lane) {
      int32_t partial = 0;
      for (int t = 0; t < 4; ++t) {
        const int k = 4 * lane + t;
        partial += wq[b * 32 + k] * xb[b].qs[k];
      }
      acc[lane] = std::fma(scale, static_cast<float>(partial), acc[lane]);
    }
  }
  return ReduceByHalving(acc);
}

// DotOrder::kRepacked: each block's 32 products summed in one integer, then
// one fma per block into a single float.
float SerialQuantDot(const std::vector<int>& wq, const std::vector<float>& wd, const BlockQ8_0* xb,
                     int64_t cols) {
  float acc = 0.0f;
  for (int64_t b = 0; b < cols / 32; ++b) {
    int32_t sum = 0;
    for (int k = 0; k < 32; ++k) sum += wq[b * 32 + k] * xb[b].qs[k];
    acc = std::fma(static_cast<float>(sum), wd[b] * Fp16ToFp32(xb[b].d), acc);
  }
  return acc;
}

// Q4_1/Q5_1 x Q8_1: QuantDot's lanes over the unsigned values, plus one float
// accumulating fma(m_w, s_x) per block, added after the lanes are reduced.
float MinDot(const std::vector<int>& wq, const std::vector<float>& wd, const std::vector<float>& wm,
             const BlockQ8_1* xb, int64_t cols) {
  std::vector<float> acc(8, 0.0f);
  float mins = 0.0f;
  for (int64_t b = 0; b < cols / 32; ++b) {
    mins = std::fma(wm[b], Fp16ToFp32(xb[b].s), mins);
    const float scale = wd[b] * Fp16ToFp32(xb[b].d);
    for (int lane = 0; lane < 8; ++lane) {
      int32_t partial = 0;
      for (int t = 0; t < 4; ++t) partial += wq[b * 32 + 4 * lane + t] * xb[b].qs[4 * lane + t];
      acc[lane] = std::fma(scale, static_cast<float>(partial), acc[lane]);
    }
  }
  return ReduceByHalving(acc) + mins;
}

// IQ4_NL x Q8_0: lanes as QuantDot's, but blocks 2i and 2i + 1 go to two
// separate accumulators that are added lane-wise before the reduction; a
// last unpaired block joins the reduced sum by one fma of its whole integer
// sum.
float Iq4NlDot(const std::vector<int>& wq, const std::vector<float>& wd, const BlockQ8_0* xb,
               int64_t cols) {
  const int64_t nb = cols / 32;
  std::vector<float> even(8, 0.0f);
  std::vector<float> odd(8, 0.0f);
  for (int64_t b = 0; b < nb - nb % 2; ++b) {
    std::vector<float>& acc = b % 2 == 0 ? even : odd;
    for (int lane = 0; lane < 8; ++lane) {
      int32_t partial = 0;
      for (int t = 0; t < 4; ++t) partial += wq[b * 32 + 4 * lane + t] * xb[b].qs[4 * lane + t];
      acc[lane] = std::fma(Fp16ToFp32(xb[b].d) * wd[b], static_cast<float>(partial), acc[lane]);
    }
  }
  for (int lane = 0; lane < 8; ++lane) even[lane] = even[lane] + odd[lane];
  float sum = ReduceByHalving(even);
  if (nb % 2 == 1) {
    const int64_t b = nb - 1;
    int32_t total = 0;
    for (int k = 0; k < 32; ++k) total += wq[b * 32 + k] * xb[b].qs[k];
    sum = std::fma(Fp16ToFp32(xb[b].d) * wd[b], static_cast<float>(total), sum);
  }
  return sum;
}

// IQ4_XS x Q8_K: per super-block, lane (p % 32) / 4 sums scale(p / 32) *
// level(p) * x(p), where ggml's byte product of a negative level with x =
// -128 is level * 128; FMA'd with d_w * d_x, lanes reduced by halving.
float Iq4XsDot(const BlockIQ4_XS* w, const float* x, int64_t cols) {
  std::vector<BlockQ8_K> xq(cols / kQK_K);
  QuantizeRowQ8_K(x, xq.data(), cols);
  std::vector<float> acc(8, 0.0f);
  for (int64_t b = 0; b < cols / kQK_K; ++b) {
    std::vector<int32_t> lanes(8, 0);
    for (int p = 0; p < kQK_K; ++p) {
      const int sub = p / 32;
      const int j = p % 32;
      const uint8_t byte = w[b].qs[16 * sub + j % 16];
      const int level = kIq4NlValues[j < 16 ? byte & 0xF : byte >> 4];
      const int xv = xq[b].qs[p];
      const int product = (level < 0 && xv == -128) ? level * 128 : level * xv;
      lanes[j / 4] += IQ4_XSScale(w[b], sub) * product;
    }
    const float d = Fp16ToFp32(w[b].d) * xq[b].d;
    for (int lane = 0; lane < 8; ++lane) {
      acc[lane] = std::fma(d, static_cast<float>(lanes[lane]), acc[lane]);
    }
  }
  return ReduceByHalving(acc);
}

// A K-quant row spelled out per position p of each super-block: the integer
// value q, the integer scale of its sub-block, and the super-block's f16
// scale d (and dmin with the integer min of each sub-block, for the types
// with mins).
struct KQuantRow {
  std::vector<int> q, sc, m;   // per position
  std::vector<float> d, dmin;  // per super-block
};

KQuantRow SpellOut(TensorType type, const void* row, int64_t cols) {
  const int64_t nb = cols / kQK_K;
  KQuantRow k{std::vector<int>(cols), std::vector<int>(cols), std::vector<int>(cols, 0),
              std::vector<float>(nb), std::vector<float>(nb, 0.0f)};
  for (int64_t b = 0; b < nb; ++b) {
    for (int p = 0; p < kQK_K; ++p) {
      const int64_t i = b * kQK_K + p;
      const int half = p / 128, group = (p % 128) / 32, l = p % 32;  // 128-value halves
      switch (type) {
        case TensorType::kQ2_K: {
          const auto& blk = static_cast<const BlockQ2_K*>(row)[b];
          k.d[b] = Fp16ToFp32(blk.d);
          k.dmin[b] = Fp16ToFp32(blk.dmin);
          k.q[i] = (blk.qs[32 * half + l] >> (2 * group)) & 3;
          k.sc[i] = blk.scales[p / 16] & 0xF;
          k.m[i] = blk.scales[p / 16] >> 4;
          break;
        }
        case TensorType::kQ3_K: {
          const auto& blk = static_cast<const BlockQ3_K*>(row)[b];
          k.d[b] = Fp16ToFp32(blk.d);
          const int high = (blk.hmask[l] >> (p / 32)) & 1;
          k.q[i] = ((blk.qs[32 * half + l] >> (2 * group)) & 3) + 4 * high - 4;
          const int j = p / 16;
          const int low = j < 8 ? blk.scales[j] & 0xF : blk.scales[j - 8] >> 4;
          k.sc[i] = (low | (((blk.scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
          break;
        }
        case TensorType::kQ4_K:
        case TensorType::kQ5_K: {
          const bool five = type == TensorType::kQ5_K;
          const uint8_t* scales = five ? static_cast<const BlockQ5_K*>(row)[b].scales
                                       : static_cast<const BlockQ4_K*>(row)[b].scales;
          const uint8_t* qs = five ? static_cast<const BlockQ5_K*>(row)[b].qs
                                   : static_cast<const BlockQ4_K*>(row)[b].qs;
          const uint16_t d = five ? static_cast<const BlockQ5_K*>(row)[b].d
                                  : static_cast<const BlockQ4_K*>(row)[b].d;
          const uint16_t dmin = five ? static_cast<const BlockQ5_K*>(row)[b].dmin
                                     : static_cast<const BlockQ4_K*>(row)[b].dmin;
          k.d[b] = Fp16ToFp32(d);
          k.dmin[b] = Fp16ToFp32(dmin);
          const uint8_t byte = qs[32 * (p / 64) + l];
          k.q[i] = (p % 64) < 32 ? (byte & 0xF) : (byte >> 4);
          if (five) k.q[i] += 16 * ((static_cast<const BlockQ5_K*>(row)[b].qh[l] >> (p / 32)) & 1);
          uint8_t s8, m8;
          Q4_KScaleMin(p / 32, scales, &s8, &m8);
          k.sc[i] = s8;
          k.m[i] = m8;
          break;
        }
        default: {  // Q6_K
          const auto& blk = static_cast<const BlockQ6_K*>(row)[b];
          k.d[b] = Fp16ToFp32(blk.d);
          const uint8_t low_byte = blk.ql[64 * half + 32 * (group & 1) + l];
          const int low = group < 2 ? (low_byte & 0xF) : (low_byte >> 4);
          const int high = (blk.qh[32 * half + l] >> (2 * group)) & 3;
          k.q[i] = (low | (high << 4)) - 32;
          k.sc[i] = blk.scales[p / 16];
          break;
        }
      }
    }
  }
  return k;
}

// K-quant x Q8_K. Per super-block, each lane (position % 32) / 4 sums its
// integer products sc * q * x exactly, then lane = fma(d, lane_sum, lane)
// with d = x.d * w.d. The mins term, -x.d * dmin * sum_p m_p * x_p, is
// summed as ggml's AVX2 code does for the type:
//   - Q4_K: sub-blocks 2k and 2k + 1 in lane k of 4 extra lanes, added as
//     ((m0 + m2) + (m1 + m3)) after the 8 lanes;
//   - Q5_K: one integer per super-block into one extra float, added last;
//   - Q2_K: 16-value sub-blocks 2k and 2k + 1 in lane k of the 8 lanes
//     themselves, before that super-block's values.
float KQuantDot(TensorType type, const void* row, const float* x, int64_t cols) {
  const int64_t nb = cols / kQK_K;
  std::vector<BlockQ8_K> xq(nb);
  QuantizeRowQ8_K(x, xq.data(), cols);
  const KQuantRow k = SpellOut(type, row, cols);
  std::vector<float> acc(8, 0.0f), acc_m(4, 0.0f);
  float summs = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const float dmin = -xq[b].d * k.dmin[b];
    std::vector<int64_t> min_lane(8, 0);  // lane = p / 32 (Q2_K), p / 64 (Q4_K)
    int64_t min_total = 0;
    for (int64_t p = 0; p < kQK_K; ++p) {
      const int64_t mx = static_cast<int64_t>(k.m[b * kQK_K + p]) * xq[b].qs[p];
      min_lane[type == TensorType::kQ2_K ? p / 32 : p / 64] += mx;
      min_total += mx;
    }
    if (type == TensorType::kQ2_K) {
      for (int lane = 0; lane < 8; ++lane) {
        acc[lane] = std::fma(dmin, static_cast<float>(min_lane[lane]), acc[lane]);
      }
    } else if (type == TensorType::kQ4_K) {
      for (int lane = 0; lane < 4; ++lane) {
        acc_m[lane] = std::fma(dmin, static_cast<float>(min_lane[lane]), acc_m[lane]);
      }
    } else if (type == TensorType::kQ5_K) {
      summs = std::fma(dmin, static_cast<float>(min_total), summs);
    }
    std::vector<int64_t> lane_sum(8, 0);
    for (int64_t p = 0; p < kQK_K; ++p) {
      const int64_t i = b * kQK_K + p;
      lane_sum[(p % 32) / 4] += static_cast<int64_t>(k.sc[i]) * k.q[i] * xq[b].qs[p];
    }
    const float d = xq[b].d * k.d[b];
    for (int lane = 0; lane < 8; ++lane) {
      acc[lane] = std::fma(d, static_cast<float>(lane_sum[lane]), acc[lane]);
    }
  }
  const float lanes = ReduceByHalving(acc);
  if (type == TensorType::kQ4_K) return lanes + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
  if (type == TensorType::kQ5_K) return lanes + summs;
  return lanes;
}

}  // namespace

DotOrder MatMulDotOrder(TensorType type, int64_t rows, int64_t cols, int64_t /*n_tokens*/) {
  // ggml sends single tokens to ggml_vec_dot_* (llamafile_sgemm refuses
  // n < 2); we do not: the order depends on the shape alone, so a position
  // gets the same bits whether it is decoded alone or recomputed inside a
  // prompt batch, and a prefix-cached run equals an uncached one exactly.
  switch (type) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
      // tinyBLAS<16> needs k % 16 == 0 and (AVX-512 tiling) m % 4 == 0.
      return (rows % 4 == 0 && cols % 16 == 0) ? DotOrder::kTiled : DotOrder::kVecDot;
    case TensorType::kQ4_0:
      // ggml_aarch64_get_optimal_repack_type on AVX2: ne[1] % 8 == 0 (for
      // MUL_MAT and, per expert, MUL_MAT_ID).
      return rows % 8 == 0 ? DotOrder::kRepacked : DotOrder::kTiled;
    default:
      return DotOrder::kTiled;  // quantized: same numerics either way
  }
}

float DotRowReference(TensorType type, const void* row, const float* x, int64_t cols,
                      DotOrder order) {
  assert(IsComputeSupported(type));
  std::vector<float> w(cols);
  std::vector<float> xv(x, x + cols);
  switch (type) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16: {
      DequantizeRow(type, row, w.data(), cols);  // exact for these types
      if (type == TensorType::kF16) {
        for (float& v : xv) v = Fp16ToFp32(Fp32ToFp16(v));
      } else if (type == TensorType::kBF16) {
        for (float& v : xv) v = Bf16ToFp32(Fp32ToBf16(v));
      }
      if (order == DotOrder::kTiled) return TiledFloat(w, xv);
      return type == TensorType::kBF16 ? VecDotBf16(w, xv) : VecDotFloat(w, xv);
    }
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
    case TensorType::kQ5_0: {
      std::vector<BlockQ8_0> xq(cols / 32);
      QuantizeRowQ8_0Activations(x, xq.data(), cols);
      std::vector<int> wq(cols);
      std::vector<float> wd(cols / 32);
      for (int64_t b = 0; b < cols / 32; ++b) {
        if (type == TensorType::kQ8_0) {
          const auto& blk = static_cast<const BlockQ8_0*>(row)[b];
          wd[b] = Fp16ToFp32(blk.d);
          for (int k = 0; k < 32; ++k) wq[b * 32 + k] = blk.qs[k];
        } else if (type == TensorType::kQ5_0) {
          const auto& blk = static_cast<const BlockQ5_0*>(row)[b];
          wd[b] = Fp16ToFp32(blk.d);
          uint32_t qh;
          std::memcpy(&qh, blk.qh, sizeof(qh));
          for (int k = 0; k < 16; ++k) {
            wq[b * 32 + k] = ((blk.qs[k] & 0x0F) | (((qh >> k) & 1) << 4)) - 16;
            wq[b * 32 + 16 + k] = ((blk.qs[k] >> 4) | (((qh >> (k + 16)) & 1) << 4)) - 16;
          }
        } else {
          const auto& blk = static_cast<const BlockQ4_0*>(row)[b];
          wd[b] = Fp16ToFp32(blk.d);
          for (int k = 0; k < 16; ++k) {
            wq[b * 32 + k] = (blk.qs[k] & 0x0F) - 8;
            wq[b * 32 + 16 + k] = (blk.qs[k] >> 4) - 8;
          }
        }
      }
      if (order == DotOrder::kRepacked) return SerialQuantDot(wq, wd, xq.data(), cols);
      return QuantDot(wq, wd, xq.data(), cols);
    }
    case TensorType::kQ4_1:
    case TensorType::kQ5_1: {
      std::vector<BlockQ8_1> xq(cols / 32);
      QuantizeRowQ8_1Activations(x, xq.data(), cols);
      std::vector<int> wq(cols);
      std::vector<float> wd(cols / 32), wm(cols / 32);
      for (int64_t b = 0; b < cols / 32; ++b) {
        uint32_t qh = 0;
        const uint8_t* qs;
        if (type == TensorType::kQ5_1) {
          const auto& blk = static_cast<const BlockQ5_1*>(row)[b];
          wd[b] = Fp16ToFp32(blk.d);
          wm[b] = Fp16ToFp32(blk.m);
          std::memcpy(&qh, blk.qh, sizeof(qh));
          qs = blk.qs;
        } else {
          const auto& blk = static_cast<const BlockQ4_1*>(row)[b];
          wd[b] = Fp16ToFp32(blk.d);
          wm[b] = Fp16ToFp32(blk.m);
          qs = blk.qs;
        }
        for (int k = 0; k < 16; ++k) {
          wq[b * 32 + k] = (qs[k] & 0x0F) | (((qh >> k) & 1) << 4);
          wq[b * 32 + 16 + k] = (qs[k] >> 4) | (((qh >> (k + 16)) & 1) << 4);
        }
      }
      return MinDot(wq, wd, wm, xq.data(), cols);
    }
    case TensorType::kIQ4_NL: {
      std::vector<BlockQ8_0> xq(cols / 32);
      QuantizeRowQ8_0Activations(x, xq.data(), cols);
      std::vector<int> wq(cols);
      std::vector<float> wd(cols / 32);
      for (int64_t b = 0; b < cols / 32; ++b) {
        const auto& blk = static_cast<const BlockIQ4_NL*>(row)[b];
        wd[b] = Fp16ToFp32(blk.d);
        for (int k = 0; k < 16; ++k) {
          wq[b * 32 + k] = kIq4NlValues[blk.qs[k] & 0x0F];
          wq[b * 32 + 16 + k] = kIq4NlValues[blk.qs[k] >> 4];
        }
      }
      return Iq4NlDot(wq, wd, xq.data(), cols);
    }
    case TensorType::kIQ4_XS:
      return Iq4XsDot(static_cast<const BlockIQ4_XS*>(row), x, cols);
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
      return KQuantDot(type, row, x, cols);
    default:
      return 0.0f;
  }
}

}  // namespace ringlm
