// Block-quantized formats Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q8_1, the K-quants
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K, and the non-linear IQ4_NL and IQ4_XS
// (ggml layouts),
// their quantizers and row dequantization for every compute-supported type.
//
// Contract: functions are pure and thread-safe. Preconditions (not checked in
// release builds): `n` is a multiple of the type's block size (32 for Q8_0,
// Q4_0, Q5_0, Q4_1, Q5_1 and IQ4_NL, 256 for K-quants and IQ4_XS, 1 for
// F32/F16/BF16); buffers hold the full row and do not
// overlap; inputs are finite.
#ifndef RINGLM_INFERENCE_OPS_QUANT_H_
#define RINGLM_INFERENCE_OPS_QUANT_H_

#include <cstddef>
#include <cstdint>

#include "gguf/tensor_type.h"

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

inline constexpr int64_t kQ5_0BlockSize = 32;

// 32 values: the low 4 bits as in BlockQ4_0, bit 4 of value j in bit j of the
// little-endian qh; value = (q - 16) * Fp16ToFp32(d).
struct BlockQ5_0 {
  uint16_t d;  // f16 scale
  uint8_t qh[4];
  uint8_t qs[kQ5_0BlockSize / 2];
};
static_assert(sizeof(BlockQ5_0) == 22, "BlockQ5_0 must match ggml's block_q5_0");

// The 5-bit value j (0..31) of a Q5_0 or Q5_1 block: the nibble of qs (value
// j + 16 in the high one) and bit j of the little-endian qh.
inline int FiveBitValue(const uint8_t* qs, const uint8_t* qh, int j) {
  const int low = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return low | (((qh[j / 8] >> (j % 8)) & 1) << 4);
}

// The 5-bit value j (0..31) of a Q5_0 block, minus 16.
inline int Q5_0Value(const BlockQ5_0& b, int j) { return FiveBitValue(b.qs, b.qh, j) - 16; }

inline constexpr int64_t kQ4_1BlockSize = 32;

// 32 values: value = q * Fp16ToFp32(d) + Fp16ToFp32(m), q in [0, 15]: value j
// in the low nibble of qs[j], value j + 16 in its high nibble.
struct BlockQ4_1 {
  uint16_t d;  // f16 scale
  uint16_t m;  // f16 minimum
  uint8_t qs[kQ4_1BlockSize / 2];
};
static_assert(sizeof(BlockQ4_1) == 20, "BlockQ4_1 must match ggml's block_q4_1");

inline constexpr int64_t kQ5_1BlockSize = 32;

// 32 values: value = q * Fp16ToFp32(d) + Fp16ToFp32(m), q in [0, 31]: the low
// 4 bits as in BlockQ4_1, bit 4 of value j in bit j of the little-endian qh.
struct BlockQ5_1 {
  uint16_t d;  // f16 scale
  uint16_t m;  // f16 minimum
  uint8_t qh[4];
  uint8_t qs[kQ5_1BlockSize / 2];
};
static_assert(sizeof(BlockQ5_1) == 24, "BlockQ5_1 must match ggml's block_q5_1");

// The 5-bit value j (0..31) of a Q5_1 block.
inline int Q5_1Value(const BlockQ5_1& b, int j) { return FiveBitValue(b.qs, b.qh, j); }

// Activations for Q4_1/Q5_1 dot products: Q8_0's d and qs, plus
// s = d * sum(qs) as f16 (d before its rounding to f16).
struct BlockQ8_1 {
  uint16_t d;  // f16
  uint16_t s;  // f16
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_1) == 36, "BlockQ8_1 must match ggml's block_q8_1");

// IQ4_NL: blocks of 32 values, each a 4-bit index into kIq4NlValues.
inline constexpr int64_t kIQ4_NLBlockSize = 32;

