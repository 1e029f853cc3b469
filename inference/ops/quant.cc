#include "inference/ops/quant.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "inference/ops/fp16.h"
#include "inference/ops/kquant_internal.h"
#include "inference/ops/quant_internal.h"

namespace ringlm {

void QuantizeRowQ8_0(const float* x, void* dst, int64_t n) {
  assert(n % kQ8_0BlockSize == 0);
  auto* y = static_cast<BlockQ8_0*>(dst);
  const int64_t nb = n / kQ8_0BlockSize;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQ8_0BlockSize;
    float amax = 0.0f;
    for (int64_t j = 0; j < kQ8_0BlockSize; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    for (int64_t j = 0; j < kQ8_0BlockSize; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::round(xb[j] * id));
    }
  }
}

void QuantizeRowQ5_0(const float* x, void* dst, int64_t n) {
  assert(n % kQ5_0BlockSize == 0);
  auto* y = static_cast<BlockQ5_0*>(dst);
  constexpr int64_t kHalf = kQ5_0BlockSize / 2;
  for (int64_t i = 0; i < n / kQ5_0BlockSize; ++i) {
    const float* xb = x + i * kQ5_0BlockSize;
    const float max = SignedMax(kQ5_0BlockSize, xb);
    const float d = max / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    uint32_t qh = 0;
    for (int64_t j = 0; j < kHalf; ++j) {
      // As QuantizeRowQ4_0: truncation after + 16.5, two roundings.
      const int q0 = std::min<int>(31, static_cast<int8_t>(xb[j] * id + 16.5f));
      const int q1 = std::min<int>(31, static_cast<int8_t>(xb[kHalf + j] * id + 16.5f));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + kHalf);
    }
    std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}

void QuantizeRowQ4_0(const float* x, void* dst, int64_t n) {
  assert(n % kQ4_0BlockSize == 0);
  auto* y = static_cast<BlockQ4_0*>(dst);
  const int64_t nb = n / kQ4_0BlockSize;
  constexpr int64_t kHalf = kQ4_0BlockSize / 2;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQ4_0BlockSize;
    const float max = SignedMax(kQ4_0BlockSize, xb);
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    for (int64_t j = 0; j < kHalf; ++j) {
      const float x0 = xb[j] * id;
      const float x1 = xb[kHalf + j] * id;
      // Truncation toward zero after +8.5 is ggml's rounding; the product and
      // the add are separate roundings (no FMA), as in ggml-base.
      const uint8_t q0 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x0 + 8.5f)));
      const uint8_t q1 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x1 + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

namespace {

// ggml's quantize_row_q4_1_ref and quantize_row_q5_1_ref: d = (max - min) /
// levels, m = min, q = truncation of (x - min) * (1 / d) + 0.5f (capped at
// 15 for Q4_1). Each block is written by `store(block, j, q)`.
template <typename Block, typename Store>
void QuantizeRowWithMin(const float* x, Block* y, int64_t n, float levels, Store store) {
  for (int64_t i = 0; i < n / 32; ++i) {
    const float* xb = x + i * 32;
    float min = std::numeric_limits<float>::max();
    float max = -std::numeric_limits<float>::max();
    for (int j = 0; j < 32; ++j) {
      if (xb[j] < min) min = xb[j];
      if (xb[j] > max) max = xb[j];
    }
    const float d = (max - min) / levels;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    y[i].m = Fp32ToFp16(min);
    for (int j = 0; j < 32; ++j) {
      const float v = (xb[j] - min) * id;
      store(y[i], j, static_cast<int>(v + 0.5f));
    }
  }
}

}  // namespace

void QuantizeRowQ4_1(const float* x, void* dst, int64_t n) {
  assert(n % kQ4_1BlockSize == 0);
  auto* y = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQ4_1BlockSize; ++i) std::memset(y[i].qs, 0, sizeof(y[i].qs));
  QuantizeRowWithMin(x, y, n, 15.0f, [](BlockQ4_1& b, int j, int q) {
    // ggml: MIN(15, (int8_t)(...)); the value is in [0, 15.5] here.
    q = std::min(15, static_cast<int>(static_cast<int8_t>(q)));
    b.qs[j % 16] |= static_cast<uint8_t>(q << (4 * (j / 16)));
  });
}

