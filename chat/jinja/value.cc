#include "chat/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "chat/jinja/internal/format_number.h"
#include "chat/jinja/internal/str_cat.h"
#include "chat/jinja/internal/unicode.h"

namespace ringlm::jinja {
using internal::Cat;
namespace {

const std::string& EmptyString() {
  static const std::string* empty = new std::string();
  return *empty;
}

// Python's str.isprintable() approximation for repr(): control characters,
// separators other than ' ' and the common format characters are escaped.
bool IsPrintable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (cp == 0x1680 || cp == 0x3000 || cp == 0xFEFF) return false;
  if (cp >= 0x2000 && cp <= 0x200F) return false;
  if (cp >= 0x2028 && cp <= 0x202F) return false;
  if (cp >= 0x205F && cp <= 0x206F) return false;
  if (cp >= 0xD800 && cp <= 0xDFFF) return false;
  return true;
}

std::string PyStringRepr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    uint32_t cp = internal::DecodeUtf8(s, pos, &len);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!IsPrintable(cp)) {
      char buf[16];
      if (cp < 0x100) {
        snprintf(buf, sizeof(buf), "\\x%02x", cp);
      } else if (cp < 0x10000) {
        snprintf(buf, sizeof(buf), "\\u%04x", cp);
      } else {
        snprintf(buf, sizeof(buf), "\\U%08x", cp);
      }
      out += buf;
    } else {
      out.append(s.substr(pos, len));
    }
    pos += len;
  }
  out.push_back(quote);
  return out;
}

}  // namespace

Value Value::Undefined(std::string hint) {
  Value v;
  v.data_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::None(bool trusted) {
  Value v;
  v.kind_ = Kind::kNone;
  v.trusted_ = trusted;
  return v;
}

Value Value::Bool(bool b, bool trusted) {
  Value v;
  v.kind_ = Kind::kBool;
  v.trusted_ = trusted;
  v.data_ = b;
  return v;
}

Value Value::Int(int64_t i, bool trusted) {
  Value v;
  v.kind_ = Kind::kInt;
  v.trusted_ = trusted;
  v.data_ = i;
  return v;
}

Value Value::Float(double d, bool trusted) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.trusted_ = trusted;
  v.data_ = d;
  return v;
}

Value Value::String(Text text) {
  Value v;
  v.kind_ = Kind::kString;
  v.trusted_ = text.AllControl();
  v.data_ = std::make_shared<const Text>(std::move(text));
  return v;
}

Value Value::String(std::string_view s, bool trusted) { return String(Text(s, trusted)); }

Value Value::List(ValueList items, bool trusted, bool is_tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.trusted_ = trusted;
  v.tuple_ = is_tuple;
  for (const Value& item : items) v.depth_ = std::max(v.depth_, item.depth_);
  v.depth_ += 1;
  v.data_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}

Value Value::Dict(ValueDict dict, bool trusted) {
  Value v;
  v.kind_ = Kind::kDict;
  v.trusted_ = trusted;
  for (const auto& item : dict.items()) {
    v.depth_ = std::max(v.depth_, item.second.depth_);
  }
  v.depth_ += 1;
  v.data_ = std::make_shared<const ValueDict>(std::move(dict));
  return v;
}

Value Value::FromObject(std::shared_ptr<Object> object) {
  Value v;
  v.kind_ = Kind::kObject;
  v.depth_ = object->depth();
  v.data_ = std::move(object);
  return v;
}

namespace {

template <typename Json>
absl::StatusOr<Value> FromJsonAt(const Json& json, bool trusted, int depth) {
  if (depth > Value::kMaxJsonDepth) {
    return absl::InvalidArgumentError(
        Cat("JSON context nested deeper than ", Value::kMaxJsonDepth));
  }
  switch (json.type()) {
    case Json::value_t::null:
      return Value::None(trusted);
    case Json::value_t::boolean:
      return Value::Bool(json.template get<bool>(), trusted);
    case Json::value_t::number_integer:
      return Value::Int(json.template get<int64_t>(), trusted);
    case Json::value_t::number_unsigned: {
      uint64_t u = json.template get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Value::Float(static_cast<double>(u), trusted);
      }
      return Value::Int(static_cast<int64_t>(u), trusted);
    }
    case Json::value_t::number_float:
      return Value::Float(json.template get<double>(), trusted);
    case Json::value_t::string:
      return Value::String(json.template get_ref<const std::string&>(), trusted);
    case Json::value_t::array: {
      ValueList items;
      items.reserve(json.size());
      for (const auto& item : json) {
        absl::StatusOr<Value> v = FromJsonAt(item, trusted, depth + 1);
        if (!v.ok()) return v.status();
        items.push_back(std::move(*v));
      }
      return Value::List(std::move(items), trusted);
    }
    case Json::value_t::object: {
      ValueDict dict;
      for (auto it = json.begin(); it != json.end(); ++it) {
        absl::StatusOr<Value> v = FromJsonAt(it.value(), trusted, depth + 1);
        if (!v.ok()) return v.status();
        dict.Set(it.key(), std::move(*v));
      }
      return Value::Dict(std::move(dict), trusted);
    }
    default:  // binary, discarded
      return absl::InvalidArgumentError("unsupported JSON value in context");
  }
}

}  // namespace

