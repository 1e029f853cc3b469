// QGemm: packs the Q8_0 activations of all tokens once, then walks tiles of
// weight rows x token pairs with the micro-kernels of qgemm_x86.cc or
// qgemm_arm.cc. Each output is computed whole by one kernel call over all K
// (no split-K), so the tiling and the thread split change which call
// computes an output, never how (see qgemm_internal.h).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "hwy/targets.h"
#include "inference/ops/fp16.h"
#include "inference/ops/matmul_internal.h"
#include "inference/ops/qgemm_internal.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

// Weight rows per cache block: a block's rows are applied to every token
// tile before the next block, so they stay in L1/L2 (32 rows of 2048 Q8_0
// values = 68 KB) while the packed activations stream from L2.
constexpr int64_t kRowBlock = 32;

struct alignas(64) Record {
  uint8_t bytes[kQGemmRecordBytes];
};

// Quantizes token rows [t0, t1) of x into packed records (see the header).
void PackTokens(const float* x, int64_t cols, int64_t n_tokens, int64_t t0, int64_t t1,
                bool offset128, Record* packed) {
  const int64_t nb = cols / kQ8_0BlockSize;
  thread_local std::vector<BlockQ8_0> row;
  if (row.size() < static_cast<size_t>(nb)) row.resize(nb);
  for (int64_t t = t0; t < t1; ++t) {
    Record* pair = packed + (t / 2) * nb;
    const int half = static_cast<int>(t % 2);
    if (t < n_tokens) {
      QuantizeRowQ8_0Activations(x + t * cols, row.data(), cols);
    }
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* qs = pair[b].bytes + 32 * half;
      float* d = reinterpret_cast<float*>(pair[b].bytes + 64 + 32 * half);
      if (t >= n_tokens) {  // padding of an odd count: x = 0
        std::memset(qs, offset128 ? 0x80 : 0, 32);
        std::fill(d, d + 8, 0.0f);
        continue;
      }
      std::memcpy(qs, row[b].qs, 32);
      if (offset128) {
        for (int k = 0; k < 32; ++k) qs[k] ^= 0x80;  // x + 128 as unsigned
      }
      std::fill(d, d + 8, Fp16ToFp32(row[b].d));
    }
  }
}

}  // namespace

const char* QGemmTargetName(QGemmTarget target) {
  switch (target) {
    case QGemmTarget::kAvx512Vnni:
      return "avx512vnni";
    case QGemmTarget::kAvx2:
      return "avx2";
    case QGemmTarget::kNeonDot:
      return "neondot";
    default:
      return "none";
  }
}

namespace {
// The enum's order is the ranking the cap compares.
std::atomic<int> qgemm_cap{static_cast<int>(QGemmTarget::kAvx512Vnni)};

QGemmTarget Capped(QGemmTarget t) {
  const int cap = qgemm_cap.load(std::memory_order_relaxed);
  if (static_cast<int>(t) <= cap) return t;
  // A cap of another architecture (kAvx2 on ARM, kNeonDot on x86) has no
  // kernels here: nothing below it runs either.
  const auto capped = static_cast<QGemmTarget>(cap);
  return GetQGemmKernels(capped) != nullptr ? capped : QGemmTarget::kNone;
}
}  // namespace

void SetQGemmTargetCap(QGemmTarget cap) { qgemm_cap.store(static_cast<int>(cap)); }

QGemmTarget ActiveQGemmTarget() {
#if defined(__x86_64__)
  // Not hwy::SupportedTargets(): that runs CPUID on every call (a VM exit
  // under virtualisation), and MatMul asks on every call.
  const int64_t hwy_targets = DispatchedHwyTarget();
  constexpr int64_t kAvx3OrBetter = HWY_AVX3 | HWY_AVX3_DL
#ifdef HWY_AVX3_ZEN4
                                    | HWY_AVX3_ZEN4
#endif
      ;
  static const bool vnni = CpuSupports(QGemmTarget::kAvx512Vnni);
  static const bool avx2 = CpuSupports(QGemmTarget::kAvx2);
  if ((hwy_targets & kAvx3OrBetter) != 0 && vnni) return Capped(QGemmTarget::kAvx512Vnni);
  if ((hwy_targets & (kAvx3OrBetter | HWY_AVX2)) != 0 && avx2) return Capped(QGemmTarget::kAvx2);
#elif defined(__aarch64__)
  // NEON is the ARM64 baseline, so only a forced HWY_EMU128/HWY_SCALAR
  // (tests) turns this off; SVE targets are not compiled, but would keep the
  // NEON dotprod kernels too.
  constexpr int64_t kArmSimd = HWY_NEON | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128;
  static const bool neon_dot =
      GetQGemmKernels(QGemmTarget::kNeonDot) != nullptr && CpuSupports(QGemmTarget::kNeonDot);
  if ((DispatchedHwyTarget() & kArmSimd) != 0 && neon_dot) return Capped(QGemmTarget::kNeonDot);
#endif
  return QGemmTarget::kNone;
}

TensorType QGemmWeightType(QGemmKind kind) {
  switch (kind) {
    case QGemmKind::kQ8_0:
      return TensorType::kQ8_0;
    case QGemmKind::kQ5_0:
      return TensorType::kQ5_0;
    case QGemmKind::kIQ4_NL:
      return TensorType::kIQ4_NL;
    case QGemmKind::kQ4_0:
    case QGemmKind::kQ4_0Repacked:
    case QGemmKind::kQ4_0x8:
      break;
  }
  return TensorType::kQ4_0;
}

