// Python's binary operators and comparisons on template values.
#include <cmath>
#include <limits>
#include <utility>

#include "chat/jinja/internal/interpreter.h"

namespace ringlm::jinja::internal {
namespace {

// Python floor division and modulo for int64.
int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t FloorMod(int64_t a, int64_t b) {
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

bool BothInts(const Value& a, const Value& b) {
  return (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
}

}  // namespace

absl::StatusOr<Value> Interpreter::Binary(std::string_view op, const Value& a, const Value& b,
                                          int line) {
  if (op == "~") {
    Text out = a.ToText();
    Text rhs = b.ToText();
    JINJA_RETURN_IF_ERROR(CheckString(out.size() + rhs.size(), line));
    out.Append(rhs);
    return Value::String(std::move(out));
  }
  if (a.is_undefined()) return UndefinedError(a, line);
  if (b.is_undefined()) return UndefinedError(b, line);
  bool trusted = a.trusted() && b.trusted();
  auto unsupported = [&]() {
    return TypeError(line, Cat("unsupported operand type(s) for ", op, ": '", PyTypeName(a),
                               "' and '", PyTypeName(b), "'"));
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      JINJA_RETURN_IF_ERROR(CheckString(a.AsText().size() + b.AsText().size(), line));
      Text out = a.AsText();
      out.Append(b.AsText());
      return Value::String(std::move(out));
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_generator() &&
        !b.is_generator()) {
      JINJA_RETURN_IF_ERROR(CheckList(a.AsList().size() + b.AsList().size(), line));
      ValueList out = a.AsList();
      out.insert(out.end(), b.AsList().begin(), b.AsList().end());
      return Value::List(std::move(out), trusted, a.is_tuple());
    }
  }
  if (op == "*") {
    const Value* seq = a.is_string() || a.is_list() ? &a : &b;
    const Value* count = seq == &a ? &b : &a;
    if ((seq->is_string() || (seq->is_list() && !seq->is_generator())) &&
        (count->is_int() || count->is_bool())) {
      int64_t n = std::max<int64_t>(0, count->AsInt());
      if (seq->is_string()) {
        const Text& t = seq->AsText();
        if (n > 0 && !t.empty()) {
          JINJA_RETURN_IF_ERROR(
              CheckString(t.size() > options_.max_output_bytes / static_cast<size_t>(n)
                              ? options_.max_output_bytes + 1
                              : t.size() * static_cast<size_t>(n),
                          line));
        }
        Text out;
        for (int64_t i = 0; i < n && !t.empty(); ++i) out.Append(t);
        return Value::String(std::move(out));
      }
      const ValueList& items = seq->AsList();
      if (n > 0 && !items.empty()) {
        JINJA_RETURN_IF_ERROR(
            CheckList(items.size() > options_.max_list_items / static_cast<size_t>(n)
                          ? options_.max_list_items + 1
                          : items.size() * static_cast<size_t>(n),
                      line));
      }
      ValueList out;
      for (int64_t i = 0; i < n && !items.empty(); ++i) {
        out.insert(out.end(), items.begin(), items.end());
      }
      return Value::List(std::move(out), trusted, seq->is_tuple());
    }
  }
  if (op == "%" && a.is_string()) {
    CallArgs args;
    args.line = line;
    if (b.is_tuple()) {
      args.args = b.AsList();
    } else {
      args.args.push_back(b);
    }
    percent_operator_ = true;
    absl::StatusOr<Value> out = ApplyFilter("format", a, args);
    percent_operator_ = false;
    return out;
  }
  if (!a.is_number() || !b.is_number()) return unsupported();
  if (BothInts(a, b) && op != "/") {
    int64_t x = a.AsInt();
    int64_t y = b.AsInt();
    int64_t r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) {
        return TemplateError(line, "integer overflow");
      }
    } else if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) {
        return TemplateError(line, "integer overflow");
      }
    } else if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) {
        return TemplateError(line, "integer overflow");
      }
    } else if (op == "//" || op == "%") {
      if (y == 0) {
        return TemplateError(line, "ZeroDivisionError: integer division or modulo by zero");
      }
      if (x == std::numeric_limits<int64_t>::min() && y == -1) {
        return TemplateError(line, "integer overflow");
      }
      r = op == "//" ? FloorDiv(x, y) : FloorMod(x, y);
    } else if (op == "**") {
      if (y < 0) return Value::Float(std::pow(double(x), double(y)), trusted);
      r = 1;
      for (int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(r, x, &r)) {
          return TemplateError(line, "integer overflow");
        }
        if (r == 0 || r == 1) break;
        if (r == -1) {
          r = ((y - i - 1) % 2 == 0) ? -1 : 1;
          break;
        }
      }
    } else {
      return unsupported();
    }
    return Value::Int(r, trusted);
  }
  double x = a.AsDouble();
  double y = b.AsDouble();
  double r = 0;
  if (op == "+") {
    r = x + y;
  } else if (op == "-") {
    r = x - y;
  } else if (op == "*") {
    r = x * y;
  } else if (op == "/") {
    if (y == 0) return TemplateError(line, "ZeroDivisionError: division by zero");
    r = x / y;
  } else if (op == "//" || op == "%") {
    if (y == 0) {
      return TemplateError(line, "ZeroDivisionError: float modulo");
    }
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    r = op == "%" ? m : std::floor(x / y);
  } else if (op == "**") {
    r = std::pow(x, y);
  } else {
    return unsupported();
  }
  return Value::Float(r, trusted);
}

