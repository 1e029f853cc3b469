// Expression evaluation with Python's operator semantics.
#include <cmath>
#include <limits>
#include <memory>
#include <utility>

#include "chat/jinja/internal/interpreter.h"
#include "chat/jinja/internal/methods.h"
#include "chat/jinja/internal/unicode.h"

namespace ringlm::jinja::internal {
namespace {

Value Missing(const Value& obj, std::string_view name) {
  return Value::Undefined(Cat("'", PyTypeName(obj), " object' has no attribute '", name, "'"));
}

// jinja2's sandbox: a mutating method is an Undefined that fails when used.
Value UnsafeAttr(const Value& obj, std::string_view name) {
  return Value::Undefined(Cat("SecurityError: access to attribute '", name, "' of '",
                              PyTypeName(obj), "' object is unsafe."));
}

}  // namespace

absl::StatusOr<Value> Interpreter::Eval(const Expr& e) {
  JINJA_RETURN_IF_ERROR(Step(e.line));
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName:
      return Lookup(e.name);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      ValueList items;
      items.reserve(e.children.size());
      for (const ExprPtr& child : e.children) {
        JINJA_ASSIGN_OR_RETURN(Value v, Eval(*child));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items), true, e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      ValueDict dict;
      bool keys_trusted = true;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        JINJA_ASSIGN_OR_RETURN(Value key, Eval(*e.children[i]));
        JINJA_ASSIGN_OR_RETURN(Value value, Eval(*e.children[i + 1]));
        if (!key.is_string()) {
          return absl::UnimplementedError(
              Cat("unsupported: dict literal with a non-string key at line ", e.line));
        }
        // Keys are stored as plain strings: a client-provided key makes the
        // whole dict untrusted (its keys then print as content).
        keys_trusted = keys_trusted && key.AsText().AllControl();
        dict.Set(key.AsText().str(), std::move(value));
      }
      return Value::Dict(std::move(dict), keys_trusted);
    }
    case Expr::Kind::kGetAttr: {
      JINJA_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
      return GetAttr(obj, e.name, e.line);
    }
    case Expr::Kind::kGetItem: {
      JINJA_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
      JINJA_ASSIGN_OR_RETURN(Value key, Eval(*e.children[1]));
      return GetItem(obj, key, e.line);
    }
    case Expr::Kind::kSlice:
      return EvalSlice(e);
    case Expr::Kind::kCall:
      return EvalCall(e);
    case Expr::Kind::kFilter: {
      Value input;
      if (e.children[0] != nullptr) {
        JINJA_ASSIGN_OR_RETURN(input, Eval(*e.children[0]));
      } else if (block_input_ != nullptr) {
        input = *block_input_;
      }
      JINJA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      return ApplyFilter(e.name, input, args);
    }
    case Expr::Kind::kTest: {
      JINJA_ASSIGN_OR_RETURN(Value input, Eval(*e.children[0]));
      JINJA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      JINJA_ASSIGN_OR_RETURN(bool result, ApplyTest(e.name, input, args));
      return Value::Bool(result != e.negated);
    }
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      JINJA_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
      if (v.is_undefined()) return UndefinedError(v, e.line);
      bool neg = e.kind == Expr::Kind::kNeg;
      if (v.is_int() || v.is_bool()) {
        int64_t i = v.AsInt();
        if (neg && i == std::numeric_limits<int64_t>::min()) {
          return TemplateError(e.line, "integer overflow");
        }
        return Value::Int(neg ? -i : i, v.trusted());
      }
      if (v.is_float()) {
        return Value::Float(neg ? -v.AsDouble() : v.AsDouble(), v.trusted());
      }
      return TypeError(
          e.line, Cat("bad operand type for unary ", neg ? "-" : "+", ": '", PyTypeName(v), "'"));
    }
    case Expr::Kind::kNot: {
      JINJA_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
      return Value::Bool(!v.Truthy());
    }
    case Expr::Kind::kBinary: {
      JINJA_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0]));
      JINJA_ASSIGN_OR_RETURN(Value b, Eval(*e.children[1]));
      return Binary(e.name, a, b, e.line);
    }
    case Expr::Kind::kCompare: {
      JINJA_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0]));
      for (size_t i = 0; i < e.ops.size(); ++i) {
        JINJA_ASSIGN_OR_RETURN(Value right, Eval(*e.children[i + 1]));
        JINJA_ASSIGN_OR_RETURN(bool ok, Compare(e.ops[i], left, right, e.line));
        if (!ok) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
    case Expr::Kind::kAnd: {
      JINJA_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0]));
      if (!left.Truthy()) return left;
      return Eval(*e.children[1]);
    }
    case Expr::Kind::kOr: {
      JINJA_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0]));
      if (left.Truthy()) return left;
      return Eval(*e.children[1]);
    }
    case Expr::Kind::kCond: {
      JINJA_ASSIGN_OR_RETURN(Value test, Eval(*e.children[1]));
      if (test.Truthy()) return Eval(*e.children[0]);
      if (e.children[2] != nullptr) return Eval(*e.children[2]);
      return Value::Undefined("the inline if-expression evaluated to false");
    }
  }
  return TemplateError(e.line, "unknown expression");
}

