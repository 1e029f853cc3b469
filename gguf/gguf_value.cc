// GgufValue: typed views of GGUF metadata values.
#include <bit>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "gguf/gguf_bytes.h"
#include "gguf/gguf_file.h"

namespace ringlm {

using gguf_internal::Cat;
using gguf_internal::LoadLe;

std::string_view GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "u8";
    case GgufValueType::kInt8:
      return "i8";
    case GgufValueType::kUint16:
      return "u16";
    case GgufValueType::kInt16:
      return "i16";
    case GgufValueType::kUint32:
      return "u32";
    case GgufValueType::kInt32:
      return "i32";
    case GgufValueType::kFloat32:
      return "f32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "u64";
    case GgufValueType::kInt64:
      return "i64";
    case GgufValueType::kFloat64:
      return "f64";
  }
  return "unknown";
}

bool IsGgufIntegerType(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}

uint32_t GgufFixedSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

namespace {

bool IsSigned(GgufValueType type) {
  return type == GgufValueType::kInt8 || type == GgufValueType::kInt16 ||
         type == GgufValueType::kInt32 || type == GgufValueType::kInt64;
}

// Sign-extends the low `bytes` bytes of `bits`.
int64_t SignExtend(uint64_t bits, uint32_t bytes) {
  if (bytes >= 8) return static_cast<int64_t>(bits);
  const int shift = 64 - 8 * static_cast<int>(bytes);
  return static_cast<int64_t>(bits << shift) >> shift;
}

}  // namespace

std::optional<uint64_t> GgufValue::TryUint64() const {
  if (!is_integer()) return std::nullopt;
  if (IsSigned(type_)) {
    const int64_t v = SignExtend(bits_, GgufFixedSize(type_));
    if (v < 0) return std::nullopt;
    return static_cast<uint64_t>(v);
  }
  return bits_;
}

std::optional<int64_t> GgufValue::TryInt64() const {
  if (!is_integer()) return std::nullopt;
  if (IsSigned(type_)) return SignExtend(bits_, GgufFixedSize(type_));
  if (bits_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(bits_);
}

std::optional<double> GgufValue::TryDouble() const {
  if (type_ == GgufValueType::kFloat32) {
    return std::bit_cast<float>(static_cast<uint32_t>(bits_));
  }
  if (type_ == GgufValueType::kFloat64) return std::bit_cast<double>(bits_);
  if (!is_integer()) return std::nullopt;
  if (IsSigned(type_)) return static_cast<double>(SignExtend(bits_, GgufFixedSize(type_)));
  return static_cast<double>(bits_);
}

int64_t GgufValue::AsInt64() const {
  if (!is_integer()) return 0;
  if (IsSigned(type_)) return SignExtend(bits_, GgufFixedSize(type_));
  return static_cast<int64_t>(bits_);
}

uint64_t GgufValue::AsUint64() const { return static_cast<uint64_t>(AsInt64()); }

double GgufValue::AsDouble() const { return TryDouble().value_or(0.0); }

bool GgufValue::AsBool() const { return type_ == GgufValueType::kBool && bits_ != 0; }

std::string_view GgufValue::AsString() const {
  return type_ == GgufValueType::kString ? str_ : std::string_view();
}

GgufValue GgufValue::array_element(uint64_t i) const {
  if (type_ != GgufValueType::kArray || i >= count_) return GgufValue();
  if (elem_type_ == GgufValueType::kString) {
    GgufValue v;
    v.type_ = GgufValueType::kString;
    v.str_ = strings_[i];
    return v;
  }
  if (elem_type_ == GgufValueType::kArray) return nested_[i];
  const uint32_t size = GgufFixedSize(elem_type_);
  GgufValue v;
  v.type_ = elem_type_;
  v.bits_ = LoadLe(raw_ + i * size, size);
  return v;
}

std::string GgufValue::DebugString() const {
  constexpr size_t kMaxShownString = 64;
  constexpr uint64_t kMaxShownElements = 3;
  switch (type_) {
    case GgufValueType::kBool:
      return bits_ ? "true" : "false";
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64: {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%g", AsDouble());
      return buf;
    }
    case GgufValueType::kString: {
      if (str_.size() <= kMaxShownString) return Cat("\"", str_, "\"");
      return Cat("\"", str_.substr(0, kMaxShownString), "\"... (", str_.size(), " bytes)");
    }
    case GgufValueType::kArray: {
      std::string out = Cat("[", GgufValueTypeName(elem_type_), " x ", count_);
      for (uint64_t i = 0; i < count_ && i < kMaxShownElements; ++i) {
        out += Cat(i == 0 ? ": " : ", ", array_element(i).DebugString());
      }
      if (count_ > kMaxShownElements) out += ", ...";
      return out + "]";
    }
    default:
      if (IsSigned(type_)) return Cat(AsInt64());
      return Cat(bits_);
  }
}

}  // namespace ringlm