absl::StatusOr<bool> Interpreter::Compare(std::string_view op, const Value& a, const Value& b,
                                          int line) {
  if (op == "==") return a == b;
  if (op == "!=") return !(a == b);
  if (op == "in" || op == "notin") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) {
        if (a.is_undefined()) return UndefinedError(a, line);
        return TypeError(line, Cat("'in <string>' requires string as "
                                   "left operand, not ",
                                   PyTypeName(a)));
      }
      found = b.AsText().str().find(a.AsText().str()) != std::string::npos;
    } else if (b.is_list()) {
      for (const Value& item : b.AsList()) {
        if (item == a) {
          found = true;
          break;
        }
      }
    } else if (b.is_dict()) {
      found = a.is_string() && b.AsDict().Find(a.AsText().str()) != nullptr;
    } else if (b.is_undefined()) {
      found = false;
    } else {
      return TypeError(line, Cat("argument of type '", PyTypeName(b), "' is not iterable"));
    }
    return op == "in" ? found : !found;
  }
  if (a.is_undefined()) return UndefinedError(a, line);
  if (b.is_undefined()) return UndefinedError(b, line);
  int cmp = 0;
  if (a.is_number() && b.is_number()) {
    if (BothInts(a, b)) {
      cmp = a.AsInt() < b.AsInt() ? -1 : a.AsInt() > b.AsInt() ? 1 : 0;
    } else {
      double x = a.AsDouble();
      double y = b.AsDouble();
      if (std::isnan(x) || std::isnan(y)) return false;
      cmp = x < y ? -1 : x > y ? 1 : 0;
    }
  } else if (a.is_string() && b.is_string()) {
    int c = a.AsText().str().compare(b.AsText().str());
    cmp = c < 0 ? -1 : c > 0 ? 1 : 0;
  } else if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_generator() &&
             !b.is_generator()) {
    const ValueList& x = a.AsList();
    const ValueList& y = b.AsList();
    size_t i = 0;
    while (i < x.size() && i < y.size() && x[i] == y[i]) ++i;
    if (i < x.size() && i < y.size()) {
      JINJA_ASSIGN_OR_RETURN(bool less, Compare("<", x[i], y[i], line));
      cmp = less ? -1 : 1;
    } else {
      cmp = x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
  } else {
    return TypeError(line, Cat("'", op, "' not supported between instances of '", PyTypeName(a),
                               "' and '", PyTypeName(b), "'"));
  }
  if (op == "<") return cmp < 0;
  if (op == "<=") return cmp <= 0;
  if (op == ">") return cmp > 0;
  return cmp >= 0;
}

}  // namespace ringlm::jinja::internal
