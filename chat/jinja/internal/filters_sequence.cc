// jinja2's filters over sequences and mappings: first/last, join, sort,
// unique, min/max/sum, map, select/reject(attr), items/dictsort, batch.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "chat/jinja/internal/filter_args.h"
#include "chat/jinja/internal/interpreter.h"
#include "chat/jinja/internal/names.h"
#include "chat/jinja/internal/unicode.h"

namespace ringlm::jinja::internal {
namespace {}  // namespace

absl::StatusOr<Value> Interpreter::ApplySequenceFilter(std::string_view name, const Value& input,
                                                       const CallArgs& args) {
  const int line = args.line;
  // Attribute getter as jinja2's make_attrgetter: dotted path, subscript
  // semantics, integer parts index.
  auto attr_getter = [&](const Value& item, std::string_view path) -> absl::StatusOr<Value> {
    Value cur = item;
    size_t start = 0;
    while (true) {
      size_t dot = path.find('.', start);
      std::string_view part =
          path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
      Value key = Value::String(part, true);
      if (!part.empty() && part.find_first_not_of("0123456789") == std::string_view::npos) {
        key = Value::Int(std::atoll(std::string(part).c_str()));
      }
      JINJA_ASSIGN_OR_RETURN(cur, GetItem(cur, key, line));
      if (dot == std::string_view::npos) break;
      start = dot + 1;
    }
    return cur;
  };
  auto attribute_arg = [&](size_t index) -> const Value* {
    const Value* v = args.Get(index, "attribute");
    return v != nullptr && !v->is_none() ? v : nullptr;
  };
  // Key for sort/unique/min/max: attribute, then lower-casing strings.
  auto sort_key = [&](const Value& item, const Value* attribute,
                      bool case_sensitive) -> absl::StatusOr<Value> {
    Value key = item;
    if (attribute != nullptr) {
      JINJA_ASSIGN_OR_RETURN(key, attr_getter(item, attribute->ToText().str()));
    }
    if (!case_sensitive && key.is_string()) {
      key = Value::String(PyLower(key.AsText().str()), true);
    }
    return key;
  };

  if (name == "first" || name == "last") {
    if (input.is_list() && !input.AsList().empty()) {
      return name == "first" ? input.AsList().front() : input.AsList().back();
    }
    if (input.is_list() || input.is_undefined()) {
      return Value::Undefined("No first item, sequence was empty.");
    }
    JINJA_ASSIGN_OR_RETURN(ValueList items, Iterate(input, line));
    if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    JINJA_ASSIGN_OR_RETURN(ValueList items, Iterate(input, line));
    return Value::List(std::move(items), input.trusted());
  }
  if (name == "reverse") {
    if (input.is_string()) {
      JINJA_ASSIGN_OR_RETURN(ValueList chars, Iterate(input, line));
      Text out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out.Append(it->AsText());
      return Value::String(std::move(out));
    }
    JINJA_ASSIGN_OR_RETURN(ValueList items, Iterate(input, line));
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items), input.trusted());
  }
  if (name == "join") {
    const Value* sep = args.Get(0, "d");
    Text separator = sep != nullptr ? sep->ToText() : Text("", true);
    const Value* attribute = attribute_arg(1);
    JINJA_ASSIGN_OR_RETURN(ValueList items, Iterate(input, line));
    Text out;
    for (size_t i = 0; i < items.size(); ++i) {
      JINJA_RETURN_IF_ERROR(Step(line));
      if (i > 0) out.Append(separator);
      if (attribute != nullptr) {
        JINJA_ASSIGN_OR_RETURN(Value v, attr_getter(items[i], attribute->ToText().str()));
        out.Append(v.ToText());
      } else {
        out.Append(items[i].ToText());
      }
      JINJA_RETURN_IF_ERROR(CheckString(out.size(), line));
    }
    return Value::String(std::move(out));
  }
  if (name == "items") {
    if (input.is_undefined()) return Value::List({});
    if (!input.is_dict()) {
      return FilterError(args, name, "can only get item pairs from a mapping");
    }
    return CallMethod(input, "items", CallArgs{{}, {}, line});
  }
  if (name == "dictsort") {
    if (!input.is_dict()) return FilterError(args, name, "expected a mapping");
    bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
    const Value* by_v = args.Get(1, "by");
    std::string by = by_v != nullptr ? by_v->ToText().str() : "key";
    if (by != "key" && by != "value") {
      return FilterError(args, name, "You can only sort by either \"key\" or \"value\"");
    }
    bool reverse = BoolArg(args, 2, "reverse", false);
    JINJA_ASSIGN_OR_RETURN(Value pairs, CallMethod(input, "items", CallArgs{{}, {}, line}));
    ValueList items = pairs.AsList();
    absl::Status error;
    size_t pos = by == "key" ? 0 : 1;
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      if (!error.ok()) return false;
      absl::StatusOr<Value> ka = sort_key(a.AsList()[pos], nullptr, case_sensitive);
      absl::StatusOr<Value> kb = sort_key(b.AsList()[pos], nullptr, case_sensitive);
      absl::StatusOr<bool> less = Compare("<", reverse ? *kb : *ka, reverse ? *ka : *kb, line);
      if (!less.ok()) {
        error = less.status();
        return false;
      }
      return *less;
    });
    JINJA_RETURN_IF_ERROR(error);
    return Value::List(std::move(items), input.trusted());
  }
  if (name == "sort") {
    bool reverse = BoolArg(args, 0, "reverse", false);
    bool case_sensitive = BoolArg(args, 1, "case_sensitive", false);
    const Value* attribute = attribute_arg(2);
    JINJA_ASSIGN_OR_RETURN(ValueList items, Iterate(input, line));
    std::vector<std::pair<Value, size_t>> keyed;
    for (size_t i = 0; i < items.size(); ++i) {
      JINJA_ASSIGN_OR_RETURN(Value key, sort_key(items[i], attribute, case_sensitive));
      keyed.emplace_back(std::move(key), i);
    }
    absl::Status error;
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
      if (!error.ok()) return false;
      absl::StatusOr<bool> less =
          Compare("<", reverse ? b.first : a.first, reverse ? a.first : b.first, line);
      if (!less.ok()) {
        error = less.status();
        return false;
      }
      return *less;
    });
    JINJA_RETURN_IF_ERROR(error);
    ValueList out;
    for (const auto& [key, index] : keyed) out.push_back(items[index]);
    return Value::List(std::move(out), input.trusted());
  }
  if (name == "unique") {
    bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
    const Value* attribute = attribute_arg(1);
    JINJA_ASSIGN_OR_RETURN(ValueList items, Iterate(input, line));
    ValueList out;
    absl::flat_hash_set<std::string> seen;
    for (const Value& item : items) {
      JINJA_ASSIGN_OR_RETURN(Value key, sort_key(item, attribute, case_sensitive));
      std::string repr = key.is_number() && key.AsDouble() == std::floor(key.AsDouble())
                             ? Cat("n", key.AsDouble())
                             : key.Repr().str();
      if (seen.insert(repr).second) out.push_back(item);
    }
    return Value::List(std::move(out), input.trusted());
  }
  if (name == "min" || name == "max") {
    bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
    const Value* attribute = attribute_arg(1);
    JINJA_ASSIGN_OR_RETURN(ValueList items, Iterate(input, line));
    if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    JINJA_ASSIGN_OR_RETURN(Value best_key, sort_key(items[0], attribute, case_sensitive));
    for (size_t i = 1; i < items.size(); ++i) {
      JINJA_ASSIGN_OR_RETURN(Value key, sort_key(items[i], attribute, case_sensitive));
      JINJA_ASSIGN_OR_RETURN(bool better, Compare(name == "min" ? "<" : ">", key, best_key, line));
      if (better) {
        best = i;
        best_key = key;
      }
    }
    return items[best];
  }
  if (name == "sum") {
    const Value* attribute = attribute_arg(0);
    const Value* start = args.Get(1, "start");
    Value total = start != nullptr ? *start : Value::Int(0);
    JINJA_ASSIGN_OR_RETURN(ValueList items, Iterate(input, line));
    for (const Value& item : items) {
      Value v = item;
      if (attribute != nullptr) {
        JINJA_ASSIGN_OR_RETURN(v, attr_getter(item, attribute->ToText().str()));
      }
      JINJA_ASSIGN_OR_RETURN(total, Binary("+", total, v, line));
    }
    return total;
  }
  if (name == "batch") {
    JINJA_ASSIGN_OR_RETURN(int64_t count, IntArg(args, 0, "linecount", 1, name));
    if (count <= 0) return FilterError(args, name, "linecount must be positive");
    const Value* fill = args.Get(1, "fill_with");
    JINJA_ASSIGN_OR_RETURN(ValueList items, Iterate(input, line));
    ValueList out;
    ValueList cur;
    for (const Value& item : items) {
      cur.push_back(item);
      if (static_cast<int64_t>(cur.size()) == count) {
        out.push_back(Value::List(std::move(cur)));
        cur.clear();
      }
    }
    if (!cur.empty()) {
      if (fill != nullptr && !fill->is_none()) {
        while (static_cast<int64_t>(cur.size()) < count) cur.push_back(*fill);
      }
      out.push_back(Value::List(std::move(cur)));
    }
    return Value::List(std::move(out));
  }
  // jinja2's map/select/reject family start with `if value:`: a falsy input
  // (none, 0, "") gives nothing instead of failing to iterate.
  if ((name == "map" || name == "select" || name == "reject" || name == "selectattr" ||
       name == "rejectattr") &&
      !input.Truthy()) {
    return Value::List({});
  }
  if (name == "map") {
    JINJA_ASSIGN_OR_RETURN(ValueList items, Iterate(input, line));
    ValueList out;
    const Value* attribute = nullptr;
    for (const auto& [key, value] : args.kwargs) {
      if (key == "attribute") attribute = &value;
    }
    if (attribute != nullptr) {
      const Value* dflt = nullptr;
      for (const auto& [key, value] : args.kwargs) {
        if (key == "default") dflt = &value;
      }
      for (const Value& item : items) {
        JINJA_ASSIGN_OR_RETURN(Value v, attr_getter(item, attribute->ToText().str()));
        if (v.is_undefined() && dflt != nullptr) v = *dflt;
        out.push_back(std::move(v));
      }
      return Value::List(std::move(out), input.trusted());
    }
    if (args.args.empty() || !args.args[0].is_string()) {
      return FilterError(args, name, "map requires a filter name or attribute=");
    }
    std::string filter = args.args[0].AsText().str();
    if (!IsSupportedFilter(filter)) {
      return absl::UnimplementedError(
          Cat("unsupported Jinja filter '", filter, "' in map at line ", line));
    }
    CallArgs rest;
    rest.line = line;
    rest.args.assign(args.args.begin() + 1, args.args.end());
    rest.kwargs = args.kwargs;
    for (const Value& item : items) {
      JINJA_RETURN_IF_ERROR(Step(line));
      JINJA_ASSIGN_OR_RETURN(Value v, ApplyFilter(filter, item, rest));
      out.push_back(std::move(v));
    }
    return Value::List(std::move(out), input.trusted());
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    bool by_attr = name == "selectattr" || name == "rejectattr";
    bool keep_when = name == "select" || name == "selectattr";
    size_t next = 0;
    std::string attribute;
    if (by_attr) {
      if (args.args.empty()) return FilterError(args, name, "missing attribute");
      attribute = args.args[0].ToText().str();
      next = 1;
    }
    std::string test;
    if (next < args.args.size()) {
      test = args.args[next].ToText().str();
      ++next;
      if (!IsSupportedTest(test)) {
        return absl::UnimplementedError(Cat("unsupported Jinja test '", test, "' at line ", line));
      }
    }
    CallArgs rest;
    rest.line = line;
    rest.args.assign(args.args.begin() + std::min(next, args.args.size()), args.args.end());
    rest.kwargs = args.kwargs;
    JINJA_ASSIGN_OR_RETURN(ValueList items, Iterate(input, line));
    ValueList out;
    for (const Value& item : items) {
      JINJA_RETURN_IF_ERROR(Step(line));
      Value subject = item;
      if (by_attr) {
        JINJA_ASSIGN_OR_RETURN(subject, attr_getter(item, attribute));
      }
      bool pass = false;
      if (test.empty()) {
        pass = subject.Truthy();
      } else {
        JINJA_ASSIGN_OR_RETURN(pass, ApplyTest(test, subject, rest));
      }
      if (pass == keep_when) out.push_back(item);
    }
    return Value::List(std::move(out), input.trusted());
  }
  return absl::UnimplementedError(Cat("unsupported Jinja filter '", name, "' at line ", line));
}

}  // namespace ringlm::jinja::internal