void QuantizeRowQ5_1(const float* x, void* dst, int64_t n) {
  assert(n % kQ5_1BlockSize == 0);
  auto* y = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQ5_1BlockSize; ++i) {
    std::memset(y[i].qs, 0, sizeof(y[i].qs));
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
  }
  QuantizeRowWithMin(x, y, n, 31.0f, [](BlockQ5_1& b, int j, int q) {
    const uint8_t u = static_cast<uint8_t>(q);  // ggml's (uint8_t) cast
    b.qs[j % 16] |= static_cast<uint8_t>((u & 0x0F) << (4 * (j / 16)));
    b.qh[j / 8] |= static_cast<uint8_t>(((u >> 4) & 1) << (j % 8));
  });
}

void QuantizeRowQ8_1Activations(const float* x, void* dst, int64_t n) {
  assert(n % 32 == 0);
  auto* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / 32; ++i) {
    const float* xb = x + i * 32;
    BlockQ8_0 q;
    QuantizeRowQ8_0Activations(xb, &q, 32);
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += q.qs[j];
    y[i].d = q.d;
    y[i].s = Fp32ToFp16(amax / 127.f * static_cast<float>(sum));
    std::memcpy(y[i].qs, q.qs, sizeof(q.qs));
  }
}

void QuantizeRowQ8_0ActivationsScalar(const float* x, void* dst, int64_t n) {
  assert(n % kQ8_0BlockSize == 0);
  auto* y = static_cast<BlockQ8_0*>(dst);
  const int64_t nb = n / kQ8_0BlockSize;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQ8_0BlockSize;
    float amax = 0.0f;
    for (int64_t j = 0; j < kQ8_0BlockSize; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    y[i].d = Fp32ToFp16(d);
    for (int64_t j = 0; j < kQ8_0BlockSize; ++j) {
      // _mm256_round_ps(_MM_ROUND_NEAREST) == nearbyint in the default mode.
      const float v = xb[j] * id;
      y[i].qs[j] = std::isnan(v) ? 0 : static_cast<int8_t>(std::nearbyint(v));
    }
  }
}

void QuantizeRowQ8_0Activations(const float* x, void* dst, int64_t n) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return QuantizeRowQ8_0ActivationsAvx2(x, dst, n);
#endif
  QuantizeRowQ8_0ActivationsScalar(x, dst, n);
}

size_t RowBytes(TensorType type, int64_t n) {
  const TensorTypeTraits traits = TraitsOf(type);
  assert(n % traits.block_size == 0);
  return static_cast<size_t>(n / traits.block_size) * traits.block_bytes;
}

void QuantizeRow(TensorType type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case TensorType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::kF16:
      Fp32ToFp16Row(src, static_cast<uint16_t*>(dst), n);
      return;
    case TensorType::kBF16:
      Fp32ToBf16Row(src, static_cast<uint16_t*>(dst), n);
      return;
    case TensorType::kQ8_0:
      QuantizeRowQ8_0(src, dst, n);
      return;
    case TensorType::kQ4_0:
      QuantizeRowQ4_0(src, dst, n);
      return;
    case TensorType::kQ5_0:
      QuantizeRowQ5_0(src, dst, n);
      return;
    case TensorType::kQ4_1:
      QuantizeRowQ4_1(src, dst, n);
      return;
    case TensorType::kQ5_1:
      QuantizeRowQ5_1(src, dst, n);
      return;
    case TensorType::kIQ4_NL:
      QuantizeRowIQ4_NL(src, dst, n);
      return;
    case TensorType::kIQ4_XS:
      QuantizeRowIQ4_XS(src, dst, n);
      return;
    case TensorType::kQ2_K:
      QuantizeRowQ2_K(src, dst, n);
      return;
    case TensorType::kQ3_K:
      QuantizeRowQ3_K(src, dst, n);
      return;
    case TensorType::kQ4_K:
      QuantizeRowQ4_K(src, dst, n);
      return;
    case TensorType::kQ5_K:
      QuantizeRowQ5_K(src, dst, n);
      return;
    case TensorType::kQ6_K:
      QuantizeRowQ6_K(src, dst, n);
      return;
    default:
      assert(false && "QuantizeRow: unsupported type");
  }
}

