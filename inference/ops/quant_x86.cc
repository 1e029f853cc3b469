// AVX2 form of the activation quantizer (quant_internal.h). Every step is the
// scalar definition's, lane by lane: the max of |x| (maxps returns its second
// operand, the running max, where |x| is NaN, as std::max skips NaN), the
// same scalar d and 127 / amax, one product and one round to nearest even per
// value (nearbyint in the default rounding mode), NaN products as 0. So the
// bytes equal QuantizeRowQ8_0ActivationsScalar's; quant_test checks it.
// Hot: runs once per token row before every Q8_0/Q4_0 matmul.
#include "inference/ops/quant_internal.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cassert>

#include "inference/ops/fp16.h"
#include "inference/ops/quant.h"

namespace ringlm {

__attribute__((target("avx2"))) void QuantizeRowQ8_0ActivationsAvx2(const float* x, void* dst,
                                                                    int64_t n) {
  assert(n % kQ8_0BlockSize == 0);
  auto* y = static_cast<BlockQ8_0*>(dst);
  const int64_t nb = n / kQ8_0BlockSize;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  // packs works within 128-bit halves: this puts the 32 bytes back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQ8_0BlockSize;
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(xb + 8 * k);
      m = _mm256_max_ps(_mm256_andnot_ps(sign, v[k]), m);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    y[i].d = Fp32ToFp16(d);
    const __m256 idv = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 p = _mm256_mul_ps(v[k], idv);
      const __m256 r = _mm256_round_ps(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      q[k] = _mm256_cvtps_epi32(_mm256_and_ps(r, _mm256_cmp_ps(p, p, _CMP_ORD_Q)));
    }
    const __m256i q16 =
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs),
                        _mm256_permutevar8x32_epi32(q16, order));
  }
}

}  // namespace ringlm

#endif  // __x86_64__
