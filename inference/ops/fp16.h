// IEEE binary16 (f16) and bfloat16 (bf16) conversions, bit-exact with ggml.
//
// Contract:
//   - Fp32ToFp16 rounds to nearest, ties to even, handles subnormals, overflow
//     (to inf) and NaN exactly like the x86 F16C instruction VCVTPS2PH with
//     rounding mode 0, which is what ggml uses on x86 (the quiet bit is set
//     and the top 10 payload bits are kept). For every non-NaN input this is
//     also what ggml's portable fallback returns.
//   - Fp16ToFp32 is exact (every half is a float); NaN payloads are kept.
//   - Fp32ToBf16 is ggml_compute_fp32_to_bf16 (llama.cpp b4748): round to
//     nearest even, NaN forced quiet, subnormals NOT flushed.
//   - Bf16ToFp32 is exact.
// All functions are pure and thread-safe. Row helpers take `n` >= 0 elements;
// source and destination must not overlap.
#ifndef RINGLM_INFERENCE_OPS_FP16_H_
#define RINGLM_INFERENCE_OPS_FP16_H_

#include <bit>
#include <cstdint>

namespace ringlm {

uint16_t Fp32ToFp16(float f);
uint16_t Fp32ToBf16(float f);

// Inline because the F16 matmul calls it once per weight (hot).
inline float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float.
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  const uint32_t bits = exp == 0x1f ? (sign | 0x7f800000u | (mant << 13))
                                    : (sign | ((exp + 112u) << 23) | (mant << 13));
  return std::bit_cast<float>(bits);
}

inline float Bf16ToFp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

void Fp32ToFp16Row(const float* src, uint16_t* dst, int64_t n);
void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n);
void Fp32ToBf16Row(const float* src, uint16_t* dst, int64_t n);
void Bf16ToFp32Row(const uint16_t* src, float* dst, int64_t n);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_FP16_H_