absl::StatusOr<CallArgs> Interpreter::EvalArgs(const Expr& e, size_t first_arg) {
  CallArgs args;
  args.line = e.line;
  for (size_t i = first_arg; i < e.children.size(); ++i) {
    JINJA_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i]));
    args.args.push_back(std::move(v));
  }
  for (const auto& [key, expr] : e.kwargs) {
    JINJA_ASSIGN_OR_RETURN(Value v, Eval(*expr));
    args.kwargs.emplace_back(key, std::move(v));
  }
  return args;
}

absl::StatusOr<Value> Interpreter::EvalCall(const Expr& e) {
  const Expr& callee = *e.children[0];
  if (callee.kind == Expr::Kind::kGetAttr) {
    // obj.method(...) without materializing a bound method.
    JINJA_ASSIGN_OR_RETURN(Value obj, Eval(*callee.children[0]));
    if (IsBuiltinMethod(obj, callee.name)) {
      JINJA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      return CallMethod(obj, callee.name, args);
    }
    JINJA_ASSIGN_OR_RETURN(Value fn, GetAttr(obj, callee.name, callee.line));
    JINJA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
    return Call(fn, args);
  }
  JINJA_ASSIGN_OR_RETURN(Value fn, Eval(callee));
  JINJA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
  return Call(fn, args);
}

absl::StatusOr<Value> Interpreter::Call(const Value& callee, const CallArgs& args) {
  if (callee.is_undefined()) return UndefinedError(callee, args.line);
  if (callee.is_object()) {
    Object* object = callee.AsObject().get();
    if (auto* fn = dynamic_cast<BuiltinFunction*>(object)) {
      return fn->fn()(*this, args);
    }
    if (auto* macro = dynamic_cast<MacroObject*>(object)) {
      return CallMacro(*macro, args);
    }
    if (auto* method = dynamic_cast<BoundMethod*>(object)) {
      return CallMethod(method->receiver(), method->name(), args);
    }
  }
  return TypeError(args.line, Cat("'", PyTypeName(callee), "' object is not callable"));
}

absl::StatusOr<Value> Interpreter::GetAttr(const Value& obj, std::string_view name, int line) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      return UndefinedError(obj, line);
    case Value::Kind::kDict: {
      if (IsBuiltinMethod(obj, name)) {
        return Value::FromObject(std::make_shared<BoundMethod>(obj, std::string(name)));
      }
      if (IsUnsafeMethod(obj, name)) return UnsafeAttr(obj, name);
      const Value* found = obj.AsDict().Find(name);
      if (found != nullptr) return *found;
      return Missing(obj, name);
    }
    case Value::Kind::kString:
    case Value::Kind::kList:
      if (IsBuiltinMethod(obj, name)) {
        return Value::FromObject(std::make_shared<BoundMethod>(obj, std::string(name)));
      }
      if (IsUnsafeMethod(obj, name)) return UnsafeAttr(obj, name);
      return Missing(obj, name);
    case Value::Kind::kObject: {
      Object* object = obj.AsObject().get();
      if (auto* ns = dynamic_cast<NamespaceObject*>(object)) {
        const Value* found = ns->attrs().Find(name);
        if (found != nullptr) return *found;
      } else if (auto* loop = dynamic_cast<LoopObject*>(object)) {
        if (name == "cycle") {
          return Value::FromObject(std::make_shared<BoundMethod>(obj, std::string(name)));
        }
        return loop->Attr(name);
      }
      return Missing(obj, name);
    }
    default:
      return Missing(obj, name);
  }
}

absl::StatusOr<Value> Interpreter::GetItem(const Value& obj, const Value& key, int line) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      return UndefinedError(obj, line);
    case Value::Kind::kDict: {
      if (key.is_string()) {
        const Value* found = obj.AsDict().Find(key.AsText().str());
        if (found != nullptr) return *found;
        return GetAttr(obj, key.AsText().str(), line);
      }
      return Value::Undefined(Cat("'dict object' has no attribute ", key.Repr().str()));
    }
    case Value::Kind::kList:
    case Value::Kind::kString: {
      if (obj.is_generator()) {
        return Value::Undefined("'generator' object is not subscriptable");
      }
      if (key.is_int() || key.is_bool()) {
        int64_t index = key.AsInt();
        if (obj.is_list()) {
          const ValueList& items = obj.AsList();
          int64_t n = static_cast<int64_t>(items.size());
          if (index < 0) index += n;
          if (index < 0 || index >= n) {
            return Value::Undefined(
                Cat("'", PyTypeName(obj), " object' has no element ", key.AsInt()));
          }
          return items[static_cast<size_t>(index)];
        }
        const Text& text = obj.AsText();
        std::vector<size_t> offsets = CodePointOffsets(text.str());
        int64_t n = static_cast<int64_t>(offsets.size()) - 1;
        if (index < 0) index += n;
        if (index < 0 || index >= n) {
          return Value::Undefined(Cat("'str object' has no element ", key.AsInt()));
        }
        size_t begin = offsets[static_cast<size_t>(index)];
        return Value::String(text.Substr(begin, offsets[static_cast<size_t>(index) + 1] - begin));
      }
      if (key.is_string()) return GetAttr(obj, key.AsText().str(), line);
      return Value::Undefined("invalid subscript");
    }
    case Value::Kind::kObject:
      if (key.is_string()) return GetAttr(obj, key.AsText().str(), line);
      return Value::Undefined("invalid subscript");
    default:
      return Value::Undefined(Cat("'", PyTypeName(obj), " object' has no element"));
  }
}

