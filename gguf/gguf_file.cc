// GgufFile: mapping and validating parser for GGUF v2/v3.
//
// Every read is bounds-checked against the remaining bytes, and every count
// read from the file is checked against what the remaining bytes could hold
// before anything is allocated for it, so a hostile file can make the parser
// allocate at most a small multiple of its own size.
#include "gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <numeric>

#include "gguf/gguf_bytes.h"

namespace ringlm {

using gguf_internal::Cat;
using gguf_internal::LoadLe;

namespace {

constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kMaxValueType = static_cast<uint32_t>(GgufValueType::kFloat64);
// Smallest possible encodings, used to reject counts the file cannot hold.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;  // key length, type, u8
constexpr uint64_t kMinTensorInfoBytes =
    8 + 4 + 8 + 4 + 8;  // name len, n_dims, 1 dim, type, offset

// "array of f32" for arrays, the plain type name otherwise.
std::string Describe(const GgufValue& v) {
  if (v.type() != GgufValueType::kArray) return std::string(GgufValueTypeName(v.type()));
  return Cat("array of ", GgufValueTypeName(v.array_type()));
}

std::string JoinDims(const std::vector<uint64_t>& dims) {
  std::string out;
  for (size_t i = 0; i < dims.size(); ++i) out += Cat(i ? ", " : "", dims[i]);
  return out;
}

// "47 47 55 46" for "GGUF".
std::string HexBytes(const uint8_t* p, int n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (i) out += ' ';
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

absl::Status WrongType(std::string_view key, const GgufValue& v, std::string_view expected) {
  return absl::InvalidArgumentError(
      Cat("key '", key, "' has type ", Describe(v), ", expected ", expected));
}

// Prefixes a status message with the file path, keeping the code.
absl::Status WithPath(const absl::Status& s, const std::string& path) {
  return absl::Status(s.code(), Cat(path, ": ", s.message()));
}

}  // namespace

// Parses the bytes a GgufFile holds into its metadata and tensor table.
class GgufParser {
 public:
  explicit GgufParser(GgufFile* file) : f_(file), p_(file->bytes_), size_(file->size_) {}

  absl::Status Parse() {
    if (auto s = ParseHeaderAndMetadata(); !s.ok()) return s;
    if (auto s = ReadAlignment(); !s.ok()) return s;
    for (uint64_t i = 0; i < tensor_count_; ++i) {
      if (auto s = ParseTensorInfo(); !s.ok()) return s;
    }
    return PlaceTensors();
  }

 private:
  uint64_t remaining() const { return size_ - pos_; }

  absl::Status Truncated(std::string_view what, std::string_view name = {}) const {
    return absl::DataLossError(Cat("truncated at offset ", pos_, " while reading ", what,
                                   name.empty() ? "" : Cat(" '", name, "'"), " (file size ", size_,
                                   ")"));
  }

  absl::StatusOr<uint64_t> ReadUint(uint32_t n, std::string_view what, std::string_view name = {}) {
    if (remaining() < n) return Truncated(what, name);
    const uint64_t v = LoadLe(p_ + pos_, n);
    pos_ += n;
    return v;
  }

  // A gguf_string: uint64 length + bytes, at most `max_len` bytes.
  absl::StatusOr<std::string_view> ReadString(uint64_t max_len, std::string_view what,
                                              std::string_view name = {}) {
    const uint64_t start = pos_;
    auto len = ReadUint(8, what, name);
    if (!len.ok()) return len.status();
    if (*len > max_len || *len > remaining()) {  // messages built only on failure
      const std::string where =
          Cat(what, name.empty() ? "" : Cat(" '", name, "'"), " at offset ", start);
      if (*len > max_len) {
        return absl::DataLossError(Cat("string length ", *len, " of ", where,
                                       " exceeds the limit of ", max_len, " bytes"));
      }
      return absl::DataLossError(Cat("truncated at offset ", pos_, " while reading ", where,
                                     ": string length ", *len, " exceeds the ", remaining(),
                                     " remaining bytes"));
    }
    std::string_view s(reinterpret_cast<const char*>(p_ + pos_), *len);
    pos_ += *len;
    return s;
  }

