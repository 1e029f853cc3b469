// How a weight matrix's bytes lie in memory for MatMul (matmul.h): as in the
// GGUF file, or interleaved for the kernels that read it fastest that way.
#ifndef RINGLM_INFERENCE_OPS_WEIGHT_LAYOUT_H_
#define RINGLM_INFERENCE_OPS_WEIGHT_LAYOUT_H_

#include <cstddef>
#include <cstdint>

#include "gguf/tensor_type.h"

namespace ringlm {

enum class WeightLayout {
  // GGUF's: rows one after another, each its blocks in order.
  kGguf,
  // Q4_0 of a multiple of 8 rows, each 8 rows (a group) interleaved: block b
  // of the group's rows is one record of kQ4_0x8RecordBytes, [the 8 rows'
  // f16 scales, row 0 first | the 8 rows' 16 bytes of nibbles, row 0
  // first], and the records follow in block order. A decode tile then reads
  // one stream front to back instead of 8 rows side by side, and loads 8
  // scales and 4 rows of nibbles at once. A group takes the bytes its rows
  // take in the file, at the same offset, so an expert's matrix or a fused
  // tensor's part that starts at a multiple of 8 rows starts where it does
  // there. The numbers are the file's, so are MatMul's results.
  kQ4_0x8,
};

inline constexpr size_t kQ4_0x8RecordBytes = 8 * 18;

// Whether `layout` can hold a matrix of this type and row count.
bool LayoutFits(WeightLayout layout, TensorType type, int64_t rows);

// The layout MatMul reads fastest on this CPU, with the kernels it runs now
// (cpu_target.h): kQ4_0x8 for Q4_0 of a multiple of 8 rows where those
// kernels read it, else kGguf. Any layout gives the same results anywhere;
// another one is only slower.
WeightLayout FastestLayout(TensorType type, int64_t rows);

// Copies `rows` GGUF rows of `cols` Q4_0 values from `src` to `dst` as
// kQ4_0x8, and back. Preconditions: rows % 8 == 0, cols % 32 == 0, the
// buffers hold RowBytes(kQ4_0, cols) * rows bytes and do not overlap.
void PackQ4_0x8(const void* src, int64_t rows, int64_t cols, void* dst);
void UnpackQ4_0x8(const void* src, int64_t rows, int64_t cols, void* dst);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_WEIGHT_LAYOUT_H_
