// Row dequantizers for the K-quants, shared by quant.cc (DequantizeRow) and
// the tests, and the x86 dot kernels. Internal to inference/ops.
#ifndef RINGLM_INFERENCE_OPS_KQUANT_INTERNAL_H_
#define RINGLM_INFERENCE_OPS_KQUANT_INTERNAL_H_

#include <cstdint>

#include "gguf/tensor_type.h"

namespace ringlm {

// The K-quant weight types: MatMul quantizes their activations to Q8_K.
constexpr bool IsKQuantWeight(TensorType type) {
  return type == TensorType::kQ2_K || type == TensorType::kQ3_K || type == TensorType::kQ4_K ||
         type == TensorType::kQ5_K || type == TensorType::kQ6_K;
}

// ggml's dequantize_row_q{2,3,4,5,6}_K. Precondition: n % 256 == 0.
void DequantizeRowQ2_K(const void* src, float* dst, int64_t n);
void DequantizeRowQ3_K(const void* src, float* dst, int64_t n);
void DequantizeRowQ4_K(const void* src, float* dst, int64_t n);
void DequantizeRowQ5_K(const void* src, float* dst, int64_t n);
void DequantizeRowQ6_K(const void* src, float* dst, int64_t n);

// The value of largest magnitude among x[0..n), the first one on ties (0
// for n == 0 or all zeros), as ggml's quantizers find it.
float SignedMax(int64_t n, const float* x);

// ggml's nearest_int: round to nearest, ties to even, via the 1.5 * 2^23
// trick. Precondition: |f| <= 4194303.
int NearestInt(float f);

struct DotJob;
#if defined(__x86_64__)
// DotRows for K-quant jobs (IsKQuantWeight) with the AVX2 kernels of
// kquant_x86.cc and kquant_x86_q2q3.cc,
// bit-identical to it. Precondition: CpuSupports(QGemmTarget::kAvx2). Hot.
void KQuantDotRowsAvx2(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
// The same, with AVX-512 token pairs for prompts (decode
// runs the AVX2 kernels), bit-identical to it. Precondition:
// CpuSupports(QGemmTarget::kAvx512Vnni). Hot.
void KQuantDotRowsAvx512(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
#endif

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_KQUANT_INTERNAL_H_
