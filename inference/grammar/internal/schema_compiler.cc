#include "inference/grammar/internal/schema_compiler.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <span>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace ringlm::grammar::internal {
namespace {

using Json = nlohmann::ordered_json;

constexpr uint32_t kMaxCount = 1u << 20;  // minItems, maxLength, ...

// Keywords that do not change validity.
constexpr std::string_view kAnnotations[] = {
    "title",    "description",      "default",         "examples",     "$schema", "$id",
    "$comment", "deprecated",       "readOnly",        "writeOnly",    "$defs",   "definitions",
    "$anchor",  "contentMediaType", "contentEncoding", "discriminator"};
// Keywords we understand and enforce.
constexpr std::string_view kSupported[] = {"type",
                                           "properties",
                                           "required",
                                           "additionalProperties",
                                           "items",
                                           "minItems",
                                           "maxItems",
                                           "minLength",
                                           "maxLength",
                                           "enum",
                                           "const",
                                           "anyOf",
                                           "oneOf",
                                           "allOf",
                                           "$ref",
                                           "uniqueItems",
                                           "minimum",
                                           "maximum",
                                           "exclusiveMinimum",
                                           "exclusiveMaximum"};
// Keywords that change validity but are not enforced: refused, never ignored.
// (minimum/maximum are enforced for integers only; see CompileInteger.)
constexpr std::string_view kRefused[] = {"pattern",
                                         "format",
                                         "multipleOf",
                                         "patternProperties",
                                         "propertyNames",
                                         "minProperties",
                                         "maxProperties",
                                         "dependentRequired",
                                         "dependentSchemas",
                                         "dependencies",
                                         "if",
                                         "then",
                                         "else",
                                         "not",
                                         "contains",
                                         "minContains",
                                         "maxContains",
                                         "prefixItems",
                                         "unevaluatedProperties",
                                         "unevaluatedItems",
                                         "additionalItems",
                                         "$dynamicRef",
                                         "$recursiveRef",
                                         "contentSchema"};
constexpr const char* kBounds[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

bool In(std::string_view key, std::span<const std::string_view> list) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

absl::Status Error(const std::string& path, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("json schema at '", path, "': ", message));
}

std::string Child(const std::string& path, const std::string& a, const std::string& b = "") {
  std::string out = absl::StrCat(path, "/", a);
  if (!b.empty()) absl::StrAppend(&out, "/", b);
  return out;
}

// A non-negative integer keyword, or nullopt when absent.
absl::StatusOr<std::optional<uint32_t>> Count(const Json& schema, const char* key,
                                              const std::string& path) {
  auto it = schema.find(key);
  if (it == schema.end()) return std::nullopt;
  double v = -1;
  if (it->is_number()) v = it->get<double>();
  if (v < 0 || v != std::floor(v)) {
    return Error(path, absl::StrCat("'", key, "' must be a non-negative integer"));
  }
  if (v > kMaxCount) return Error(path, absl::StrCat("'", key, "' exceeds ", kMaxCount));
  return static_cast<uint32_t>(v);
}

bool HasAny(const Json& schema, std::initializer_list<const char*> keys) {
  return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return schema.contains(k); });
}

bool MatchesType(const Json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    return v.is_number_integer() ||
           (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
  }
  return false;
}

}  // namespace

