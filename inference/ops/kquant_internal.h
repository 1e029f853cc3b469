// Row dequantizers for the K-quants, shared by quant.cc (DequantizeRow) and
// the tests. Internal to inference/ops.
#ifndef RINGLM_INFERENCE_OPS_KQUANT_INTERNAL_H_
#define RINGLM_INFERENCE_OPS_KQUANT_INTERNAL_H_

#include <cstdint>

namespace ringlm {

// ggml's dequantize_row_q4_K / dequantize_row_q6_K. Precondition: n % 256 == 0.
void DequantizeRowQ4_K(const void* src, float* dst, int64_t n);
void DequantizeRowQ6_K(const void* src, float* dst, int64_t n);

// ggml's nearest_int: round to nearest, ties to even, via the 1.5 * 2^23
// trick. Precondition: |f| <= 4194303.
int NearestInt(float f);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_KQUANT_INTERNAL_H_
