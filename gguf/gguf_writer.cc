// GgufWriter: serializes metadata and tensors as GGUF v3.
#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>

#include "gguf/gguf_bytes.h"

namespace ringlm {

using gguf_internal::AppendLe;
using gguf_internal::Cat;

namespace {

constexpr uint32_t kVersion = 3;

void AppendString(std::string* out, std::string_view s) {
  AppendLe(out, s.size(), 8);
  out->append(s);
}

uint32_t TypeId(GgufValueType t) { return static_cast<uint32_t>(t); }

// Appends the payload (no type id) of `v`.
void AppendPayload(std::string* out, const GgufValue& v) {
  const GgufValueType t = v.type();
  switch (t) {
    case GgufValueType::kString:
      AppendString(out, v.AsString());
      return;
    case GgufValueType::kBool:
      AppendLe(out, v.AsBool() ? 1 : 0, 1);
      return;
    case GgufValueType::kFloat32:
      AppendLe(out, std::bit_cast<uint32_t>(static_cast<float>(v.AsDouble())), 4);
      return;
    case GgufValueType::kFloat64:
      AppendLe(out, std::bit_cast<uint64_t>(v.AsDouble()), 8);
      return;
    case GgufValueType::kArray:
      AppendLe(out, TypeId(v.array_type()), 4);
      AppendLe(out, v.array_size(), 8);
      for (uint64_t i = 0; i < v.array_size(); ++i) AppendPayload(out, v.array_element(i));
      return;
    default: {
      // Integers: two's complement bits, truncated to the type's width.
      AppendLe(out, v.AsUint64(), GgufFixedSize(t));
      return;
    }
  }
}

// Writes all of `data` to `fd`, retrying short writes.
absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, Cat("cannot write '", path, "'"));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GgufWriter::SetAlignment(uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError(
        Cat("alignment ", alignment, " is not a non-zero power of two"));
  }
  alignment_ = alignment;
  if (alignment == 32) {
    Remove("general.alignment");
  } else {
    SetUint32("general.alignment", alignment);
  }
  return absl::OkStatus();
}

void GgufWriter::Put(std::string_view key, uint32_t type, std::string payload) {
  std::string encoded;
  encoded.reserve(4 + payload.size());
  AppendLe(&encoded, type, 4);
  encoded += payload;
  for (auto& [k, v] : kvs_) {
    if (k == key) {
      v = std::move(encoded);
      return;
    }
  }
  kvs_.emplace_back(std::string(key), std::move(encoded));
}

bool GgufWriter::Remove(std::string_view key) {
  for (auto it = kvs_.begin(); it != kvs_.end(); ++it) {
    if (it->first == key) {
      kvs_.erase(it);
      return true;
    }
  }
  return false;
}

void GgufWriter::SetRaw(std::string_view key, uint32_t type, std::string payload) {
  Put(key, type, std::move(payload));
}

void GgufWriter::SetValue(std::string_view key, const GgufValue& v) {
  std::string payload;
  AppendPayload(&payload, v);
  Put(key, TypeId(v.type()), std::move(payload));
}

#define RINGLM_GGUF_SCALAR_SETTER(Name, CType, Enum, Bits) \
  void GgufWriter::Name(std::string_view key, CType v) {   \
    std::string payload;                                   \
    AppendLe(&payload, Bits, GgufFixedSize(Enum));         \
    Put(key, TypeId(Enum), std::move(payload));            \
  }

