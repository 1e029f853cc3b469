// Value: the dynamically typed values a Jinja template computes with, with
// Python's semantics (None, bool, int, float, str, list, dict) plus jinja2's
// Undefined and opaque objects (macros, namespaces, loop, bound methods).
//
// Provenance: strings are Texts (per-byte control/content runs); every other
// value carries one `trusted` bit saying whether it came from a trusted place
// (template literal, caller-trusted context) or from client input. Text that is
// synthesized from a value (str() of a number, tojson of a dict) is control
// only if everything it was made from is trusted.
//
// Lists and dicts are immutable once built (as in jinja2's
// ImmutableSandboxedEnvironment) and shared by reference, so copying a Value is
// cheap. Dicts keep insertion order and have string keys. A Value holding no
// Object is safe to read from several threads at once; Objects (namespace)
// belong to one render.
#ifndef RINGLM_CHAT_JINJA_VALUE_H_
#define RINGLM_CHAT_JINJA_VALUE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "chat/jinja/text.h"
#include "nlohmann/json.hpp"

namespace ringlm::jinja {

class Value;
class ValueDict;
using ValueList = std::vector<Value>;

// Base of engine-internal objects (macros, namespace(), loop, methods).
class Object {
 public:
  virtual ~Object() = default;
  // Python-ish type name used in error messages ("namespace", "macro").
  virtual std::string_view TypeName() const = 0;
  // Nesting of the values the object holds (see Value::depth).
  virtual uint32_t depth() const { return 0; }
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kObject,
  };

  Value() = default;  // Undefined

  // `hint` names what was looked up, for UndefinedError messages.
  static Value Undefined(std::string hint = "");
  static Value None(bool trusted = true);
  static Value Bool(bool b, bool trusted = true);
  static Value Int(int64_t i, bool trusted = true);
  static Value Float(double d, bool trusted = true);
  static Value String(Text text);
  static Value String(std::string_view s, bool trusted);
  // `is_tuple` only changes how it prints: "(1, 2)" instead of "[1, 2]".
  static Value List(ValueList items, bool trusted = true, bool is_tuple = false);
  static Value Dict(ValueDict dict, bool trusted = true);
  static Value FromObject(std::shared_ptr<Object> object);
  // JSON -> Value. `trusted` marks every string and scalar of the tree.
  // InvalidArgument if the JSON nests deeper than kMaxJsonDepth. Dicts keep
  // the JSON object's key order: pass an ordered_json (as parsed from the
  // request) to match Python, whose dicts keep the client's order;
  // nlohmann::json has already sorted its keys.
  static absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& json, bool trusted);
  static absl::StatusOr<Value> FromJson(const nlohmann::json& json, bool trusted);
  static constexpr int kMaxJsonDepth = 128;

  Kind kind() const { return kind_; }
  // Container nesting: 0 for scalars and objects, 1 + the deepest item for
  // lists and dicts. The engine bounds it so destruction and printing never
  // recurse deeply.
  uint32_t depth() const { return depth_; }
  bool trusted() const { return trusted_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python numbers include bool.
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  // A list standing in for a Python generator (what jinja2's map, select,
  // batch, unique, items, reverse return): iterable, always truthy, no len(),
  // not subscriptable, prints as "<generator object>".
  bool is_generator() const { return kind_ == Kind::kList && generator_; }
  Value AsGenerator() const;
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // Accessors; each requires the matching kind.
  bool AsBool() const { return std::get<bool>(data_); }
  int64_t AsInt() const;    // also accepts bool
  double AsDouble() const;  // int, bool or float
  const Text& AsText() const;
  const ValueList& AsList() const;
  const ValueDict& AsDict() const;
  const std::shared_ptr<Object>& AsObject() const;
  // For undefined values: what was looked up.
  const std::string& UndefinedHint() const;

  // Python truthiness (Undefined is falsy).
  bool Truthy() const;
  // Python str(): what `{{ value }}` prints. Undefined prints "".
  Text ToText() const;
  // Python repr() (used inside str() of containers).
  Text Repr() const;
  // Python ==, deep for containers; plain text for strings.
  friend bool operator==(const Value& a, const Value& b);

  // A copy whose trusted bit (and, for strings, every run) is `trusted`
  // AND the old bit.
  Value WithTrust(bool trusted) const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool trusted_ = true;
  bool tuple_ = false;
  bool generator_ = false;
  uint32_t depth_ = 0;
  std::variant<std::monostate, bool, int64_t, double, std::shared_ptr<const Text>,
               std::shared_ptr<const ValueList>, std::shared_ptr<const ValueDict>,
               std::shared_ptr<Object>, std::shared_ptr<const std::string>>
      data_;
};

// An insertion-ordered dict with string keys.
class ValueDict {
 public:
  // Inserts or replaces (keeping the first insertion's position, like Python).
  void Set(std::string key, Value value);
  const Value* Find(std::string_view key) const;
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, Value>> items_;
  absl::flat_hash_map<std::string, size_t> index_;
};

}  // namespace ringlm::jinja

#endif  // RINGLM_CHAT_JINJA_VALUE_H_
