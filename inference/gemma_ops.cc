#include "inference/gemma_ops.h"

#include <array>
#include <cmath>

#include "inference/ops/fp16.h"

namespace ringlm {
namespace {

// GELU's tanh approximation as ggml evaluates it in float; the compiler
// of ggml's AVX2 build fuses 1 + (a x) x into one multiply-add.
float GeluTanh(float x) {
  constexpr float kCoefA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  const float inner = (kSqrt2OverPi * x) * std::fmaf(kCoefA * x, x, 1.0f);
  return (0.5f * x) * (1.0f + std::tanh(inner));
}

// The f16 GELU of every half (NaN halves map to whatever; never looked up).
const std::array<uint16_t, 1 << 16>& GeluTable() {
  static const std::array<uint16_t, 1 << 16>* table = [] {
    auto* t = new std::array<uint16_t, 1 << 16>;
    for (uint32_t h = 0; h < t->size(); ++h) {
      (*t)[h] = Fp32ToFp16(GeluTanh(Fp16ToFp32(static_cast<uint16_t>(h))));
    }
    return t;
  }();
  return *table;
}

}  // namespace

float GeluF16Table(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return Fp16ToFp32(GeluTable()[Fp32ToFp16(x)]);
}

void GeluGlu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = GeluF16Table(gate[i]) * up[i];
}

void SoftCapInPlace(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * inv) * cap;
}

}  // namespace ringlm