  absl::Status ParseHeaderAndMetadata() {
    if (remaining() < 4) return Truncated("magic");
    if (std::memcmp(p_, kMagic, 4) != 0) {
      return absl::DataLossError(
          Cat("bad magic at offset 0: expected \"GGUF\" (47 47 55 46), found ", HexBytes(p_, 4)));
    }
    pos_ = 4;
    auto version = ReadUint(4, "version");
    if (!version.ok()) return version.status();
    if (*version != 2 && *version != 3) {
      const uint32_t swapped = __builtin_bswap32(static_cast<uint32_t>(*version));
      return absl::UnimplementedError(
          Cat("unsupported GGUF version ", *version, " (only versions 2 and 3 are read)",
              swapped == 2 || swapped == 3 ? "; big-endian GGUF files are not supported" : ""));
    }
    f_->version_ = static_cast<uint32_t>(*version);
    auto tensor_count = ReadUint(8, "tensor_count");
    if (!tensor_count.ok()) return tensor_count.status();
    auto kv_count = ReadUint(8, "metadata_kv_count");
    if (!kv_count.ok()) return kv_count.status();
    tensor_count_ = *tensor_count;
    const uint64_t rem = remaining();
    if (*kv_count > rem / kMinKvBytes) {
      return absl::DataLossError(Cat("metadata_kv_count ", *kv_count,
                                     " at offset 16 cannot fit in the remaining ", rem,
                                     " bytes (file size ", size_, ")"));
    }
    if (tensor_count_ > rem / kMinTensorInfoBytes ||
        *kv_count * kMinKvBytes + tensor_count_ * kMinTensorInfoBytes > rem) {
      return absl::DataLossError(Cat("tensor_count ", tensor_count_, " at offset 8 (with ",
                                     *kv_count, " metadata keys) cannot fit in the ", "remaining ",
                                     rem, " bytes (file size ", size_, ")"));
    }
    f_->metadata_.reserve(*kv_count);
    for (uint64_t i = 0; i < *kv_count; ++i) {
      if (auto s = ParseKeyValue(); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status ParseKeyValue() {
    const uint64_t start = pos_;
    auto key = ReadString(GgufFile::kMaxKeyLength, "metadata key");
    if (!key.ok()) return key.status();
    if (key->empty()) return absl::DataLossError(Cat("empty metadata key at offset ", start));
    if (f_->key_index_.count(*key)) {
      return absl::DataLossError(Cat("duplicate key '", *key, "' at offset ", start));
    }
    const uint64_t type_pos = pos_;
    auto type = ReadUint(4, "value type of key", *key);
    if (!type.ok()) return type.status();
    if (*type > kMaxValueType) {
      return absl::DataLossError(
          Cat("unknown value type ", *type, " for key '", *key, "' at offset ", type_pos));
    }
    GgufValue value;
    if (auto s = ReadValue(static_cast<GgufValueType>(*type), 0, *key, &value); !s.ok()) return s;
    f_->key_index_.emplace(*key, f_->metadata_.size());
    f_->metadata_.emplace_back(std::string(*key), std::move(value));
    return absl::OkStatus();
  }

  // Reads one value of a known `type`; `depth` counts enclosing arrays.
  absl::Status ReadValue(GgufValueType type, int depth, std::string_view key, GgufValue* out) {
    out->type_ = type;
    if (type == GgufValueType::kString) {
      auto s = ReadString(GgufFile::kMaxStringLength, "string value of key", key);
      if (!s.ok()) return s.status();
      out->str_ = *s;
      return absl::OkStatus();
    }
    if (type != GgufValueType::kArray) {
      const uint64_t at = pos_;
      auto bits = ReadUint(GgufFixedSize(type), "value of key", key);
      if (!bits.ok()) return bits.status();
      if (type == GgufValueType::kBool && *bits > 1) {
        return absl::DataLossError(
            Cat("invalid bool value ", *bits, " of key '", key, "' at offset ", at));
      }
      out->bits_ = *bits;
      return absl::OkStatus();
    }
    const uint64_t start = pos_;
    if (depth >= GgufFile::kMaxArrayDepth) {
      return absl::DataLossError(Cat("arrays nested deeper than ", GgufFile::kMaxArrayDepth,
                                     " levels in key '", key, "' at offset ", start));
    }
    auto elem = ReadUint(4, "array element type of key", key);
    if (!elem.ok()) return elem.status();
    if (*elem > kMaxValueType) {
      return absl::DataLossError(
          Cat("unknown array element type ", *elem, " for key '", key, "' at offset ", start));
    }
    auto count = ReadUint(8, "array count of key", key);
    if (!count.ok()) return count.status();
    const auto elem_type = static_cast<GgufValueType>(*elem);
    const uint32_t fixed = GgufFixedSize(elem_type);
    const uint64_t min_elem = fixed ? fixed : (elem_type == GgufValueType::kString ? 8 : 12);
    if (*count > remaining() / min_elem) {
      return absl::DataLossError(Cat("array count ", *count, " of key '", key, "' at offset ",
                                     start + 4, " cannot fit in the remaining ", remaining(),
                                     " bytes"));
    }
    out->elem_type_ = elem_type;
    out->count_ = *count;
    if (fixed) {
      out->raw_ = p_ + pos_;
      if (elem_type == GgufValueType::kBool) {
        for (uint64_t i = 0; i < *count; ++i) {
          if (p_[pos_ + i] > 1) {
            return absl::DataLossError(Cat("invalid bool value ", static_cast<int>(p_[pos_ + i]),
                                           " in array of key '", key, "' at offset ", pos_ + i));
          }
        }
      }
      pos_ += *count * fixed;
    } else if (elem_type == GgufValueType::kString) {
      out->strings_.reserve(*count);
      for (uint64_t i = 0; i < *count; ++i) {
        auto s = ReadString(GgufFile::kMaxStringLength, "string element of key", key);
        if (!s.ok()) return s.status();
        out->strings_.push_back(*s);
      }
    } else {
      out->nested_.resize(*count);
      for (uint64_t i = 0; i < *count; ++i) {
        if (auto s = ReadValue(GgufValueType::kArray, depth + 1, key, &out->nested_[i]); !s.ok()) {
          return s;
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadAlignment() {
    const GgufValue* v = f_->Find("general.alignment");
    if (v == nullptr) return absl::OkStatus();
    if (v->type() != GgufValueType::kUint32) {
      return absl::DataLossError(
          Cat("general.alignment has type ", Describe(*v), ", expected u32"));
    }
    const uint64_t a = v->AsUint64();
    if (a == 0 || (a & (a - 1)) != 0) {
      return absl::DataLossError(
          Cat("general.alignment is ", a, ", expected a non-zero power of two"));
    }
    f_->alignment_ = a;
    return absl::OkStatus();
  }

  absl::Status ParseTensorInfo() {
    const uint64_t start = pos_;
    auto name = ReadString(GgufFile::kMaxKeyLength, "tensor name");
    if (!name.ok()) return name.status();
    if (name->empty()) return absl::DataLossError(Cat("empty tensor name at offset ", start));
    if (f_->tensor_index_.count(*name)) {
      return absl::DataLossError(Cat("duplicate tensor name '", *name, "' at offset ", start));
    }
    GgufTensorInfo t;
    t.name = std::string(*name);
    const uint64_t dims_pos = pos_;
    auto n_dims = ReadUint(4, "n_dims of tensor", *name);
    if (!n_dims.ok()) return n_dims.status();
    if (*n_dims == 0 || *n_dims > GgufFile::kMaxDims) {
      return absl::DataLossError(Cat("tensor '", *name, "' has ", *n_dims, " dims at offset ",
                                     dims_pos, ", expected 1 to ", GgufFile::kMaxDims));
    }
    uint64_t n_elements = 1;
    for (uint64_t d = 0; d < *n_dims; ++d) {
      auto dim = ReadUint(8, "dims of tensor", *name);
      if (!dim.ok()) return dim.status();
      if (*dim == 0) {
        return absl::DataLossError(
            Cat("tensor '", *name, "' has a zero dimension ne[", d, "] at offset ", pos_ - 8));
      }
      t.dims.push_back(*dim);
      if (__builtin_mul_overflow(n_elements, *dim, &n_elements) ||
          n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::DataLossError(
            Cat("element count of tensor '", *name, "' overflows (dims ", JoinDims(t.dims), ")"));
      }
    }
    t.n_elements = n_elements;
    const uint64_t type_pos = pos_;
    auto type_id = ReadUint(4, "type of tensor", *name);
    if (!type_id.ok()) return type_id.status();
    const auto traits = LookupTensorType(static_cast<uint32_t>(*type_id));
    if (!traits) {
      return absl::DataLossError(
          Cat("tensor '", *name, "' has unknown type id ", *type_id, " at offset ", type_pos));
    }
    t.type = traits->type;
    if (t.dims[0] % traits->block_size != 0) {
      return absl::DataLossError(Cat("tensor '", *name, "' of type ", traits->name,
                                     " has ne[0]=", t.dims[0],
                                     ", not a multiple of the block size ", traits->block_size));
    }
    if (__builtin_mul_overflow(n_elements / traits->block_size, traits->block_bytes, &t.n_bytes)) {
      return absl::DataLossError(Cat("byte size of tensor '", *name, "' overflows (dims ",
                                     JoinDims(t.dims), ", type ", traits->name, ")"));
    }
    auto offset = ReadUint(8, "offset of tensor", *name);
    if (!offset.ok()) return offset.status();
    if (*offset % f_->alignment_ != 0) {
      return absl::DataLossError(Cat("tensor '", *name, "' offset ", *offset, " at offset ",
                                     pos_ - 8, " is not a multiple of the alignment ",
                                     f_->alignment_));
    }
    t.offset = *offset;
    f_->tensor_index_.emplace(*name, f_->tensors_.size());
    f_->tensors_.push_back(std::move(t));
    return absl::OkStatus();
  }

  // Finds the data section and checks every tensor lies inside it, alone.
  absl::Status PlaceTensors() {
    const uint64_t a = f_->alignment_;
    const uint64_t aligned = (pos_ + a - 1) / a * a;  // pos_ <= size_, a <= 2^31: no overflow
    if (aligned > size_) {
      if (!f_->tensors_.empty()) {
        return absl::DataLossError(Cat("truncated at offset ", size_,
                                       " while reading padding before the data section (",
                                       "which would start at offset ", aligned, ")"));
      }
      f_->data_offset_ = size_;  // a tensor-less file may omit the final padding
      return absl::OkStatus();
    }
    f_->data_offset_ = aligned;
    const uint64_t data_size = size_ - aligned;
    for (GgufTensorInfo& t : f_->tensors_) {
      if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
        return absl::DataLossError(Cat("tensor '", t.name, "' data (", t.n_bytes,
                                       " bytes at data offset ", t.offset, ", file offset ",
                                       aligned, " + ", t.offset,
                                       ") extends past the end of the file (size ", size_, ")"));
      }
      t.data = p_ + aligned + t.offset;
    }
    std::vector<size_t> order(f_->tensors_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [this](size_t x, size_t y) {
      return f_->tensors_[x].offset < f_->tensors_[y].offset;
    });
    for (size_t i = 1; i < order.size(); ++i) {
      const GgufTensorInfo& prev = f_->tensors_[order[i - 1]];
      const GgufTensorInfo& next = f_->tensors_[order[i]];
      if (prev.offset + prev.n_bytes > next.offset) {
        return absl::DataLossError(Cat("tensors '", prev.name, "' [", prev.offset, ", ",
                                       prev.offset + prev.n_bytes, ") and '", next.name, "' [",
                                       next.offset, ", ", next.offset + next.n_bytes,
                                       ") overlap in the data section"));
      }
    }
    return absl::OkStatus();
  }

  GgufFile* f_;
  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
};

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBytes(std::string bytes) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->owned_ = std::move(bytes);
  f->bytes_ = reinterpret_cast<const uint8_t*>(f->owned_.data());
  f->size_ = f->owned_.size();
  GgufParser parser(f.get());
  if (auto s = parser.Parse(); !s.ok()) return s;
  return f;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, Cat("cannot open GGUF file '", path, "'"));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::ErrnoToStatus(err, Cat("cannot stat GGUF file '", path, "'"));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(Cat("'", path, "' is not a regular file"));
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::ErrnoToStatus(err, Cat("cannot map GGUF file '", path, "'"));
    }
    f->mapping_ = m;
    f->bytes_ = static_cast<const uint8_t*>(m);
  } else {
    f->bytes_ = reinterpret_cast<const uint8_t*>(f->owned_.data());
  }
  ::close(fd);  // the mapping keeps the file alive
  GgufParser parser(f.get());
  if (auto s = parser.Parse(); !s.ok()) return WithPath(s, path);
  return f;
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

absl::StatusOr<const GgufValue*> GgufFile::FindTyped(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(Cat("missing required key '", key, "'"));
  return v;
}

absl::StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  auto v = FindTyped(key);
  if (!v.ok()) return v.status();
  if ((*v)->type() != GgufValueType::kString) return WrongType(key, **v, "string");
  return std::string((*v)->AsString());
}

absl::StatusOr<uint64_t> GgufFile::GetUint(std::string_view key) const {
  auto v = FindTyped(key);
  if (!v.ok()) return v.status();
  if (!(*v)->is_integer()) return WrongType(key, **v, "an unsigned integer");
  auto u = (*v)->TryUint64();
  if (!u) {
    return absl::InvalidArgumentError(Cat("key '", key, "' has negative value ", (*v)->AsInt64(),
                                          ", expected a non-negative integer"));
  }
  return *u;
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  auto v = FindTyped(key);
  if (!v.ok()) return v.status();
  if (!(*v)->is_integer()) return WrongType(key, **v, "an integer");
  auto i = (*v)->TryInt64();
  if (!i) {
    return absl::InvalidArgumentError(
        Cat("key '", key, "' has value ", (*v)->AsUint64(), ", which does not fit in int64"));
  }
  return *i;
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  auto v = FindTyped(key);
  if (!v.ok()) return v.status();
  auto d = (*v)->TryDouble();
  if (!d) return WrongType(key, **v, "a number");
  return *d;
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  auto v = FindTyped(key);
  if (!v.ok()) return v.status();
  if ((*v)->type() != GgufValueType::kBool) return WrongType(key, **v, "bool");
  return (*v)->AsBool();
}

absl::StatusOr<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  auto v = FindTyped(key);
  if (!v.ok()) return v.status();
  const GgufValue& a = **v;
  if (a.type() != GgufValueType::kArray || a.array_type() != GgufValueType::kString) {
    return WrongType(key, a, "array of string");
  }
  return a.strings_;
}

absl::StatusOr<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  auto v = FindTyped(key);
  if (!v.ok()) return v.status();
  const GgufValue& a = **v;
  if (a.type() != GgufValueType::kArray ||
      (a.array_type() != GgufValueType::kFloat32 && a.array_type() != GgufValueType::kFloat64)) {
    return WrongType(key, a, "array of f32");
  }
  std::vector<float> out(a.array_size());
  for (uint64_t i = 0; i < a.array_size(); ++i) {
    out[i] = static_cast<float>(a.array_element(i).AsDouble());
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  auto v = FindTyped(key);
  if (!v.ok()) return v.status();
  const GgufValue& a = **v;
  if (a.type() != GgufValueType::kArray || !IsGgufIntegerType(a.array_type())) {
    return WrongType(key, a, "array of integers");
  }
  std::vector<int64_t> out(a.array_size());
  for (uint64_t i = 0; i < a.array_size(); ++i) {
    const GgufValue e = a.array_element(i);
    auto x = e.TryInt64();
    if (!x) {
      return absl::InvalidArgumentError(Cat("key '", key, "' element ", i, " has value ",
                                            e.AsUint64(), ", which does not fit in int64"));
    }
    out[i] = *x;
  }
  return out;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<const GgufTensorInfo*> GgufFile::RequireTensor(std::string_view name) const {
  const GgufTensorInfo* t = FindTensor(name);
  if (t == nullptr) return absl::NotFoundError(Cat("missing required tensor '", name, "'"));
  return t;
}

void GgufFile::Advise(const GgufTensorInfo& t, int advice) const {
  if (mapping_ == nullptr || t.data == nullptr || t.n_bytes == 0) return;
  static const uintptr_t kPage = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(t.data) & ~(kPage - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(t.data) + t.n_bytes;
  // Advisory only: a failure changes nothing but speed or residency.
  ::madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

void GgufFile::Prefetch(const GgufTensorInfo& t) const { Advise(t, MADV_WILLNEED); }

void GgufFile::Release(const GgufTensorInfo& t) const { Advise(t, MADV_DONTNEED); }

}  // namespace ringlm
