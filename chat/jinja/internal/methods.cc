// Python methods on str, dict and list values, and loop.cycle.
#include "chat/jinja/internal/methods.h"

#include <algorithm>

#include "chat/jinja/internal/interpreter.h"
#include "chat/jinja/internal/string_ops.h"
#include "chat/jinja/internal/unicode.h"

namespace ringlm::jinja::internal {
namespace {

bool OneOf(std::string_view name, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), name) != set.end();
}

absl::Status ArgError(const CallArgs& args, std::string_view method, std::string_view what) {
  return TemplateError(args.line, Cat("TypeError: ", method, "() ", what));
}

absl::StatusOr<const Text*> StringArg(const CallArgs& args, size_t index, std::string_view name,
                                      std::string_view method, bool optional) {
  const Value* v = args.Get(index, name);
  if (v == nullptr || v->is_none()) {
    if (optional) return nullptr;
    return ArgError(args, method, "missing required argument");
  }
  if (!v->is_string()) {
    return ArgError(args, method, Cat("argument must be str, not ", PyTypeName(*v)));
  }
  return &v->AsText();
}

absl::StatusOr<int64_t> IntArg(const CallArgs& args, size_t index, std::string_view name,
                               int64_t dflt) {
  const Value* v = args.Get(index, name);
  if (v == nullptr || v->is_none()) return dflt;
  if (!(v->is_int() || v->is_bool())) {
    return TemplateError(args.line, "TypeError: an integer is required");
  }
  return v->AsInt();
}

Value TextList(const std::vector<Text>& parts) {
  ValueList items;
  items.reserve(parts.size());
  for (const Text& t : parts) items.push_back(Value::String(t));
  return Value::List(std::move(items));
}

// Code-point index of byte offset `pos` in s.
int64_t CodePointIndex(std::string_view s, size_t pos) {
  return static_cast<int64_t>(CodePointCount(s.substr(0, pos)));
}