bool QGemmHasKind(QGemmTarget target, QGemmKind kind) {
  const QGemmKernels* k = GetQGemmKernels(target);
  if (k == nullptr) return false;
  const QGemmKernels::Tile tile = k->tile[static_cast<int>(kind)];
  return tile.rows > 0 && k->kernel[static_cast<int>(kind)][tile.rows - 1][0] != nullptr;
}

int AvailableQGemmTargets(QGemmTarget out[3]) {
  int n = 0;
  // At most two of these have kernels in one build (x86: the first two).
  for (QGemmTarget t : {QGemmTarget::kAvx512Vnni, QGemmTarget::kAvx2, QGemmTarget::kNeonDot}) {
    if (GetQGemmKernels(t) != nullptr && CpuSupports(t)) out[n++] = t;
  }
  out[n++] = QGemmTarget::kNone;
  return n;
}

void QGemm(QGemmTarget target, QGemmKind kind, const void* w, int64_t rows, int64_t cols,
           const float* x, int64_t n_tokens, float* y, ThreadPool* pool) {
  const QGemmKernels& k = *GetQGemmKernels(target);
  const int ki = static_cast<int>(kind);
  const int64_t nb = cols / kQ8_0BlockSize;
  const size_t row_bytes = RowBytes(QGemmWeightType(kind), cols);
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t n_pairs = (n_tokens + 1) / 2;
  const bool offset128 = k.x_offset128 && (kind == QGemmKind::kQ8_0 || kind == QGemmKind::kIQ4_NL);

  // Packed activations, reused across calls on this thread.
  thread_local std::vector<Record> packed_scratch;
  const size_t needed = static_cast<size_t>(n_pairs * nb);
  if (packed_scratch.size() < needed) packed_scratch.resize(needed);
  Record* packed = packed_scratch.data();
  RunParallel(pool, 2 * n_pairs, [&](int64_t t0, int64_t t1) {
    PackTokens(x, cols, n_tokens, t0, t1, offset128, packed);
  });
  // A chunk may end inside a pair: its neighbour then writes the other half
  // of the same records, never the same bytes.

  const size_t pair_stride = static_cast<size_t>(nb) * kQGemmRecordBytes;
  const auto* xp = reinterpret_cast<const uint8_t*>(packed);
  const QGemmKernels::Tile tile = k.tile[ki];
  const int64_t n_groups = (rows + tile.rows - 1) / tile.rows;
  if (n_tokens == 1 && k.one_token[ki][kQGemmMaxRowPairs - 1] != nullptr) {
    // Decode: tiles of 2 * kQGemmMaxRowPairs rows x 1 token (kQ4_0x8: one
    // group each); an odd last row takes the pair kernel (with its padding
    // token).
    constexpr int64_t kTile = 2 * kQGemmMaxRowPairs;
    RunParallel(pool, (rows + kTile - 1) / kTile, [&](int64_t g0, int64_t g1) {
      float out[kTile];
      for (int64_t r0 = g0 * kTile; r0 < std::min(rows, g1 * kTile); r0 += kTile) {
        const int nr = static_cast<int>(std::min<int64_t>(kTile, rows - r0));
        if (nr >= 2) {
          k.one_token[ki][nr / 2 - 1](wb + r0 * row_bytes, row_bytes, xp, pair_stride, nb, out, 1);
        }
        if (nr % 2 != 0) {
          float pair_out[2 * kQGemmMaxPairs];
          k.kernel[ki][0][0](wb + (r0 + nr - 1) * row_bytes, row_bytes, xp, pair_stride, nb,
                             pair_out, 2);
          out[nr - 1] = pair_out[0];
        }
        std::copy(out, out + nr, y + r0);
      }
    });
    return;
  }
  RunParallel(pool, n_groups, [&](int64_t g0, int64_t g1) {
    const int64_t r_end = std::min(rows, g1 * tile.rows);
    float out[kQGemmMaxRows * 2 * kQGemmMaxPairs];
    const int out_stride = 2 * kQGemmMaxPairs;
    for (int64_t rb0 = g0 * tile.rows; rb0 < r_end; rb0 += kRowBlock) {
      const int64_t rb1 = std::min(r_end, rb0 + kRowBlock);
      for (int64_t p0 = 0; p0 < n_pairs; p0 += tile.pairs) {
        const int np = static_cast<int>(std::min<int64_t>(tile.pairs, n_pairs - p0));
        const int64_t t0 = 2 * p0;
        const int nt = static_cast<int>(std::min<int64_t>(2 * np, n_tokens - t0));
        for (int64_t r0 = rb0; r0 < rb1; r0 += tile.rows) {
          const int nr = static_cast<int>(std::min<int64_t>(tile.rows, rb1 - r0));
          k.kernel[ki][nr - 1][np - 1](wb + r0 * row_bytes, row_bytes, xp + p0 * pair_stride,
                                       pair_stride, nb, out, out_stride);
          for (int j = 0; j < nt; ++j) {
            float* y_row = y + (t0 + j) * rows + r0;
            for (int i = 0; i < nr; ++i) y_row[i] = out[i * out_stride + j];
          }
        }
      }
    }
  });
}

}  // namespace ringlm