// The 16 levels of IQ4_NL and IQ4_XS, part of the format's definition (a
// non-uniform grid, denser near zero, from -127 to 113). value = d * level.
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// 32 values: value j = d * kIq4NlValues[index j]; index j in the low nibble
// of qs[j], index j + 16 in its high nibble.
struct BlockIQ4_NL {
  uint16_t d;  // f16
  uint8_t qs[kIQ4_NLBlockSize / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18, "BlockIQ4_NL must match ggml's block_iq4_nl");

// K-quants: super-blocks of 256 values (ggml's QK_K).
inline constexpr int64_t kQK_K = 256;

// 8 sub-blocks of 32: value = d * sc[j] * q - dmin * m[j], q in [0, 15];
// the 6-bit sc/m are packed in `scales` (ggml's get_scale_min_k4). qs[32c + l]
// holds value 64c + l in its low nibble and 64c + 32 + l in its high nibble.
struct BlockQ4_K {
  uint16_t d;     // f16 scale of the sub-block scales
  uint16_t dmin;  // f16 scale of the sub-block mins
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "BlockQ4_K must match ggml's block_q4_K");

// 8 sub-blocks of 32: value = d * sc[j] * q - dmin * m[j], q in [0, 31]: the
// low 4 bits as in BlockQ4_K::qs, bit 4 of value 64c + l in bit 2c of qh[l]
// and of value 64c + 32 + l in bit 2c + 1; sc/m packed as in BlockQ4_K.
struct BlockQ5_K {
  uint16_t d;     // f16 scale of the sub-block scales
  uint16_t dmin;  // f16 scale of the sub-block mins
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "BlockQ5_K must match ggml's block_q5_K");

// 16 sub-blocks of 16: value = d * (s[j] - 32) * (q - 4), q in [0, 7]: the
// low 2 bits of value 128h + 32k + l in bits 2k..2k+1 of qs[32h + l], the
// high bit of value p in bit p / 32 of hmask[p % 32]. The 6-bit s[j] are the
// low nibble of scales[j] (j < 8) or the high one of scales[j - 8], and 2
// high bits from bits 2 (j / 4) of scales[8 + j % 4].
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;  // f16
};
static_assert(sizeof(BlockQ3_K) == 110, "BlockQ3_K must match ggml's block_q3_K");

// 16 sub-blocks of 16: value = d * (scales[j] & 0xF) * q - dmin *
// (scales[j] >> 4), q in [0, 3], packed as BlockQ3_K::qs.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;     // f16 scale of the sub-block scales
  uint16_t dmin;  // f16 scale of the sub-block mins
};
static_assert(sizeof(BlockQ2_K) == 84, "BlockQ2_K must match ggml's block_q2_K");

// 16 sub-blocks of 16: value = d * scales[j] * (q - 32), q 6 bits: low 4 in
// ql, high 2 in qh (ggml's block_q6_K bit layout).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;  // f16
};
static_assert(sizeof(BlockQ6_K) == 210, "BlockQ6_K must match ggml's block_q6_K");

// Activations for K-quant dot products: value = d * qs[j]; bsums[i] is the
// sum of qs[16i .. 16i + 15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "BlockQ8_K must match ggml's block_q8_K");

// IQ4_XS: 8 sub-blocks of 32 values, each packed as one BlockIQ4_NL::qs
// (16 bytes), with a 6-bit scale: value = d * (ls[j] - 32) * level, where
// ls[j] = low nibble (j even) or high nibble (j odd) of scales_l[j / 2], plus
// bits 2j..2j+1 of scales_h as bits 4-5.
struct BlockIQ4_XS {
  uint16_t d;  // f16 super-block scale
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136, "BlockIQ4_XS must match ggml's block_iq4_xs");