absl::StatusOr<Value> Interpreter::EvalSlice(const Expr& e) {
  JINJA_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
  int64_t parts[3] = {0, 0, 1};
  bool given[3] = {false, false, false};
  for (int i = 0; i < 3; ++i) {
    if (e.children[i + 1] == nullptr) continue;
    JINJA_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i + 1]));
    if (v.is_none()) continue;
    if (!(v.is_int() || v.is_bool())) {
      if (v.is_undefined()) return UndefinedError(v, e.line);
      return TypeError(e.line, "slice indices must be integers or None");
    }
    parts[i] = v.AsInt();
    given[i] = true;
  }
  if (obj.is_undefined()) return UndefinedError(obj, e.line);
  if (obj.is_generator()) return Value::Undefined("'generator' object is not subscriptable");
  int64_t step = given[2] ? parts[2] : 1;
  if (step == 0) {
    return TemplateError(e.line, "ValueError: slice step cannot be zero");
  }
  if (step == std::numeric_limits<int64_t>::min()) step = -INT64_MAX;
  std::vector<size_t> offsets;
  int64_t n = 0;
  if (obj.is_list()) {
    n = static_cast<int64_t>(obj.AsList().size());
  } else if (obj.is_string()) {
    offsets = CodePointOffsets(obj.AsText().str());
    n = static_cast<int64_t>(offsets.size()) - 1;
  } else {
    return TypeError(e.line, Cat("'", PyTypeName(obj), "' object is not subscriptable"));
  }
  // PySlice_AdjustIndices.
  auto adjust = [&](int64_t v, bool has, int64_t dflt) {
    if (!has) return dflt;
    if (v < 0) {
      v += n;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= n) {
      v = step < 0 ? n - 1 : n;
    }
    return v;
  };
  int64_t start = adjust(parts[0], given[0], step < 0 ? n - 1 : 0);
  int64_t stop = adjust(parts[1], given[1], step < 0 ? -1 : n);
  std::vector<int64_t> indices;
  if (step > 0) {
    for (int64_t i = start; i < stop; i += step) indices.push_back(i);
  } else {
    for (int64_t i = start; i > stop; i += step) indices.push_back(i);
  }
  if (obj.is_list()) {
    ValueList out;
    out.reserve(indices.size());
    for (int64_t i : indices) out.push_back(obj.AsList()[static_cast<size_t>(i)]);
    return Value::List(std::move(out), obj.trusted(), obj.is_tuple());
  }
  const Text& text = obj.AsText();
  if (step == 1) {
    if (start >= stop) return Value::String(Text());
    size_t b = offsets[static_cast<size_t>(start)];
    return Value::String(text.Substr(b, offsets[static_cast<size_t>(stop)] - b));
  }
  Text out;
  for (int64_t i : indices) {
    size_t b = offsets[static_cast<size_t>(i)];
    out.Append(text.Substr(b, offsets[static_cast<size_t>(i) + 1] - b));
  }
  return Value::String(std::move(out));
}

absl::StatusOr<ValueList> Interpreter::Iterate(const Value& v, int line) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return ValueList();
    case Value::Kind::kList:
      return v.AsList();
    case Value::Kind::kDict: {
      ValueList keys;
      keys.reserve(v.AsDict().size());
      for (const auto& [key, value] : v.AsDict().items()) {
        keys.push_back(Value::String(key, v.trusted()));
      }
      return keys;
    }
    case Value::Kind::kString: {
      const Text& text = v.AsText();
      std::vector<size_t> offsets = CodePointOffsets(text.str());
      JINJA_RETURN_IF_ERROR(CheckList(offsets.size() - 1, line));
      ValueList chars;
      chars.reserve(offsets.size());
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        chars.push_back(Value::String(text.Substr(offsets[i], offsets[i + 1] - offsets[i])));
      }
      return chars;
    }
    default:
      return TypeError(line, Cat("'", PyTypeName(v), "' object is not iterable"));
  }
}

}  // namespace ringlm::jinja::internal
