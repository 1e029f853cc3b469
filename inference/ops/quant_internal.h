// Internal to inference/ops: the per-target forms of the activation
// quantizer behind QuantizeRowQ8_0Activations (quant.h), for its dispatch and
// its tests, and the IQ4 dequantizers behind DequantizeRow. Not for use outside inference/ops.
#ifndef RINGLM_INFERENCE_OPS_QUANT_INTERNAL_H_
#define RINGLM_INFERENCE_OPS_QUANT_INTERNAL_H_

#include <cstdint>

namespace ringlm {

// The scalar definition of QuantizeRowQ8_0Activations: per block of 32,
// amax = max |x| (NaN values are skipped), d = amax / 127.f, and
// q = nearbyint(x * (127.f / amax)) (0 where that product is NaN).
void QuantizeRowQ8_0ActivationsScalar(const float* x, void* dst, int64_t n);

// The same bytes with AVX2, 32 values per step. Precondition: the CPU has
// AVX2 (x86-64 only).
void QuantizeRowQ8_0ActivationsAvx2(const float* x, void* dst, int64_t n);

// ggml's dequantize_row_iq4_nl / dequantize_row_iq4_xs (quant_iq4.cc).
// Preconditions: n % 32 == 0 / n % 256 == 0.
void DequantizeRowIQ4_NL(const void* src, float* dst, int64_t n);
void DequantizeRowIQ4_XS(const void* src, float* dst, int64_t n);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_QUANT_INTERNAL_H_