absl::StatusOr<NodeId> SchemaCompiler::Compile(const Json& schema, uint32_t depth,
                                               uint32_t ref_depth, const std::string& path) {
  if (!b_->error.ok()) return b_->error;
  if (depth > b_->options.max_schema_depth) {
    return Error(path, absl::StrCat("nested deeper than ", b_->options.max_schema_depth));
  }
  if (schema.is_boolean()) {
    return schema.get<bool>() ? b_->AnyValue(b_->options.max_any_depth) : kNeverNode;
  }
  if (!schema.is_object()) return Error(path, "a schema must be an object or a boolean");

  std::vector<std::string> validity;  // supported validity keywords present.
  for (const auto& [key, value] : schema.items()) {
    if (In(key, kRefused)) return Error(path, absl::StrCat("unsupported keyword '", key, "'"));
    if (key == "uniqueItems" && !(value.is_boolean() && !value.get<bool>())) {
      return Error(path, "unsupported keyword 'uniqueItems' (only false is supported)");
    }
    if (In(key, kSupported) && key != "uniqueItems") validity.push_back(key);
    // Anything else is an unknown keyword: an annotation in JSON Schema.
  }
  const auto only = [&](std::initializer_list<std::string_view> allowed) -> absl::Status {
    for (const std::string& key : validity) {
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return Error(path, absl::StrCat("'", key, "' beside '", std::string(*allowed.begin()),
                                        "' is not supported"));
      }
    }
    return absl::OkStatus();
  };

  if (schema.contains("$ref")) {
    if (absl::Status s = only({"$ref"}); !s.ok()) return s;
    return CompileRef(schema["$ref"], ref_depth, path);
  }
  for (const char* key : {"anyOf", "oneOf", "allOf"}) {
    if (!schema.contains(key)) continue;
    if (absl::Status s = only({key}); !s.ok()) return s;
    const Json& list = schema[key];
    if (!list.is_array() || list.empty()) {
      return Error(path, absl::StrCat("'", key, "' must be a non-empty array"));
    }
    if (std::string_view(key) == "allOf") {
      if (list.size() != 1) return Error(path, "'allOf' with more than one schema is unsupported");
      return Compile(list[0], depth + 1, ref_depth, Child(path, key, "0"));
    }
    // oneOf is compiled as anyOf: exact when its branches are disjoint.
    return CompileAlternatives(list, depth, ref_depth, Child(path, key));
  }

  std::vector<std::string> types;
  if (auto it = schema.find("type"); it != schema.end()) {
    const std::vector<Json> listed =
        it->is_array() ? it->get<std::vector<Json>>() : std::vector<Json>{*it};
    if (listed.empty()) return Error(path, "'type' must not be empty");
    for (const Json& t : listed) {
      static constexpr std::string_view kTypes[] = {"object",  "array",   "string", "number",
                                                    "integer", "boolean", "null"};
      if (!t.is_string() || !In(t.get<std::string>(), kTypes)) {
        return Error(path, absl::StrCat("unknown type ", t.dump()));
      }
      types.push_back(t.get<std::string>());
    }
  }
  if (schema.contains("enum") || schema.contains("const")) {
    if (absl::Status s = only({"enum", "const", "type"}); !s.ok()) return s;
    return CompileEnum(schema, types, path);
  }
  if (types.empty()) {
    // No type: narrow to the types whose keywords appear (a valid subset of
    // what the schema allows), or any value if none do.
    if (HasAny(schema, {"properties", "required", "additionalProperties"})) {
      types.push_back("object");
    }
    if (HasAny(schema, {"items", "minItems", "maxItems"})) types.push_back("array");
    if (HasAny(schema, {"minLength", "maxLength"})) types.push_back("string");
    if (HasAny(schema, {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) {
      types.push_back("integer");
    }
    if (types.empty()) return b_->AnyValue(b_->options.max_any_depth);
  }
  if (std::find(types.begin(), types.end(), "number") != types.end()) {
    std::erase(types, "integer");  // number already covers integers.
  }
  std::vector<NodeId> alternatives;
  for (const std::string& type : types) {
    absl::StatusOr<NodeId> node = CompileType(schema, type, depth, ref_depth, path);
    if (!node.ok()) return node.status();
    alternatives.push_back(*node);
  }
  return b_->Choice(std::move(alternatives));
}

absl::StatusOr<NodeId> SchemaCompiler::CompileRef(const Json& ref, uint32_t ref_depth,
                                                  const std::string& path) {
  if (!ref.is_string() || ref.get<std::string>().rfind("#", 0) != 0) {
    return Error(path, "only local '$ref's (\"#...\") are supported");
  }
  const std::string target = ref.get<std::string>();
  // Past the depth bound this alternative is cut; if it was mandatory the
  // whole schema becomes unproductive and Build() reports it.
  if (ref_depth + 1 > b_->options.max_ref_depth) return kNeverNode;
  const auto key = std::make_pair(target, ref_depth + 1);
  if (auto it = refs_.find(key); it != refs_.end()) return it->second;
  const Json* resolved = nullptr;
  try {
    resolved = &root_->at(Json::json_pointer(target.substr(1)));
  } catch (const nlohmann::json::exception&) {
    return Error(path, absl::StrCat("'$ref' ", target, " does not resolve"));
  }
  absl::StatusOr<NodeId> node = Compile(*resolved, 0, ref_depth + 1, target);
  if (node.ok()) refs_[key] = *node;
  return node;
}

absl::StatusOr<NodeId> SchemaCompiler::CompileAlternatives(const Json& list, uint32_t depth,
                                                           uint32_t ref_depth,
                                                           const std::string& path) {
  std::vector<NodeId> alternatives;
  for (size_t i = 0; i < list.size(); ++i) {
    absl::StatusOr<NodeId> node =
        Compile(list[i], depth + 1, ref_depth, Child(path, std::to_string(i)));
    if (!node.ok()) return node.status();
    alternatives.push_back(*node);
  }
  return b_->Choice(std::move(alternatives));
}

absl::StatusOr<NodeId> SchemaCompiler::CompileEnum(const Json& schema,
                                                   const std::vector<std::string>& types,
                                                   const std::string& path) {
  std::vector<Json> values;
  if (auto it = schema.find("enum"); it != schema.end()) {
    if (!it->is_array()) return Error(path, "'enum' must be an array");
    values = it->get<std::vector<Json>>();
  }
  if (auto it = schema.find("const"); it != schema.end()) {
    if (schema.contains("enum")) {
      std::erase_if(values, [&](const Json& v) { return v != *it; });
    } else {
      values = {*it};
    }
  }
  ByteTrie trie;
  bool any = false;
  for (const Json& v : values) {
    const bool typed = types.empty() || std::any_of(types.begin(), types.end(),
                                                    [&](auto& t) { return MatchesType(v, t); });
    if (!typed) continue;
    trie.Insert(v.dump());
    any = true;
  }
  if (!any) return Error(path, "'enum'/'const' leaves no value of the allowed types");
  const uint32_t index = b_->AddTrie(std::move(trie));
  Node node = MakeNode(NodeKind::kLiteralSet);
  node.trie = index;
  return b_->Add(std::move(node));
}

absl::StatusOr<NodeId> SchemaCompiler::CompileType(const Json& schema, const std::string& type,
                                                   uint32_t depth, uint32_t ref_depth,
                                                   const std::string& path) {
  if (type == "object") return CompileObject(schema, depth, ref_depth, path);
  if (type == "array") return CompileArray(schema, depth, ref_depth, path);
  if (type == "string") return CompileString(schema, path);
  if (type == "integer") return CompileInteger(schema, path);
  if (type == "number") {
    for (const char* key : kBounds) {
      if (schema.contains(key)) {
        return Error(path, absl::StrCat("unsupported keyword '", key,
                                        "' for type number (supported for integers)"));
      }
    }
    return b_->Number(false);
  }
  if (type == "boolean") return b_->Choice({b_->Literal("true"), b_->Literal("false")});
  return b_->Literal("null");
}

absl::StatusOr<NodeId> SchemaCompiler::CompileObject(const Json& schema, uint32_t depth,
                                                     uint32_t ref_depth, const std::string& path) {
  static const Json kEmpty = Json::object();
  const Json* properties = &kEmpty;
  if (auto it = schema.find("properties"); it != schema.end()) {
    if (!it->is_object()) return Error(path, "'properties' must be an object");
    properties = &*it;
  }
  std::set<std::string> required;
  if (auto it = schema.find("required"); it != schema.end()) {
    if (!it->is_array()) return Error(path, "'required' must be an array of strings");
    for (const Json& name : *it) {
      if (!name.is_string()) return Error(path, "'required' must be an array of strings");
      if (!properties->contains(name.get<std::string>())) {
        return Error(path, absl::StrCat("required property ", name.dump(),
                                        " is not declared in 'properties'"));
      }
      required.insert(name.get<std::string>());
    }
  }
  Node members = MakeNode(NodeKind::kMembers);
  ByteTrie declared;
  for (const auto& [name, sub] : properties->items()) {
    absl::StatusOr<NodeId> value =
        Compile(sub, depth + 1, ref_depth, Child(path, "properties", name));
    if (!value.ok()) return value.status();
    const NodeId member = b_->Member(b_->Literal(Json(name).dump()), *value);
    members.children.push_back(member);
    members.with_sep.push_back(b_->WithSeparator(member));
    members.required.push_back(required.contains(name));
    declared.Insert(name);
  }
  // additionalProperties absent: an object that lists `properties` (even an
  // empty list) has only those, so that it can close once they are written
  // (llama.cpp's json-schema-to-grammar does the same, and OpenAI's strict
  // mode asks for false); one that lists none is any object.
  NodeId extra_value = kNeverNode;
  if (auto it = schema.find("additionalProperties"); it != schema.end()) {
    absl::StatusOr<NodeId> value =
        Compile(*it, depth + 1, ref_depth, Child(path, "additionalProperties"));
    if (!value.ok()) return value.status();
    extra_value = *value;
  } else if (!schema.contains("properties")) {
    extra_value = b_->AnyValue(b_->options.max_any_depth);
  }
  if (extra_value != kNeverNode) {
    // Extra keys must differ from the declared names (a duplicate key would
    // override a declared value).
    const uint32_t excluded = properties->empty() ? kNoTrie : b_->AddTrie(std::move(declared));
    members.extra = b_->Member(b_->String(0, b_->options.max_key_length, excluded), extra_value);
    members.extra_with_sep = b_->WithSeparator(members.extra);
    members.max = b_->options.max_additional_properties;
  }
  return b_->Object(b_->Add(std::move(members)));
}

absl::StatusOr<NodeId> SchemaCompiler::CompileArray(const Json& schema, uint32_t depth,
                                                    uint32_t ref_depth, const std::string& path) {
  absl::StatusOr<std::optional<uint32_t>> min = Count(schema, "minItems", path);
  if (!min.ok()) return min.status();
  absl::StatusOr<std::optional<uint32_t>> max = Count(schema, "maxItems", path);
  if (!max.ok()) return max.status();
  const uint32_t lo = min->value_or(0);
  uint32_t hi = max->value_or(std::max(lo, b_->options.max_array_items));
  if (hi < lo) return Error(path, "'maxItems' is below 'minItems'");
  NodeId item = b_->AnyValue(b_->options.max_any_depth);
  if (auto it = schema.find("items"); it != schema.end()) {
    if (it->is_array()) return Error(path, "'items' as an array (tuple) is unsupported");
    absl::StatusOr<NodeId> node = Compile(*it, depth + 1, ref_depth, Child(path, "items"));
    if (!node.ok()) return node.status();
    item = *node;
  }
  if (item == kNeverNode) hi = 0;  // "items": false.
  if (hi < lo) return Error(path, "'items' is false but 'minItems' is positive");
  return b_->Array(item, lo, hi);
}

absl::StatusOr<NodeId> SchemaCompiler::CompileInteger(const Json& schema, const std::string& path) {
  if (!HasAny(schema, {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) {
    return b_->Number(true);
  }
  // Bounds are clamped to 18 digits (what the range leaf can count).
  constexpr double kLimit = 999999999999999999.0;
  const uint32_t digits = std::min<uint32_t>(b_->options.max_integer_digits, 18);
  double lo = -(std::pow(10.0, digits) - 1);
  double hi = std::pow(10.0, digits) - 1;
  for (const char* key : kBounds) {
    auto it = schema.find(key);
    if (it == schema.end()) continue;
    if (!it->is_number()) return Error(path, absl::StrCat("'", key, "' must be a number"));
    const double v = it->get<double>();
    const std::string k = key;
    if (k == "minimum") lo = std::max(lo, std::ceil(v));
    if (k == "exclusiveMinimum") lo = std::max(lo, std::floor(v) + 1);
    if (k == "maximum") hi = std::min(hi, std::floor(v));
    if (k == "exclusiveMaximum") hi = std::min(hi, std::ceil(v) - 1);
  }
  lo = std::max(lo, -kLimit);
  hi = std::min(hi, kLimit);
  if (lo > hi) return Error(path, "no integer satisfies the minimum/maximum bounds");
  Node node = MakeNode(NodeKind::kIntRange);
  node.int_min = static_cast<int64_t>(lo);
  node.int_max = static_cast<int64_t>(hi);
  return b_->Add(std::move(node));
}

absl::StatusOr<NodeId> SchemaCompiler::CompileString(const Json& schema, const std::string& path) {
  absl::StatusOr<std::optional<uint32_t>> min = Count(schema, "minLength", path);
  if (!min.ok()) return min.status();
  absl::StatusOr<std::optional<uint32_t>> max = Count(schema, "maxLength", path);
  if (!max.ok()) return max.status();
  const uint32_t lo = min->value_or(0);
  const uint32_t hi = max->value_or(std::max(lo, b_->options.max_string_length));
  if (hi < lo) return Error(path, "'maxLength' is below 'minLength'");
  return b_->String(lo, hi);
}

}  // namespace ringlm::grammar::internal
