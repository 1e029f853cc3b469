// Globals (range, namespace, dict, raise_exception, strftime_now), macro
// calls and the loop object.
#include <memory>

#include "absl/time/clock.h"
#include "chat/jinja/internal/interpreter.h"

namespace ringlm::jinja::internal {
namespace {

constexpr uint32_t kMaxStoredDepth = 64;

absl::StatusOr<Value> Range(Interpreter& in, const CallArgs& args) {
  if (!args.kwargs.empty() || args.args.empty() || args.args.size() > 3) {
    return TemplateError(args.line, "TypeError: range expected 1 to 3 integer arguments");
  }
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < args.args.size(); ++i) {
    const Value& a = args.args[i];
    if (!(a.is_int() || a.is_bool())) {
      return TemplateError(args.line, Cat("TypeError: '", PyTypeName(a),
                                          "' object cannot be interpreted "
                                          "as an integer"));
    }
    v[i] = a.AsInt();
  }
  int64_t start = args.args.size() == 1 ? 0 : v[0];
  int64_t stop = args.args.size() == 1 ? v[0] : v[1];
  int64_t step = args.args.size() == 3 ? v[2] : 1;
  if (step == 0) return TemplateError(args.line, "ValueError: range() arg 3 must not be zero");
  // Count without overflow.
  __int128 count = 0;
  if (step > 0 && stop > start) {
    count = ((__int128)stop - start + step - 1) / step;
  } else if (step < 0 && stop < start) {
    count = ((__int128)start - stop - step - 1) / -step;
  }
  JINJA_RETURN_IF_ERROR(in.CheckList(count > (__int128)in.options().max_list_items
                                         ? in.options().max_list_items + 1
                                         : static_cast<size_t>(count),
                                     args.line));
  ValueList items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
    items.push_back(Value::Int(start + i * step));
  }
  return Value::List(std::move(items));
}

// Copies mapping arguments and keyword arguments into *dict; *trusted
// becomes false if a copied dict's keys came from the client.
absl::Status FillDict(const CallArgs& args, ValueDict* dict, bool* trusted) {
  for (const Value& a : args.args) {
    if (!a.is_dict()) {
      return TemplateError(args.line, "TypeError: expected a mapping argument");
    }
    *trusted = *trusted && a.trusted();
    for (const auto& [key, value] : a.AsDict().items()) dict->Set(key, value);
  }
  for (const auto& [key, value] : args.kwargs) dict->Set(key, value);
  return absl::OkStatus();
}

}  // namespace

void Interpreter::InstallGlobals(Scope* globals) {
  auto add = [&](std::string name, BuiltinFn fn) {
    (*globals)[name] = Value::FromObject(std::make_shared<BuiltinFunction>(name, std::move(fn)));
  };
  add("range", Range);
  add("namespace", [](Interpreter& in, const CallArgs& args) -> absl::StatusOr<Value> {
    auto ns = std::make_shared<NamespaceObject>();
    bool trusted = true;  // namespace keys are attribute names, never printed
    JINJA_RETURN_IF_ERROR(FillDict(args, &ns->attrs(), &trusted));
    for (const auto& [key, value] : ns->attrs().items()) {
      JINJA_RETURN_IF_ERROR(in.CheckStoredDepth(value, args.line));
    }
    in.namespaces_.push_back(ns);
    return Value::FromObject(ns);
  });
  add("dict", [](Interpreter&, const CallArgs& args) -> absl::StatusOr<Value> {
    ValueDict dict;
    bool trusted = true;
    JINJA_RETURN_IF_ERROR(FillDict(args, &dict, &trusted));
    return Value::Dict(std::move(dict), trusted);
  });
  add("raise_exception", [](Interpreter&, const CallArgs& args) -> absl::StatusOr<Value> {
    const Value* message = args.Get(0, "message");
    return absl::InvalidArgumentError(message != nullptr ? message->ToText().str()
                                                         : "raise_exception called");
  });
  add("strftime_now", [](Interpreter& in, const CallArgs& args) -> absl::StatusOr<Value> {
    const Value* format = args.Get(0, "format");
    if (format == nullptr || !format->is_string()) {
      return TemplateError(args.line, "TypeError: strftime_now needs a format string");
    }
    absl::Time now = in.options().now ? in.options().now() : absl::Now();
    return Value::String(absl::FormatTime(format->AsText().str(), now, in.options().time_zone),
                         format->AsText().AllControl());
  });
}