absl::StatusOr<Value> Value::FromJson(const nlohmann::json& json, bool trusted) {
  return FromJsonAt(json, trusted, 0);
}

absl::StatusOr<Value> Value::FromJson(const nlohmann::ordered_json& json, bool trusted) {
  return FromJsonAt(json, trusted, 0);
}

int64_t Value::AsInt() const {
  if (kind_ == Kind::kBool) return std::get<bool>(data_) ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::AsDouble() const {
  if (kind_ == Kind::kFloat) return std::get<double>(data_);
  return static_cast<double>(AsInt());
}

const Text& Value::AsText() const { return *std::get<std::shared_ptr<const Text>>(data_); }

const ValueList& Value::AsList() const {
  return *std::get<std::shared_ptr<const ValueList>>(data_);
}

const ValueDict& Value::AsDict() const {
  return *std::get<std::shared_ptr<const ValueDict>>(data_);
}

const std::shared_ptr<Object>& Value::AsObject() const {
  return std::get<std::shared_ptr<Object>>(data_);
}

const std::string& Value::UndefinedHint() const {
  if (const auto* hint = std::get_if<std::shared_ptr<const std::string>>(&data_)) {
    return **hint;
  }
  return EmptyString();
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return AsBool();
    case Kind::kInt:
      return AsInt() != 0;
    case Kind::kFloat:
      return AsDouble() != 0.0;
    case Kind::kString:
      return !AsText().empty();
    case Kind::kList:
      return generator_ || !AsList().empty();
    case Kind::kDict:
      return !AsDict().empty();
    case Kind::kObject:
      return true;
  }
  return false;
}

Text Value::ToText() const {
  switch (kind_) {
    case Kind::kUndefined:
      return Text();
    case Kind::kString:
      return AsText();
    default:
      return Repr();
  }
}

Text Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return Text("", true);
    case Kind::kNone:
      return Text("None", trusted_);
    case Kind::kBool:
      return Text(AsBool() ? "True" : "False", trusted_);
    case Kind::kInt:
      return Text(std::to_string(AsInt()), trusted_);
    case Kind::kFloat:
      return Text(internal::PyFloatRepr(AsDouble()), trusted_);
    case Kind::kString:
      return AsText().Derived(PyStringRepr(AsText().str()));
    case Kind::kList: {
      if (generator_) return Text("<generator object>", true);
      Text out(tuple_ ? "(" : "[", trusted_);
      const ValueList& items = AsList();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out.Append(", ", trusted_);
        out.Append(items[i].Repr());
      }
      if (tuple_ && items.size() == 1) out.Append(",", trusted_);
      out.Append(tuple_ ? ")" : "]", trusted_);
      return out;
    }
    case Kind::kDict: {
      Text out("{", trusted_);
      bool first = true;
      for (const auto& [key, value] : AsDict().items()) {
        if (!first) out.Append(", ", trusted_);
        first = false;
        out.Append(PyStringRepr(key), trusted_);
        out.Append(": ", trusted_);
        out.Append(value.Repr());
      }
      out.Append("}", trusted_);
      return out;
    }
    case Kind::kObject:
      return Text(Cat("<", AsObject()->TypeName(), " object>"), true);
  }
  return Text();
}

bool operator==(const Value& a, const Value& b) {
  using Kind = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.AsDouble() == b.AsDouble();
    return a.AsInt() == b.AsInt();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.AsText().str() == b.AsText().str();
    case Kind::kList: {
      if (a.is_generator() || b.is_generator()) return &a.AsList() == &b.AsList();
      if (a.is_tuple() != b.is_tuple()) return false;
      const ValueList& x = a.AsList();
      const ValueList& y = b.AsList();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!(x[i] == y[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const ValueDict& x = a.AsDict();
      const ValueDict& y = b.AsDict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.items()) {
        const Value* other = y.Find(key);
        if (other == nullptr || !(value == *other)) return false;
      }
      return true;
    }
    case Kind::kObject:
      return a.AsObject() == b.AsObject();
    default:
      return false;
  }
}

Value Value::AsGenerator() const {
  Value copy = *this;
  copy.tuple_ = false;
  copy.generator_ = true;
  return copy;
}

Value Value::WithTrust(bool trusted) const {
  if (trusted) return *this;
  if (kind_ == Kind::kString) return String(Text(AsText().str(), false));
  Value copy = *this;
  copy.trusted_ = false;
  return copy;
}

void ValueDict::Set(std::string key, Value value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    items_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, items_.size());
  items_.emplace_back(std::move(key), std::move(value));
}

const Value* ValueDict::Find(std::string_view key) const {
  auto it = index_.find(absl::string_view(key.data(), key.size()));
  if (it == index_.end()) return nullptr;
  return &items_[it->second].second;
}

}  // namespace ringlm::jinja
