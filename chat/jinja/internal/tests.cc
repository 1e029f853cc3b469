// jinja2's builtin tests (`x is defined`, `x is divisibleby 3`, ...).
#include <cmath>

#include "chat/jinja/internal/interpreter.h"

namespace ringlm::jinja::internal {

absl::StatusOr<bool> Interpreter::ApplyTest(std::string_view name, const Value& v,
                                            const CallArgs& args) {
  const int line = args.line;
  auto arg = [&](std::string_view arg_name) -> absl::StatusOr<Value> {
    const Value* a = args.Get(0, arg_name);
    if (a == nullptr) {
      return TemplateError(line, Cat("test '", name, "' needs an argument"));
    }
    return *a;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.AsBool();
  if (name == "false") return v.is_bool() && !v.AsBool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") {
    return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  }
  if (name == "sequence") {
    return v.is_string() || (v.is_list() && !v.is_generator()) || v.is_dict() || v.is_undefined();
  }
  if (name == "callable") {
    if (v.is_undefined()) return true;  // Undefined defines __call__ (which raises)
    if (!v.is_object()) return false;
    Object* o = v.AsObject().get();
    return dynamic_cast<BuiltinFunction*>(o) != nullptr ||
           dynamic_cast<MacroObject*>(o) != nullptr || dynamic_cast<BoundMethod*>(o) != nullptr;
  }
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    JINJA_ASSIGN_OR_RETURN(
        Value r, CallMethod(Value::String(v.ToText()), name == "lower" ? "islower" : "isupper",
                            CallArgs{{}, {}, line}));
    return r.AsBool();
  }
  if (name == "even" || name == "odd" || name == "divisibleby") {
    Value divisor = Value::Int(2);
    if (name == "divisibleby") {
      JINJA_ASSIGN_OR_RETURN(divisor, arg("num"));
    }
    JINJA_ASSIGN_OR_RETURN(Value rem, Binary("%", v, divisor, line));
    bool zero = rem.AsDouble() == 0;
    return name == "odd"
               ? (rem.is_int() && rem.AsInt() == 1) || (rem.is_float() && rem.AsDouble() == 1.0)
               : zero;
  }
  if (name == "sameas") {
    JINJA_ASSIGN_OR_RETURN(Value other, arg("other"));
    // `is` identity: singletons and equal small scalars behave as in CPython
    // for the cases templates use (none, true, false).
    if (v.is_none() || other.is_none()) return v.is_none() && other.is_none();
    if (v.is_bool() || other.is_bool()) {
      return v.is_bool() && other.is_bool() && v.AsBool() == other.AsBool();
    }
    if (v.is_object() && other.is_object()) return v.AsObject() == other.AsObject();
    return false;
  }
  static constexpr std::pair<std::string_view, std::string_view> kCompare[] = {
      {"eq", "=="}, {"equalto", "=="}, {"==", "=="},      {"ne", "!="},
      {"!=", "!="}, {"lt", "<"},       {"lessthan", "<"}, {"<", "<"},
      {"le", "<="}, {"<=", "<="},      {"gt", ">"},       {"greaterthan", ">"},
      {">", ">"},   {"ge", ">="},      {">=", ">="},      {"in", "in"}};
  for (const auto& [test, op] : kCompare) {
    if (name == test) {
      JINJA_ASSIGN_OR_RETURN(Value other, arg(op == "in" ? "seq" : "other"));
      return Compare(op, v, other, line);
    }
  }
  return absl::UnimplementedError(Cat("unsupported Jinja test '", name, "' at line ", line));
}

}  // namespace ringlm::jinja::internal
