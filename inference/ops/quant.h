// Block-quantized formats Q8_0 and Q4_0 (ggml layouts), their quantizers and
// row dequantization for every compute-supported type.
//
// Contract: functions are pure and thread-safe. Preconditions (not checked in
// release builds): `n` is a multiple of the type's block size (32 for Q8_0 and
// Q4_0, 1 for F32/F16/BF16); buffers hold the full row and do not overlap;
// inputs are finite.
#ifndef RINGLM_INFERENCE_OPS_QUANT_H_
#define RINGLM_INFERENCE_OPS_QUANT_H_

#include <cstdint>

#include "inference/tensor_type.h"

namespace ringlm {

inline constexpr int64_t kQ8_0BlockSize = 32;
inline constexpr int64_t kQ4_0BlockSize = 32;

// 32 values: value[j] = qs[j] * Fp16ToFp32(d).
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQ8_0BlockSize];
};
static_assert(sizeof(BlockQ8_0) == 34, "BlockQ8_0 must match ggml's block_q8_0");

// 32 values: qs[j] & 0xF holds value j, qs[j] >> 4 holds value j + 16;
// value = (q - 8) * Fp16ToFp32(d).
struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t qs[kQ4_0BlockSize / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "BlockQ4_0 must match ggml's block_q4_0");

// ggml's quantize_row_q8_0_ref (what llama-quantize writes into a GGUF):
// d = amax / 127, q = roundf(x * (1 / d)) (ties away from zero).
void QuantizeRowQ8_0(const float* x, void* dst, int64_t n);

// ggml's quantize_row_q4_0_ref: d = max / -8 where max is the value of largest
// magnitude (first one on ties), q = min(15, (int8_t)(x * (1 / d) + 8.5f)).
void QuantizeRowQ4_0(const float* x, void* dst, int64_t n);

// How ggml-cpu quantizes *activations* to Q8_0 on x86 (the AVX/AVX2
// quantize_row_q8_0, which differs from the reference quantizer):
// d = amax / 127.f, q = nearbyint(x * (127.f / amax)) (ties to even).
// MatMul uses this for Q8_0 and Q4_0 weights.
void QuantizeRowQ8_0Activations(const float* x, void* dst, int64_t n);

// Expands one row of `n` values of `type` into floats, as ggml's to_float.
// Precondition: IsComputeSupported(type).
void DequantizeRow(TensorType type, const void* src, float* dst, int64_t n);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_QUANT_H_