absl::Status Interpreter::CheckStoredDepth(const Value& value, int line) const {
  if (value.depth() > kMaxStoredDepth) {
    return absl::ResourceExhaustedError(
        Cat("template value nested deeper than ", kMaxStoredDepth, " at line ", line));
  }
  return absl::OkStatus();
}

Interpreter::~Interpreter() {
  // Break reference cycles and long chains between namespaces iteratively.
  for (const auto& ns : namespaces_) ns->attrs() = ValueDict();
}

absl::StatusOr<Value> Interpreter::CallMacro(const MacroObject& macro, const CallArgs& args) {
  const Stmt& def = *macro.def();
  if (call_depth_ >= options_.max_call_depth) {
    return absl::ResourceExhaustedError(
        Cat("macro calls nested deeper than ", options_.max_call_depth, " at line ", args.line));
  }
  if (args.args.size() > def.params.size()) {
    return TemplateError(args.line, Cat("TypeError: macro '", def.name, "' takes not more than ",
                                        def.params.size(), " argument(s)"));
  }
  Scope frame;
  std::vector<bool> bound(def.params.size(), false);
  for (size_t i = 0; i < args.args.size(); ++i) {
    frame[def.params[i]] = args.args[i];
    bound[i] = true;
  }
  for (const auto& [key, value] : args.kwargs) {
    size_t i = 0;
    while (i < def.params.size() && def.params[i] != key) ++i;
    if (i == def.params.size()) {
      return TemplateError(args.line, Cat("TypeError: macro '", def.name,
                                          "' takes no keyword argument '", key, "'"));
    }
    if (bound[i]) {
      return TemplateError(args.line, Cat("TypeError: macro '", def.name,
                                          "' got multiple values for "
                                          "argument '",
                                          key, "'"));
    }
    frame[key] = value;
    bound[i] = true;
  }
  // Macro bodies see the globals and the template's top level, not the
  // caller's loop variables.
  std::vector<Scope> saved(std::make_move_iterator(scopes_.begin() + 2),
                           std::make_move_iterator(scopes_.end()));
  scopes_.resize(2);
  scopes_.push_back(std::move(frame));
  ++call_depth_;
  absl::Status status;
  for (size_t i = 0; i < def.params.size() && status.ok(); ++i) {
    if (bound[i]) continue;
    if (def.defaults[i] == nullptr) {
      SetVar(def.params[i],
             Value::Undefined(Cat("parameter '", def.params[i], "' was not provided")));
      continue;
    }
    absl::StatusOr<Value> v = Eval(*def.defaults[i]);
    if (v.ok()) {
      SetVar(def.params[i], std::move(*v));
    } else {
      status = v.status();
    }
  }
  Text out;
  if (status.ok()) status = Capture(def.body, &out);
  --call_depth_;
  scopes_.resize(2);
  for (Scope& scope : saved) scopes_.push_back(std::move(scope));
  JINJA_RETURN_IF_ERROR(status);
  return Value::String(std::move(out));
}

Value LoopObject::Attr(std::string_view name) const {
  int64_t i = static_cast<int64_t>(index0_);
  int64_t n = static_cast<int64_t>(items_->size());
  if (name == "index") return Value::Int(i + 1);
  if (name == "index0") return Value::Int(i);
  if (name == "revindex") return Value::Int(n - i);
  if (name == "revindex0") return Value::Int(n - i - 1);
  if (name == "first") return Value::Bool(i == 0);
  if (name == "last") return Value::Bool(i == n - 1);
  if (name == "length") return Value::Int(n);
  if (name == "depth") return Value::Int(1);
  if (name == "depth0") return Value::Int(0);
  if (name == "previtem") {
    if (i == 0) return Value::Undefined("there is no previous item");
    return (*items_)[index0_ - 1];
  }
  if (name == "nextitem") {
    if (i == n - 1) return Value::Undefined("there is no next item");
    return (*items_)[index0_ + 1];
  }
  return Value::Undefined(Cat("'LoopContext object' has no attribute '", name, "'"));
}

}  // namespace ringlm::jinja::internal