absl::StatusOr<Value> StringMethod(Interpreter& in, const Value& self, std::string_view name,
                                   const CallArgs& args) {
  const Text& s = self.AsText();
  const std::string& str = s.str();
  if (name == "startswith" || name == "endswith") {
    const Value* arg = args.Get(0, "prefix");
    if (arg == nullptr) return ArgError(args, name, "takes at least 1 argument");
    std::vector<std::string> options;
    if (arg->is_string()) {
      options.push_back(arg->AsText().str());
    } else if (arg->is_tuple()) {
      for (const Value& v : arg->AsList()) {
        if (!v.is_string()) return ArgError(args, name, "tuple must hold str");
        options.push_back(v.AsText().str());
      }
    } else {
      return ArgError(args, name, "first arg must be str or a tuple of str");
    }
    for (const std::string& o : options) {
      if (name == "startswith" ? str.starts_with(o) : str.ends_with(o)) {
        return Value::Bool(true);
      }
    }
    return Value::Bool(false);
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    JINJA_ASSIGN_OR_RETURN(const Text* chars, StringArg(args, 0, "chars", name, true));
    return Value::String(StripText(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    JINJA_ASSIGN_OR_RETURN(const Text* sep, StringArg(args, 0, "sep", name, true));
    if (sep != nullptr && sep->empty()) {
      return TemplateError(args.line, "ValueError: empty separator");
    }
    JINJA_ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(args, 1, "maxsplit", -1));
    std::vector<Text> parts =
        SplitText(s, sep, maxsplit, name == "rsplit", in.options().max_list_items);
    JINJA_RETURN_IF_ERROR(in.CheckList(parts.size(), args.line));
    return TextList(parts);
  }
  if (name == "splitlines") {
    std::vector<Text> lines = SplitLines(s, in.options().max_list_items);
    JINJA_RETURN_IF_ERROR(in.CheckList(lines.size(), args.line));
    return TextList(lines);
  }
  if (name == "upper") return Value::String(s.Derived(PyUpper(str)));
  if (name == "lower") return Value::String(s.Derived(PyLower(str)));
  if (name == "title") return Value::String(s.Derived(PyTitle(str)));
  if (name == "capitalize") return Value::String(s.Derived(PyCapitalize(str)));
  if (name == "replace") {
    JINJA_ASSIGN_OR_RETURN(const Text* old, StringArg(args, 0, "old", name, false));
    JINJA_ASSIGN_OR_RETURN(const Text* rep, StringArg(args, 1, "new", name, false));
    JINJA_ASSIGN_OR_RETURN(int64_t count, IntArg(args, 2, "count", -1));
    Text out = ReplaceText(s, *old, *rep, count, in.options().max_output_bytes);
    JINJA_RETURN_IF_ERROR(in.CheckString(out.size(), args.line));
    return Value::String(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    JINJA_ASSIGN_OR_RETURN(const Text* sub, StringArg(args, 0, "sub", name, false));
    if (args.args.size() > 1) {
      return absl::UnimplementedError(
          Cat("unsupported: str.", name, "() with start/end at line ", args.line));
    }
    if (name == "count") {
      if (sub->empty()) {
        return Value::Int(static_cast<int64_t>(CodePointCount(str)) + 1);
      }
      int64_t n = 0;
      for (size_t p = str.find(sub->str()); p != std::string::npos;
           p = str.find(sub->str(), p + sub->size())) {
        ++n;
      }
      return Value::Int(n);
    }
    size_t p = name[0] == 'r' ? str.rfind(sub->str()) : str.find(sub->str());
    if (p == std::string::npos) {
      if (name == "index" || name == "rindex") {
        return TemplateError(args.line, "ValueError: substring not found");
      }
      return Value::Int(-1);
    }
    return Value::Int(CodePointIndex(str, p));
  }
  if (name == "format") {
    absl::StatusOr<Text> out =
        BraceFormat(s, args.args, in.options().max_output_bytes, args.kwargs);
    if (absl::IsResourceExhausted(out.status())) return out.status();
    if (!out.ok()) return TemplateError(args.line, out.status().message());
    JINJA_RETURN_IF_ERROR(in.CheckString(out->size(), args.line));
    return Value::String(std::move(*out));
  }
  if (name == "join") {
    const Value* seq = args.Get(0, "iterable");
    if (seq == nullptr) return ArgError(args, name, "takes exactly one argument");
    JINJA_ASSIGN_OR_RETURN(ValueList items, in.Iterate(*seq, args.line));
    Text out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return TemplateError(args.line,
                             Cat("TypeError: sequence item ", i, ": expected str instance, ",
                                 PyTypeName(items[i]), " found"));
      }
      if (i > 0) out.Append(s);
      out.Append(items[i].AsText());
      JINJA_RETURN_IF_ERROR(in.CheckString(out.size(), args.line));
    }
    return Value::String(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    JINJA_ASSIGN_OR_RETURN(const Text* affix, StringArg(args, 0, "x", name, false));
    if (name == "removeprefix" && str.starts_with(affix->str())) {
      return Value::String(s.Substr(affix->size()));
    }
    if (name == "removesuffix" && !affix->empty() && str.ends_with(affix->str())) {
      return Value::String(s.Substr(0, str.size() - affix->size()));
    }
    return self;
  }
  // Predicates (ASCII classification).
  auto all_of = [&](auto pred) {
    if (str.empty()) return Value::Bool(false);
    return Value::Bool(std::all_of(str.begin(), str.end(), pred));
  };
  if (name == "isdigit") return all_of([](char c) { return c >= '0' && c <= '9'; });
  if (name == "isalpha")
    return all_of([](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; });
  if (name == "isalnum")
    return all_of([](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; });
  if (name == "isspace")
    return all_of([](char c) { return IsPySpace(static_cast<unsigned char>(c)); });
  if (name == "islower" || name == "isupper") {
    bool any_cased = false;
    for (char c : str) {
      if (std::isalpha(static_cast<unsigned char>(c))) {
        any_cased = true;
        bool lower = c >= 'a' && c <= 'z';
        if (lower != (name == "islower")) return Value::Bool(false);
      }
    }
    return Value::Bool(any_cased);
  }
  return TemplateError(args.line, Cat("unknown str method ", name));
}

absl::StatusOr<Value> DictMethod(const Value& self, std::string_view name, const CallArgs& args) {
  const ValueDict& dict = self.AsDict();
  bool trusted = self.trusted();
  if (name == "items" || name == "keys" || name == "values") {
    ValueList out;
    out.reserve(dict.size());
    for (const auto& [key, value] : dict.items()) {
      Value k = Value::String(key, trusted);
      if (name == "keys") {
        out.push_back(std::move(k));
      } else if (name == "values") {
        out.push_back(value);
      } else {
        out.push_back(Value::List({std::move(k), value}, trusted, true));
      }
    }
    return Value::List(std::move(out), trusted);
  }
  if (name == "get") {
    const Value* key = args.Get(0, "key");
    if (key == nullptr) return ArgError(args, name, "expected at least 1 argument");
    const Value* dflt = args.Get(1, "default");
    if (key->is_string()) {
      const Value* found = dict.Find(key->AsText().str());
      if (found != nullptr) return *found;
    }
    return dflt != nullptr ? *dflt : Value::None();
  }
  if (name == "copy") return self;
  return TemplateError(args.line, Cat("unknown dict method ", name));
}

absl::StatusOr<Value> ListMethod(const Value& self, std::string_view name, const CallArgs& args) {
  const ValueList& items = self.AsList();
  const Value* x = args.Get(0, "value");
  if (x == nullptr) return ArgError(args, name, "takes exactly one argument");
  if (name == "count") {
    return Value::Int(std::count(items.begin(), items.end(), *x));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i] == *x) return Value::Int(static_cast<int64_t>(i));
  }
  return TemplateError(args.line, "ValueError: value is not in list");
}

}  // namespace

