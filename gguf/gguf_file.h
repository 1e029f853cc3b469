// Read-only access to a GGUF model file: header, metadata and tensor table.
//
// The parser validates the whole header and tensor table up front, so that
// every tensor a GgufFile hands out lies inside the file, is aligned, has a
// known type and does not overlap another tensor. Tensor data itself is never
// read by the parser (the mapping is demand-paged).
#ifndef RINGLM_GGUF_GGUF_FILE_H_
#define RINGLM_GGUF_GGUF_FILE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gguf/tensor_type.h"

namespace ringlm {

// GGUF metadata value types, numbered as in the file format.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "u32", "string", "array", ...; "unknown" for an id outside the enum.
std::string_view GgufValueTypeName(GgufValueType type);
// True for the eight integer types (not bool).
bool IsGgufIntegerType(GgufValueType type);
// Bytes one value of a fixed-size type takes in the file; 0 for string/array.
uint32_t GgufFixedSize(GgufValueType type);

// One metadata value: a scalar, a string or an array (possibly nested).
//
// Ownership: strings and array payloads are views into the bytes of the
// GgufFile that produced the value; the GgufFile must outlive the value and
// every copy of it. Values are immutable and safe to read from many threads.
class GgufValue {
 public:
  GgufValue() = default;  // a u8 zero; only useful as a placeholder

  GgufValueType type() const { return type_; }
  bool is_integer() const { return IsGgufIntegerType(type_); }

  // Plain accessors, meant for use after checking type(). They never fail:
  // on a type mismatch they return 0, false or an empty string.
  // AsUint64/AsInt64: the integer value (signed types sign-extended; a
  // negative value read as uint64 wraps, a u64 above INT64_MAX read as int64
  // wraps). AsDouble: f32, f64 or any integer type.
  uint64_t AsUint64() const;
  int64_t AsInt64() const;
  double AsDouble() const;
  bool AsBool() const;
  std::string_view AsString() const;

  // Checked conversions; nullopt when the type or the value does not fit.
  // TryUint64: any integer type with a non-negative value.
  std::optional<uint64_t> TryUint64() const;
  // TryInt64: any integer type whose value fits in int64_t.
  std::optional<int64_t> TryInt64() const;
  // TryDouble: f32, f64 or any integer type.
  std::optional<double> TryDouble() const;

  // Arrays. array_type() and array_size() are meaningful only for kArray.
  GgufValueType array_type() const { return elem_type_; }
  uint64_t array_size() const { return count_; }
  // Element `i` of an array. Precondition: type() == kArray and
  // i < array_size(); otherwise returns a default GgufValue (u8 zero).
  GgufValue array_element(uint64_t i) const;

  // Short human-readable form: scalars in full, strings quoted and cut at
  // 64 bytes, arrays as "[f32 x 512: 0, 0, 0, ...]".
  std::string DebugString() const;

 private:
  friend class GgufParser;
  friend class GgufFile;

  GgufValueType type_ = GgufValueType::kUint8;
  uint64_t bits_ = 0;     // scalar payload, zero-extended little-endian bits
  std::string_view str_;  // kString payload
  GgufValueType elem_type_ = GgufValueType::kUint8;
  uint64_t count_ = 0;                     // kArray element count
  const uint8_t* raw_ = nullptr;           // kArray of fixed-size elements
  std::vector<std::string_view> strings_;  // kArray of kString
  std::vector<GgufValue> nested_;          // kArray of kArray
};

// One entry of the tensor table. `data` points into the GgufFile's bytes.
struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ne[0] is the fastest-varying (row length)
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;  // relative to the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping

  uint64_t rows() const { return dims.empty() ? 0 : n_elements / dims[0]; }
};

// A parsed GGUF file (versions 2 and 3).
//
// Ownership: owns the file's bytes (a read-only MAP_PRIVATE mapping for
// Open, the given buffer for FromBytes); every GgufValue and tensor `data`
// pointer handed out views into them and must not outlive the GgufFile.
// Thread-safety: immutable after construction; all methods are const and
// safe to call concurrently.
// Guarantees after a successful parse: keys and tensor names are unique and
// non-empty; every tensor has 1..4 non-zero dims, a known type, ne[0] a
// multiple of the type's block size, an offset that is a multiple of
// alignment(), and data inside the file not overlapping any other tensor.
class GgufFile {
 public:
  // Limits the parser enforces on untrusted input.
  static constexpr uint64_t kMaxKeyLength = 1ull << 20;      // 1 MiB
  static constexpr uint64_t kMaxStringLength = 64ull << 20;  // 64 MiB
  static constexpr int kMaxArrayDepth = 4;                   // nesting levels
  static constexpr uint32_t kMaxDims = 4;
  static constexpr uint64_t kDefaultAlignment = 32;

  // Maps `path` read-only. NotFound if it does not exist; DataLoss (with a
  // byte offset) if it is not a well-formed GGUF file. Never reads tensor data.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Same parser over an owned buffer (tests, fuzzing).
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBytes(std::string bytes);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  // Absolute byte offset of the data section (tensor offsets are relative to it).
  uint64_t data_offset() const { return data_offset_; }
  // The bytes before the data section: header, metadata, tensor table.
  std::string_view header_bytes() const {
    return {reinterpret_cast<const char*>(bytes_), static_cast<size_t>(data_offset_)};
  }

  // All key/value pairs, in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  // nullptr when `key` is absent.
  const GgufValue* Find(std::string_view key) const;

  // Typed getters: NotFound "missing required key 'X'" when absent;
  // InvalidArgument "key 'X' has type T, expected ..." on a wrong type.
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  // Any integer type with a non-negative value.
  absl::StatusOr<uint64_t> GetUint(std::string_view key) const;
  // Any integer type whose value fits in int64_t.
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  // f32 or f64, also integers.
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  // Views into the file.
  absl::StatusOr<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  // f32 elements (f64 elements are narrowed).
  absl::StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;
  // Any integer element type; u64 elements above INT64_MAX are rejected.
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  // Tensors in file (table) order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  // nullptr when absent.
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  // NotFound "missing required tensor 'X'" when absent.
  absl::StatusOr<const GgufTensorInfo*> RequireTensor(std::string_view name) const;

  // Hints the kernel that the byte range of this tensor will be read soon
  // (madvise WILLNEED); a no-op for FromBytes. Precondition: `t` belongs to
  // this file.
  void Prefetch(const GgufTensorInfo& t) const;
  // Drops the tensor's pages from this process's resident memory (they are
  // read from the file again if touched). For a node whose layer range moved
  // away from it. No-op for FromBytes.
  void Release(const GgufTensorInfo& t) const;

 private:
  void Advise(const GgufTensorInfo& t, int advice) const;
  friend class GgufParser;
  GgufFile() = default;

  absl::StatusOr<const GgufValue*> FindTyped(std::string_view key) const;

  // Exactly one of these holds the bytes.
  std::string owned_;
  void* mapping_ = nullptr;

  const uint8_t* bytes_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  // Keyed by views into bytes_, which never move.
  std::unordered_map<std::string_view, size_t> key_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace ringlm

#endif  // RINGLM_GGUF_GGUF_FILE_H_