void DequantizeRow(TensorType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case TensorType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::kF16:
      Fp16ToFp32Row(static_cast<const uint16_t*>(src), dst, n);
      return;
    case TensorType::kBF16:
      Bf16ToFp32Row(static_cast<const uint16_t*>(src), dst, n);
      return;
    case TensorType::kQ8_0: {
      assert(n % kQ8_0BlockSize == 0);
      const auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n / kQ8_0BlockSize; ++i) {
        const float d = Fp16ToFp32(b[i].d);
        for (int64_t j = 0; j < kQ8_0BlockSize; ++j) {
          dst[i * kQ8_0BlockSize + j] = b[i].qs[j] * d;
        }
      }
      return;
    }
    case TensorType::kQ4_0: {
      assert(n % kQ4_0BlockSize == 0);
      const auto* b = static_cast<const BlockQ4_0*>(src);
      constexpr int64_t kHalf = kQ4_0BlockSize / 2;
      for (int64_t i = 0; i < n / kQ4_0BlockSize; ++i) {
        const float d = Fp16ToFp32(b[i].d);
        for (int64_t j = 0; j < kHalf; ++j) {
          dst[i * kQ4_0BlockSize + j] = ((b[i].qs[j] & 0x0F) - 8) * d;
          dst[i * kQ4_0BlockSize + kHalf + j] = ((b[i].qs[j] >> 4) - 8) * d;
        }
      }
      return;
    }
    case TensorType::kQ5_0: {
      assert(n % kQ5_0BlockSize == 0);
      const auto* b = static_cast<const BlockQ5_0*>(src);
      for (int64_t i = 0; i < n / kQ5_0BlockSize; ++i) {
        const float d = Fp16ToFp32(b[i].d);
        for (int j = 0; j < kQ5_0BlockSize; ++j)
          dst[i * kQ5_0BlockSize + j] = Q5_0Value(b[i], j) * d;
      }
      return;
    }
    case TensorType::kQ4_1: {
      assert(n % kQ4_1BlockSize == 0);
      const auto* b = static_cast<const BlockQ4_1*>(src);
      for (int64_t i = 0; i < n / kQ4_1BlockSize; ++i) {
        const float d = Fp16ToFp32(b[i].d);
        const float m = Fp16ToFp32(b[i].m);
        for (int j = 0; j < 16; ++j) {
          dst[i * kQ4_1BlockSize + j] = (b[i].qs[j] & 0x0F) * d + m;
          dst[i * kQ4_1BlockSize + 16 + j] = (b[i].qs[j] >> 4) * d + m;
        }
      }
      return;
    }
    case TensorType::kQ5_1: {
      assert(n % kQ5_1BlockSize == 0);
      const auto* b = static_cast<const BlockQ5_1*>(src);
      for (int64_t i = 0; i < n / kQ5_1BlockSize; ++i) {
        const float d = Fp16ToFp32(b[i].d);
        const float m = Fp16ToFp32(b[i].m);
        for (int j = 0; j < kQ5_1BlockSize; ++j)
          dst[i * kQ5_1BlockSize + j] = Q5_1Value(b[i], j) * d + m;
      }
      return;
    }
    case TensorType::kIQ4_NL:
      DequantizeRowIQ4_NL(src, dst, n);
      return;
    case TensorType::kIQ4_XS:
      DequantizeRowIQ4_XS(src, dst, n);
      return;
    case TensorType::kQ2_K:
      DequantizeRowQ2_K(src, dst, n);
      return;
    case TensorType::kQ3_K:
      DequantizeRowQ3_K(src, dst, n);
      return;
    case TensorType::kQ4_K:
      DequantizeRowQ4_K(src, dst, n);
      return;
    case TensorType::kQ5_K:
      DequantizeRowQ5_K(src, dst, n);
      return;
    case TensorType::kQ6_K:
      DequantizeRowQ6_K(src, dst, n);
      return;
    default:
      assert(false && "DequantizeRow: unsupported type");
  }
}

}  // namespace ringlm