// Sub-block j's signed scale ls[j] - 32 (-32..31) of an IQ4_XS block.
inline int IQ4_XSScale(const BlockIQ4_XS& b, int j) {
  const int low = (b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
  return (low | (((b.scales_h >> (2 * j)) & 3) << 4)) - 32;
}

// ggml's quantize_iq4_nl / quantize_iq4_xs without an importance matrix (what
// llama-quantize writes): per 32 values, weights x^2, a first scale from the
// value of largest magnitude, then 15 trial scales (level[0] + t) / max for
// t in -7..7, keeping the one of the best weighted least squares; IQ4_XS then
// rounds the 8 scales to 6 bits against the super-block scale -max_scale / 32
// and re-picks the levels. Preconditions: n % 32 == 0 (IQ4_NL), n % 256 == 0
// (IQ4_XS).
void QuantizeRowIQ4_NL(const float* x, void* dst, int64_t n);
void QuantizeRowIQ4_XS(const float* x, void* dst, int64_t n);

// ggml's quantize_row_q{2,3,4,5,6}_K_ref (llama-quantize without an
// importance matrix). Precondition: n % 256 == 0.
void QuantizeRowQ2_K(const float* x, void* dst, int64_t n);
void QuantizeRowQ3_K(const float* x, void* dst, int64_t n);
void QuantizeRowQ4_K(const float* x, void* dst, int64_t n);
void QuantizeRowQ5_K(const float* x, void* dst, int64_t n);
void QuantizeRowQ6_K(const float* x, void* dst, int64_t n);

// ggml's quantize_row_q8_K_ref, which ggml-cpu also uses for activations on
// x86: iscale = -127 / max (max = value of largest magnitude), q =
// min(127, nearest_int(iscale * x)) (ties to even), d = 1 / iscale.
// Precondition: n % 256 == 0.
void QuantizeRowQ8_K(const float* x, void* dst, int64_t n);

// Unpacks sub-block j's 6-bit scale and min from BlockQ4_K::scales.
inline void Q4_KScaleMin(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Sub-block j's 6-bit scale (0..63, before the - 32) from BlockQ3_K::scales.
inline int Q3_KScale(int j, const uint8_t* q) {
  const int low = j < 8 ? (q[j] & 0xF) : (q[j - 8] >> 4);
  return low | (((q[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

// The 2-bit value p (0..255) of BlockQ2_K::qs / BlockQ3_K::qs.
inline int TwoBits(const uint8_t* qs, int p) {
  return (qs[32 * (p / 128) + p % 32] >> (2 * ((p % 128) / 32))) & 3;
}

// ggml's quantize_row_q8_0_ref (what llama-quantize writes into a GGUF):
// d = amax / 127, q = roundf(x * (1 / d)) (ties away from zero).
void QuantizeRowQ8_0(const float* x, void* dst, int64_t n);

// ggml's quantize_row_q4_0_ref: d = max / -8 where max is the value of largest
// magnitude (first one on ties), q = min(15, (int8_t)(x * (1 / d) + 8.5f)).
void QuantizeRowQ4_0(const float* x, void* dst, int64_t n);

// ggml's quantize_row_q5_0_ref: d = max / -16 where max is the value of
// largest magnitude (first one on ties), q = min(31, (int8_t)(x * (1 / d) +
// 16.5f)).
void QuantizeRowQ5_0(const float* x, void* dst, int64_t n);

// ggml's quantize_row_q4_1_ref / quantize_row_q5_1_ref: d = (max - min) / 15
// (or / 31), m = min, q = (uint8_t)((x - min) * (1 / d) + 0.5f) (Q4_1 capped
// at 15).
void QuantizeRowQ4_1(const float* x, void* dst, int64_t n);
void QuantizeRowQ5_1(const float* x, void* dst, int64_t n);

// How ggml-cpu quantizes *activations* to Q8_0 on x86 (the AVX/AVX2
// quantize_row_q8_0, which differs from the reference quantizer):
// d = amax / 127.f, q = nearbyint(x * (127.f / amax)) (ties to even), so
// q is in [-127, 127]; a NaN product gives 0. MatMul uses this for Q8_0 and
// Q4_0 weights. Runs the AVX2 form where the CPU has it, with the same bytes.
void QuantizeRowQ8_0Activations(const float* x, void* dst, int64_t n);

// ggml-cpu's x86 quantize_row_q8_1 (activations of Q4_1/Q5_1 weights): d
// and qs as QuantizeRowQ8_0Activations, s = f16(d * sum of qs), d unrounded.
void QuantizeRowQ8_1Activations(const float* x, void* dst, int64_t n);

// Bytes taken by a row of `n` values of `type` (n / block_size * block_bytes).
// Precondition: `type` is a TensorType enumerator; n is a multiple of its
// block size.
size_t RowBytes(TensorType type, int64_t n);

// Writes one row of `n` floats as `type`, with the reference quantizer that
// llama-quantize uses for weights (F32: copy; F16/BF16: round to nearest
// even; Q8_0/Q4_0: QuantizeRowQ8_0/QuantizeRowQ4_0; K-quants: QuantizeRowQ*_K).
// `dst` must hold RowBytes(type, n) bytes.
// Precondition: IsComputeSupported(type); n is a multiple of the block size.
void QuantizeRow(TensorType type, const float* src, void* dst, int64_t n);

// Expands one row of `n` values of `type` into floats, as ggml's to_float.
// Precondition: IsComputeSupported(type).
void DequantizeRow(TensorType type, const void* src, float* dst, int64_t n);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_QUANT_H_
