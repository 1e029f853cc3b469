// Tensor element types as numbered by GGUF/ggml, with their block layout.
//
// The table covers every type a GGUF file may name, so a file that holds a
// type we cannot compute with still parses (and `ringlm inspect` shows it);
// `IsComputeSupported` says which ones the kernels implement.
#ifndef RINGLM_GGUF_TENSOR_TYPE_H_
#define RINGLM_GGUF_TENSOR_TYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace ringlm {

enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
};

// How a type packs values: `block_size` values take `block_bytes` bytes.
struct TensorTypeTraits {
  TensorType type;
  std::string_view name;  // as llama.cpp prints it, e.g. "q8_0"
  uint32_t block_size;
  uint32_t block_bytes;
};

// Returns the traits of a raw GGUF type id, or nullopt for an unknown id.
constexpr std::optional<TensorTypeTraits> LookupTensorType(uint32_t id) {
  constexpr TensorTypeTraits kTable[] = {
      {TensorType::kF32, "f32", 1, 4},
      {TensorType::kF16, "f16", 1, 2},
      {TensorType::kQ4_0, "q4_0", 32, 18},
      {TensorType::kQ4_1, "q4_1", 32, 20},
      {TensorType::kQ5_0, "q5_0", 32, 22},
      {TensorType::kQ5_1, "q5_1", 32, 24},
      {TensorType::kQ8_0, "q8_0", 32, 34},
      {TensorType::kQ8_1, "q8_1", 32, 36},
      {TensorType::kQ2_K, "q2_K", 256, 84},
      {TensorType::kQ3_K, "q3_K", 256, 110},
      {TensorType::kQ4_K, "q4_K", 256, 144},
      {TensorType::kQ5_K, "q5_K", 256, 176},
      {TensorType::kQ6_K, "q6_K", 256, 210},
      {TensorType::kQ8_K, "q8_K", 256, 292},
      {TensorType::kIQ2_XXS, "iq2_xxs", 256, 66},
      {TensorType::kIQ2_XS, "iq2_xs", 256, 74},
      {TensorType::kIQ3_XXS, "iq3_xxs", 256, 98},
      {TensorType::kIQ1_S, "iq1_s", 256, 50},
      {TensorType::kIQ4_NL, "iq4_nl", 32, 18},
      {TensorType::kIQ3_S, "iq3_s", 256, 110},
      {TensorType::kIQ2_S, "iq2_s", 256, 82},
      {TensorType::kIQ4_XS, "iq4_xs", 256, 136},
      {TensorType::kI8, "i8", 1, 1},
      {TensorType::kI16, "i16", 1, 2},
      {TensorType::kI32, "i32", 1, 4},
      {TensorType::kI64, "i64", 1, 8},
      {TensorType::kF64, "f64", 1, 8},
      {TensorType::kIQ1_M, "iq1_m", 256, 56},
      {TensorType::kBF16, "bf16", 1, 2},
      {TensorType::kTQ1_0, "tq1_0", 256, 54},
      {TensorType::kTQ2_0, "tq2_0", 256, 66},
  };
  for (const auto& t : kTable) {
    if (static_cast<uint32_t>(t.type) == id) return t;
  }
  return std::nullopt;
}

// Traits of a known type. Precondition: `type` is a TensorType enumerator.
constexpr TensorTypeTraits TraitsOf(TensorType type) {
  return *LookupTensorType(static_cast<uint32_t>(type));
}

// True for the weight types the kernels in inference/ops implement.
constexpr bool IsComputeSupported(TensorType type) {
  switch (type) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
    case TensorType::kQ5_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_1:
    case TensorType::kIQ4_NL:
    case TensorType::kIQ4_XS:
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
      return true;
    default:
      return false;
  }
}

}  // namespace ringlm

#endif  // RINGLM_GGUF_TENSOR_TYPE_H_