RINGLM_GGUF_SCALAR_SETTER(SetUint8, uint8_t, GgufValueType::kUint8, v)
RINGLM_GGUF_SCALAR_SETTER(SetInt8, int8_t, GgufValueType::kInt8, static_cast<uint64_t>(v))
RINGLM_GGUF_SCALAR_SETTER(SetUint16, uint16_t, GgufValueType::kUint16, v)
RINGLM_GGUF_SCALAR_SETTER(SetInt16, int16_t, GgufValueType::kInt16, static_cast<uint64_t>(v))
RINGLM_GGUF_SCALAR_SETTER(SetUint32, uint32_t, GgufValueType::kUint32, v)
RINGLM_GGUF_SCALAR_SETTER(SetInt32, int32_t, GgufValueType::kInt32, static_cast<uint64_t>(v))
RINGLM_GGUF_SCALAR_SETTER(SetUint64, uint64_t, GgufValueType::kUint64, v)
RINGLM_GGUF_SCALAR_SETTER(SetInt64, int64_t, GgufValueType::kInt64, static_cast<uint64_t>(v))
RINGLM_GGUF_SCALAR_SETTER(SetFloat32, float, GgufValueType::kFloat32, std::bit_cast<uint32_t>(v))
RINGLM_GGUF_SCALAR_SETTER(SetFloat64, double, GgufValueType::kFloat64, std::bit_cast<uint64_t>(v))
RINGLM_GGUF_SCALAR_SETTER(SetBool, bool, GgufValueType::kBool, v ? 1u : 0u)
#undef RINGLM_GGUF_SCALAR_SETTER

void GgufWriter::SetString(std::string_view key, std::string_view v) {
  std::string payload;
  AppendString(&payload, v);
  Put(key, TypeId(GgufValueType::kString), std::move(payload));
}

void GgufWriter::SetStringArray(std::string_view key, const std::vector<std::string>& v) {
  std::string payload;
  AppendLe(&payload, TypeId(GgufValueType::kString), 4);
  AppendLe(&payload, v.size(), 8);
  for (const std::string& s : v) AppendString(&payload, s);
  Put(key, TypeId(GgufValueType::kArray), std::move(payload));
}

template <typename T>
void GgufWriter::PutArray(std::string_view key, GgufValueType elem, std::span<const T> v) {
  std::string payload;
  const uint32_t size = GgufFixedSize(elem);
  payload.reserve(12 + v.size() * size);
  AppendLe(&payload, TypeId(elem), 4);
  AppendLe(&payload, v.size(), 8);
  for (const T& x : v) {
    if constexpr (std::is_same_v<T, float>) {
      AppendLe(&payload, std::bit_cast<uint32_t>(x), size);
    } else if constexpr (std::is_same_v<T, double>) {
      AppendLe(&payload, std::bit_cast<uint64_t>(x), size);
    } else {
      AppendLe(&payload, static_cast<uint64_t>(x), size);
    }
  }
  Put(key, TypeId(GgufValueType::kArray), std::move(payload));
}

void GgufWriter::SetUint8Array(std::string_view key, std::span<const uint8_t> v) {
  PutArray(key, GgufValueType::kUint8, v);
}
void GgufWriter::SetInt8Array(std::string_view key, std::span<const int8_t> v) {
  PutArray(key, GgufValueType::kInt8, v);
}
void GgufWriter::SetUint16Array(std::string_view key, std::span<const uint16_t> v) {
  PutArray(key, GgufValueType::kUint16, v);
}
void GgufWriter::SetInt16Array(std::string_view key, std::span<const int16_t> v) {
  PutArray(key, GgufValueType::kInt16, v);
}
void GgufWriter::SetUint32Array(std::string_view key, std::span<const uint32_t> v) {
  PutArray(key, GgufValueType::kUint32, v);
}
void GgufWriter::SetInt32Array(std::string_view key, std::span<const int32_t> v) {
  PutArray(key, GgufValueType::kInt32, v);
}
void GgufWriter::SetUint64Array(std::string_view key, std::span<const uint64_t> v) {
  PutArray(key, GgufValueType::kUint64, v);
}
void GgufWriter::SetInt64Array(std::string_view key, std::span<const int64_t> v) {
  PutArray(key, GgufValueType::kInt64, v);
}
void GgufWriter::SetFloatArray(std::string_view key, std::span<const float> v) {
  PutArray(key, GgufValueType::kFloat32, v);
}
void GgufWriter::SetFloat64Array(std::string_view key, std::span<const double> v) {
  PutArray(key, GgufValueType::kFloat64, v);
}
void GgufWriter::SetBoolArray(std::string_view key, const std::vector<bool>& v) {
  std::vector<uint8_t> bytes(v.begin(), v.end());
  PutArray(key, GgufValueType::kBool, std::span<const uint8_t>(bytes));
}

