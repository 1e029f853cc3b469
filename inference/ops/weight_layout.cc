#include "inference/ops/weight_layout.h"

#include <cassert>
#include <cstring>

#include "inference/ops/qgemm_internal.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

static_assert(kQ4_0x8RecordBytes == 8 * sizeof(BlockQ4_0));

// Where row i (< 8) of a group keeps its scale and its nibbles in record b.
uint8_t* ScaleOf(uint8_t* group, int64_t b, int i) {
  return group + b * kQ4_0x8RecordBytes + 2 * i;
}
uint8_t* NibblesOf(uint8_t* group, int64_t b, int i) {
  return group + b * kQ4_0x8RecordBytes + 16 + 16 * i;
}

// Copies between GGUF rows and kQ4_0x8 groups, in the direction `pack`.
void Convert(const void* src, int64_t rows, int64_t cols, void* dst, bool pack) {
  assert(rows % 8 == 0 && cols % kQ4_0BlockSize == 0);
  const int64_t nb = cols / kQ4_0BlockSize;
  const size_t row_bytes = RowBytes(TensorType::kQ4_0, cols);
  auto* gguf = static_cast<uint8_t*>(pack ? const_cast<void*>(src) : dst);
  auto* x8 = static_cast<uint8_t*>(pack ? dst : const_cast<void*>(src));
  for (int64_t g = 0; g < rows / 8; ++g) {
    uint8_t* group = x8 + g * 8 * row_bytes;
    for (int i = 0; i < 8; ++i) {
      auto* row = reinterpret_cast<BlockQ4_0*>(gguf + (8 * g + i) * row_bytes);
      for (int64_t b = 0; b < nb; ++b) {
        if (pack) {
          std::memcpy(ScaleOf(group, b, i), &row[b].d, sizeof(row[b].d));
          std::memcpy(NibblesOf(group, b, i), row[b].qs, sizeof(row[b].qs));
        } else {
          std::memcpy(&row[b].d, ScaleOf(group, b, i), sizeof(row[b].d));
          std::memcpy(row[b].qs, NibblesOf(group, b, i), sizeof(row[b].qs));
        }
      }
    }
  }
}

}  // namespace

bool LayoutFits(WeightLayout layout, TensorType type, int64_t rows) {
  return layout == WeightLayout::kGguf || (type == TensorType::kQ4_0 && rows % 8 == 0);
}

WeightLayout FastestLayout(TensorType type, int64_t rows) {
  if (!LayoutFits(WeightLayout::kQ4_0x8, type, rows)) return WeightLayout::kGguf;
  const QGemmTarget target = ActiveQGemmTarget();
  return target != QGemmTarget::kNone && QGemmHasKind(target, QGemmKind::kQ4_0x8)
             ? WeightLayout::kQ4_0x8
             : WeightLayout::kGguf;
}

void PackQ4_0x8(const void* src, int64_t rows, int64_t cols, void* dst) {
  Convert(src, rows, cols, dst, /*pack=*/true);
}

void UnpackQ4_0x8(const void* src, int64_t rows, int64_t cols, void* dst) {
  Convert(src, rows, cols, dst, /*pack=*/false);
}

}  // namespace ringlm
