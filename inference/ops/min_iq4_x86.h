// x86 AVX2 dot kernels for the Q4_1, Q5_1, IQ4_NL and IQ4_XS weight types
// (min_iq4_x86.cc). Internal to inference/ops.
#ifndef RINGLM_INFERENCE_OPS_MIN_IQ4_X86_H_
#define RINGLM_INFERENCE_OPS_MIN_IQ4_X86_H_

#include <cstdint>

#include "gguf/tensor_type.h"

namespace ringlm {

struct DotJob;

// The types MinIq4DotRowsAvx2 computes.
constexpr bool IsMinOrIq4Weight(TensorType type) {
  return type == TensorType::kQ4_1 || type == TensorType::kQ5_1 || type == TensorType::kIQ4_NL ||
         type == TensorType::kIQ4_XS;
}

#if defined(__x86_64__)
// DotRows for IsMinOrIq4Weight jobs with AVX2, bit-identical to it (ggml's
// AVX2 instruction sequences; up to 4 tokens share a row's unpacking).
// Thread-safe (writes only y rows [r0, r1) of tokens [t0, t1)).
// Precondition: CpuSupports(QGemmTarget::kAvx2). Hot.
void MinIq4DotRowsAvx2(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
// The same, with AVX-512 token pairs for IQ4_XS prompts (decode and the
// other types run the AVX2 kernels), bit-identical to it. Precondition:
// CpuSupports(QGemmTarget::kAvx512Vnni). Hot.
void MinIq4DotRowsAvx512(const DotJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
#endif

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_MIN_IQ4_X86_H_
