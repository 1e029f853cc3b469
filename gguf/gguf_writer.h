// Builds GGUF v3 files: metadata, tensor table and aligned tensor data.
#ifndef RINGLM_GGUF_GGUF_WRITER_H_
#define RINGLM_GGUF_GGUF_WRITER_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gguf/gguf_file.h"
#include "gguf/tensor_type.h"

namespace ringlm {

// Accumulates metadata and tensors, then serializes them as a GGUF v3 file.
//
// Metadata keys keep the order of their first Set; setting a key again
// replaces its value in place. Tensors are laid out in AddTensor order, each
// at an offset that is a multiple of alignment(), with zero padding.
// Ownership: the writer copies (or takes) every value and tensor payload.
// Thread-safety: none; use from one thread (const methods may run
// concurrently with each other).
// The writer validates tensors (AddTensor) but not keys: the Set* methods
// accept anything, including an empty key or a "general.alignment" that
// disagrees with the layout, so tests can build deliberately malformed files.
class GgufWriter {
 public:
  GgufWriter() = default;

  // Alignment of the data section and of every tensor offset. Default 32;
  // any other value is also written as the u32 key general.alignment.
  // InvalidArgument unless `alignment` is a non-zero power of two.
  absl::Status SetAlignment(uint32_t alignment);
  uint32_t alignment() const { return alignment_; }

  // Scalars.
  void SetUint8(std::string_view key, uint8_t v);
  void SetInt8(std::string_view key, int8_t v);
  void SetUint16(std::string_view key, uint16_t v);
  void SetInt16(std::string_view key, int16_t v);
  void SetUint32(std::string_view key, uint32_t v);
  void SetInt32(std::string_view key, int32_t v);
  void SetUint64(std::string_view key, uint64_t v);
  void SetInt64(std::string_view key, int64_t v);
  void SetFloat32(std::string_view key, float v);
  void SetFloat64(std::string_view key, double v);
  void SetBool(std::string_view key, bool v);
  void SetString(std::string_view key, std::string_view v);

  // Arrays of one element type.
  void SetStringArray(std::string_view key, const std::vector<std::string>& v);
  void SetUint8Array(std::string_view key, std::span<const uint8_t> v);
  void SetInt8Array(std::string_view key, std::span<const int8_t> v);
  void SetUint16Array(std::string_view key, std::span<const uint16_t> v);
  void SetInt16Array(std::string_view key, std::span<const int16_t> v);
  void SetUint32Array(std::string_view key, std::span<const uint32_t> v);
  void SetInt32Array(std::string_view key, std::span<const int32_t> v);
  void SetUint64Array(std::string_view key, std::span<const uint64_t> v);
  void SetInt64Array(std::string_view key, std::span<const int64_t> v);
  void SetFloatArray(std::string_view key, std::span<const float> v);
  void SetFloat64Array(std::string_view key, std::span<const double> v);
  void SetBoolArray(std::string_view key, const std::vector<bool>& v);

  // Copies a value read from a GgufFile (any type, nested arrays included).
  void SetValue(std::string_view key, const GgufValue& v);
  // Writes value type id `type` (not checked) followed by `payload` verbatim.
  // For nested arrays built by hand and for deliberately malformed files.
  void SetRaw(std::string_view key, uint32_t type, std::string payload);
  // Removes `key`; false if it was not set.
  bool Remove(std::string_view key);

  // Adds a tensor with GGUF dims (ne[0] fastest) and its raw bytes.
  // InvalidArgument for an empty or duplicate name, 0 or more than 4 dims, a
  // zero dim, ne[0] not a multiple of the type's block size, or a byte count
  // that does not match the shape.
  absl::Status AddTensor(std::string_view name, std::vector<uint64_t> dims, TensorType type,
                         std::string bytes);

  // The whole file. Memory: holds a second copy of all tensor bytes.
  std::string ToBytes() const;
  // Writes the file to `path.tmp.<pid>` beside `path`, then renames it over
  // `path`, so readers never see a partial file.
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    TensorType type;
    std::string bytes;
  };

  // Replaces or appends `key` with an encoded (type id + payload) value.
  void Put(std::string_view key, uint32_t type, std::string payload);
  template <typename T>
  void PutArray(std::string_view key, GgufValueType elem, std::span<const T> v);
  // Header, metadata, tensor infos and padding up to the data section.
  std::string HeaderBytes() const;
  uint64_t Padding(uint64_t n) const { return (alignment_ - n % alignment_) % alignment_; }

  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, std::string>> kvs_;  // key -> type id + payload
  std::vector<Tensor> tensors_;
};

}  // namespace ringlm

#endif  // RINGLM_GGUF_GGUF_WRITER_H_