absl::Status GgufWriter::AddTensor(std::string_view name, std::vector<uint64_t> dims,
                                   TensorType type, std::string bytes) {
  if (name.empty()) return absl::InvalidArgumentError("tensor name is empty");
  for (const Tensor& t : tensors_) {
    if (t.name == name) {
      return absl::InvalidArgumentError(Cat("duplicate tensor name '", name, "'"));
    }
  }
  if (dims.empty() || dims.size() > GgufFile::kMaxDims) {
    return absl::InvalidArgumentError(
        Cat("tensor '", name, "' has ", dims.size(), " dims, expected 1 to 4"));
  }
  const auto traits = LookupTensorType(static_cast<uint32_t>(type));
  if (!traits) {
    return absl::InvalidArgumentError(
        Cat("tensor '", name, "' has unknown type id ", static_cast<uint32_t>(type)));
  }
  uint64_t n = 1;
  for (uint64_t d : dims) {
    if (d == 0) return absl::InvalidArgumentError(Cat("tensor '", name, "' has a zero dim"));
    if (__builtin_mul_overflow(n, d, &n)) {
      return absl::InvalidArgumentError(Cat("element count of tensor '", name, "' overflows"));
    }
  }
  if (dims[0] % traits->block_size != 0) {
    return absl::InvalidArgumentError(
        Cat("tensor '", name, "' of type ", traits->name, " has ne[0]=", dims[0],
            ", not a multiple of the block size ", traits->block_size));
  }
  uint64_t n_bytes = 0;
  if (__builtin_mul_overflow(n / traits->block_size, traits->block_bytes, &n_bytes) ||
      n_bytes != bytes.size()) {
    return absl::InvalidArgumentError(Cat("tensor '", name, "' of type ", traits->name, " needs ",
                                          n_bytes, " bytes, got ", bytes.size()));
  }
  tensors_.push_back(Tensor{std::string(name), std::move(dims), type, std::move(bytes)});
  return absl::OkStatus();
}

std::string GgufWriter::HeaderBytes() const {
  std::string out = "GGUF";
  AppendLe(&out, kVersion, 4);
  AppendLe(&out, tensors_.size(), 8);
  AppendLe(&out, kvs_.size(), 8);
  for (const auto& [key, value] : kvs_) {
    AppendString(&out, key);
    out += value;
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    AppendString(&out, t.name);
    AppendLe(&out, t.dims.size(), 4);
    for (uint64_t d : t.dims) AppendLe(&out, d, 8);
    AppendLe(&out, static_cast<uint32_t>(t.type), 4);
    AppendLe(&out, offset, 8);
    offset += t.bytes.size() + Padding(t.bytes.size());
  }
  out.append(Padding(out.size()), '\0');
  return out;
}

std::string GgufWriter::ToBytes() const {
  std::string out = HeaderBytes();
  for (const Tensor& t : tensors_) {
    out += t.bytes;
    out.append(Padding(t.bytes.size()), '\0');
  }
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  const std::string tmp = Cat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, Cat("cannot create '", tmp, "'"));
  absl::Status s = WriteAll(fd, HeaderBytes(), tmp);
  const std::string zeros(alignment_, '\0');
  for (size_t i = 0; s.ok() && i < tensors_.size(); ++i) {
    s = WriteAll(fd, tensors_[i].bytes, tmp);
    if (s.ok()) {
      s = WriteAll(fd, std::string_view(zeros).substr(0, Padding(tensors_[i].bytes.size())), tmp);
    }
  }
  if (s.ok() && ::fsync(fd) != 0) {
    s = absl::ErrnoToStatus(errno, Cat("cannot sync '", tmp, "'"));
  }
  if (::close(fd) != 0 && s.ok()) {
    s = absl::ErrnoToStatus(errno, Cat("cannot close '", tmp, "'"));
  }
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = absl::ErrnoToStatus(errno, Cat("cannot rename '", tmp, "' to '", path, "'"));
  }
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

}  // namespace ringlm