bool IsBuiltinMethod(const Value& obj, std::string_view name) {
  if (obj.is_string()) {
    return OneOf(
        name,
        {"startswith",   "endswith", "split",   "rsplit",  "splitlines", "strip",   "lstrip",
         "rstrip",       "upper",    "lower",   "title",   "capitalize", "replace", "find",
         "rfind",        "index",    "rindex",  "count",   "format",     "join",    "removeprefix",
         "removesuffix", "isdigit",  "isalpha", "isalnum", "isspace",    "islower", "isupper"});
  }
  if (obj.is_dict()) return OneOf(name, {"items", "keys", "values", "get", "copy"});
  if (obj.is_list()) return OneOf(name, {"count", "index"});
  return false;
}

bool IsUnsafeMethod(const Value& obj, std::string_view name) {
  if (obj.is_dict()) {
    return OneOf(name, {"pop", "popitem", "setdefault", "update", "clear"});
  }
  if (obj.is_list() && !obj.is_tuple()) {
    return OneOf(name, {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"});
  }
  return false;
}

absl::StatusOr<Value> Interpreter::CallMethod(const Value& self, std::string_view name,
                                              const CallArgs& args) {
  if (self.is_string()) return StringMethod(*this, self, name, args);
  if (self.is_dict()) return DictMethod(self, name, args);
  if (self.is_list()) return ListMethod(self, name, args);
  if (self.is_object()) {
    if (auto* loop = dynamic_cast<LoopObject*>(self.AsObject().get())) {
      if (args.args.empty()) {
        return TemplateError(args.line, "TypeError: no items for cycling given");
      }
      return args.args[loop->index0() % args.args.size()];
    }
  }
  return TemplateError(args.line, Cat("unknown method ", name));
}

}  // namespace ringlm::jinja::internal
