// jinja2's builtin filters (the subset in names.cc), plus HF's tojson.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "chat/jinja/internal/filter_args.h"
#include "chat/jinja/internal/interpreter.h"
#include "chat/jinja/internal/json_dump.h"
#include "chat/jinja/internal/methods.h"
#include "chat/jinja/internal/names.h"
#include "chat/jinja/internal/string_ops.h"
#include "chat/jinja/internal/unicode.h"

namespace ringlm::jinja::internal {
namespace {

// Python's int(str): optional sign, digits with single underscores, spaces.
bool ParsePyInt(std::string_view s, int64_t base, int64_t* out) {
  size_t b = 0;
  size_t e = 0;
  StripSpaceRange(s, true, true, &b, &e);
  std::string t;
  for (size_t i = b; i < e; ++i) {
    if (s[i] == '_') {
      if (i == b || i + 1 >= e || s[i + 1] == '_') return false;
      continue;
    }
    t.push_back(s[i]);
  }
  if (t.empty() || base < 2 || base > 36) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, static_cast<int>(base));
  if (errno != 0 || *end != '\0' || t[0] == ' ') return false;
  if (t.find_first_of("xX") != std::string::npos && base != 16) return false;
  *out = v;
  return true;
}

// Python's float(str).
bool ParsePyFloat(std::string_view s, double* out) {
  size_t b = 0;
  size_t e = 0;
  StripSpaceRange(s, true, true, &b, &e);
  std::string t(s.substr(b, e - b));
  if (t.empty()) return false;
  std::string lower = PyLower(t);
  std::string body = lower[0] == '+' || lower[0] == '-' ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity" || body == "nan") {
    double v = body == "nan" ? NAN : INFINITY;
    *out = lower[0] == '-' ? -v : v;
    return true;
  }
  for (char c : body) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' ||
          c == '-' || c == '_')) {
      return false;
    }
  }
  std::string clean;
  for (char c : t) {
    if (c != '_') clean.push_back(c);
  }
  char* end = nullptr;
  *out = std::strtod(clean.c_str(), &end);
  return *end == '\0';
}

}  // namespace

absl::StatusOr<Value> Interpreter::ApplyFilter(std::string_view name, const Value& input,
                                               const CallArgs& args) {
  const int line = args.line;
  // Markup(value): a string (autoescape is off, so nothing is escaped).
  if (name == "safe") return Value::String(input.ToText());
  if (name == "string") return Value::String(input.ToText());
  if (name == "trim") {
    const Value* chars = args.Get(0, "chars");
    Text chars_text;
    if (chars != nullptr && !chars->is_none()) chars_text = chars->ToText();
    return Value::String(StripText(
        input.ToText(), chars != nullptr && !chars->is_none() ? &chars_text : nullptr, true, true));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    Text t = input.ToText();
    std::string s = name == "upper"        ? PyUpper(t.str())
                    : name == "lower"      ? PyLower(t.str())
                    : name == "capitalize" ? PyCapitalize(t.str())
                                           : std::string();
    if (name == "title") {
      // jinja2's do_title: capitalize each item split on [-\s({\[<]+.
      const std::string& str = t.str();
      bool at_start = true;
      for (size_t pos = 0; pos < str.size();) {
        size_t len = 1;
        uint32_t cp = DecodeUtf8(str, pos, &len);
        std::string_view piece = std::string_view(str).substr(pos, len);
        bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || IsPySpace(cp);
        if (sep) {
          s.append(piece);
          at_start = true;
        } else {
          s += at_start ? PyUpper(piece) : PyLower(piece);
          at_start = false;
        }
        pos += len;
      }
    }
    return Value::String(t.Derived(std::move(s)));
  }
  if (name == "escape" || name == "e" || name == "forceescape") {
    Text t = input.ToText();
    std::string s;
    for (char c : t.str()) {
      switch (c) {
        case '&':
          s += "&amp;";
          break;
        case '<':
          s += "&lt;";
          break;
        case '>':
          s += "&gt;";
          break;
        case '"':
          s += "&#34;";
          break;
        case '\'':
          s += "&#39;";
          break;
        default:
          s.push_back(c);
      }
    }
    return Value::String(t.Derived(std::move(s)));
  }
  if (name == "tojson") {
    // HF: tojson(x, ensure_ascii=False, indent=None, separators=None,
    // sort_keys=False).
    JsonDumpOptions o;
    o.ensure_ascii = BoolArg(args, 0, "ensure_ascii", false);
    const Value* indent = args.Get(1, "indent");
    if (indent != nullptr && !indent->is_none()) {
      if (indent->is_string()) {
        o.indent = indent->AsText().str();
      } else if (indent->is_int() || indent->is_bool()) {
        o.indent =
            std::string(static_cast<size_t>(std::clamp<int64_t>(indent->AsInt(), 0, 64)), ' ');
      } else {
        return FilterError(args, name, "indent must be an int or str");
      }
    }
    const Value* separators = args.Get(2, "separators");
    if (separators != nullptr && !separators->is_none()) {
      if (!separators->is_list() || separators->AsList().size() != 2 ||
          !separators->AsList()[0].is_string() || !separators->AsList()[1].is_string()) {
        return FilterError(args, name, "separators must be a pair of strings");
      }
      o.item_separator = separators->AsList()[0].AsText().str();
      o.key_separator = separators->AsList()[1].AsText().str();
    }
    o.sort_keys = BoolArg(args, 3, "sort_keys", false);
    o.max_bytes = options_.max_output_bytes;
    absl::StatusOr<std::string> json = JsonDump(input, o);
    if (absl::IsResourceExhausted(json.status())) return json.status();
    if (!json.ok()) return TemplateError(line, json.status().message());
    JINJA_RETURN_IF_ERROR(CheckString(json->size(), line));
    return Value::String(Text(*json, AllTrusted(input)));
  }
  if (name == "length" || name == "count") {
    switch (input.kind()) {
      case Value::Kind::kUndefined:
        return Value::Int(0);
      case Value::Kind::kString:
        return Value::Int(static_cast<int64_t>(CodePointCount(input.AsText().str())));
      case Value::Kind::kList:
        if (input.is_generator()) {
          return TemplateError(line, "TypeError: object of type 'generator' has no len()");
        }
        return Value::Int(static_cast<int64_t>(input.AsList().size()));
      case Value::Kind::kDict:
        return Value::Int(static_cast<int64_t>(input.AsDict().size()));
      default:
        return TemplateError(
            line, Cat("TypeError: object of type '", PyTypeName(input), "' has no len()"));
    }
  }
  if (name == "default" || name == "d") {
    const Value* dflt = args.Get(0, "default_value");
    bool boolean = BoolArg(args, 1, "boolean", false);
    if (input.is_undefined() || (boolean && !input.Truthy())) {
      return dflt != nullptr ? *dflt : Value::String("", true);
    }
    return input;
  }
  if (name == "abs") {
    if (input.is_int() || input.is_bool()) {
      int64_t v = input.AsInt();
      if (v == INT64_MIN) return TemplateError(line, "integer overflow");
      return Value::Int(v < 0 ? -v : v, input.trusted());
    }
    if (input.is_float()) return Value::Float(std::fabs(input.AsDouble()), input.trusted());
    return FilterError(args, name, Cat("bad operand type for abs(): '", PyTypeName(input), "'"));
  }
  if ((name == "int" || name == "float") && input.is_undefined()) {
    // int(Undefined) / float(Undefined) raise UndefinedError in jinja2.
    std::string hint = input.UndefinedHint();
    return TemplateError(line, Cat("UndefinedError: ", hint.empty() ? "value is undefined" : hint));
  }
  if (name == "int") {
    const Value* dflt = args.Get(0, "default");
    JINJA_ASSIGN_OR_RETURN(int64_t base, IntArg(args, 1, "base", 10, name));
    Value fallback = dflt != nullptr ? *dflt : Value::Int(0);
    if (input.is_int() || input.is_bool()) return Value::Int(input.AsInt(), input.trusted());
    if (input.is_float()) {
      double d = input.AsDouble();
      if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) {
        return TemplateError(line, "OverflowError: cannot convert float to integer");
      }
      return Value::Int(static_cast<int64_t>(d), input.trusted());
    }
    if (input.is_string()) {
      int64_t v = 0;
      if (ParsePyInt(input.AsText().str(), base, &v)) return Value::Int(v, input.trusted());
      double d = 0;
      if (ParsePyFloat(input.AsText().str(), &d) && std::isfinite(d) && std::fabs(d) < 9.2e18) {
        return Value::Int(static_cast<int64_t>(d), input.trusted());
      }
    }
    return fallback;
  }
  if (name == "float") {
    const Value* dflt = args.Get(0, "default");
    Value fallback = dflt != nullptr ? *dflt : Value::Float(0.0);
    if (input.is_number()) return Value::Float(input.AsDouble(), input.trusted());
    double d = 0;
    if (input.is_string() && ParsePyFloat(input.AsText().str(), &d)) {
      return Value::Float(d, input.trusted());
    }
    return fallback;
  }
  if (name == "round") {
    JINJA_ASSIGN_OR_RETURN(int64_t precision, IntArg(args, 0, "precision", 0, name));
    const Value* method_v = args.Get(1, "method");
    std::string method = method_v != nullptr ? method_v->ToText().str() : "common";
    if (method != "common" && method != "ceil" && method != "floor") {
      return FilterError(args, name, "method must be common, ceil or floor");
    }
    if (!input.is_number()) {
      return FilterError(args, name, "type doesn't define __round__ method");
    }
    if (method == "common") {
      if (input.is_int() || input.is_bool()) return Value::Int(input.AsInt(), input.trusted());
      precision = std::clamp<int64_t>(precision, -20, 30);
      double x = input.AsDouble();
      if (!std::isfinite(x)) return Value::Float(x, input.trusted());
      if (precision >= 0) {
        char buf[512];
        snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
        return Value::Float(std::strtod(buf, nullptr), input.trusted());
      }
      double scale = std::pow(10.0, static_cast<double>(-precision));
      return Value::Float(std::nearbyint(x / scale) * scale, input.trusted());
    }
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = input.AsDouble() * scale;
    x = method == "ceil" ? std::ceil(x) : std::floor(x);
    return Value::Float(x / scale, input.trusted());
  }
  if (name == "replace") {
    const Value* old_v = args.Get(0, "old");
    const Value* new_v = args.Get(1, "new");
    if (old_v == nullptr || new_v == nullptr) {
      return FilterError(args, name, "needs old and new");
    }
    JINJA_ASSIGN_OR_RETURN(int64_t count, IntArg(args, 2, "count", -1, name));
    Text out = ReplaceText(input.ToText(), old_v->ToText(), new_v->ToText(), count,
                           options_.max_output_bytes);
    JINJA_RETURN_IF_ERROR(CheckString(out.size(), line));
    return Value::String(std::move(out));
  }
  if (name == "indent") {
    const Value* width = args.Get(0, "width");
    Text indention;
    if (width == nullptr) {
      indention = Text("    ", true);
    } else if (width->is_string()) {
      indention = width->AsText();
    } else if (width->is_int() || width->is_bool()) {
      indention =
          Text(std::string(static_cast<size_t>(std::clamp<int64_t>(width->AsInt(), 0, 1024)), ' '),
               width->trusted());
    } else {
      return FilterError(args, name, "width must be an int or str");
    }
    // do_indent appends "\n" to its input without converting it first.
    if (!input.is_string()) {
      if (input.is_undefined()) return TemplateError(line, "UndefinedError: value is undefined");
      return TemplateError(line, Cat("TypeError: unsupported operand type(s) for +=: '",
                                     PyTypeName(input), "' and 'str'"));
    }
    bool first = BoolArg(args, 1, "first", false);
    bool blank = BoolArg(args, 2, "blank", false);
    Text s = input.ToText();
    s.Append("\n", true);
    std::vector<Text> lines = SplitLines(s, options_.max_list_items);
    JINJA_RETURN_IF_ERROR(CheckList(lines.size(), line));
    Text out;
    Text newline("\n", true);
    if (blank) {
      for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) {
          out.Append(newline);
          out.Append(indention);
        }
        out.Append(lines[i]);
        JINJA_RETURN_IF_ERROR(CheckString(out.size(), line));
      }
    } else if (!lines.empty()) {
      out.Append(lines[0]);
      for (size_t i = 1; i < lines.size(); ++i) {
        out.Append(newline);
        if (!lines[i].empty()) out.Append(indention);
        out.Append(lines[i]);
        JINJA_RETURN_IF_ERROR(CheckString(out.size(), line));
      }
    }
    if (first) {
      Text with = indention;
      with.Append(out);
      out = std::move(with);
    }
    JINJA_RETURN_IF_ERROR(CheckString(out.size(), line));
    return Value::String(std::move(out));
  }
  if (name == "format") {
    std::vector<Value> fargs = args.args;
    if (!args.kwargs.empty()) {
      return absl::UnimplementedError(
          Cat("unsupported: format filter with keyword arguments at line ", line));
    }
    // `str % list` / `str % dict` (not a tuple): Python allows the argument
    // to go unused.
    bool mapping_like =
        args.args.size() == 1 && args.kwargs.empty() &&
        (args.args[0].is_dict() || (args.args[0].is_list() && !args.args[0].is_tuple())) &&
        percent_operator_;
    absl::StatusOr<Text> out =
        PercentFormat(input.ToText(), fargs, options_.max_output_bytes, mapping_like);
    if (absl::IsResourceExhausted(out.status())) return out.status();
    if (!out.ok()) return TemplateError(line, out.status().message());
    JINJA_RETURN_IF_ERROR(CheckString(out->size(), line));
    return Value::String(std::move(*out));
  }
  if (name == "wordcount") {
    const Text text = input.ToText();
    const std::string& s = text.str();
    int64_t words = 0;
    bool in_word = false;
    for (unsigned char c : s) {
      bool w = std::isalnum(c) || c == '_' || c >= 0x80;
      if (w && !in_word) ++words;
      in_word = w;
    }
    return Value::Int(words, true);
  }
  if (name == "truncate") {
    // do_truncate takes len() of its input as is: short lists come back
    // unchanged, numbers fail.
    if (!input.is_string()) {
      if (input.is_undefined()) return input;
      JINJA_ASSIGN_OR_RETURN(Value len, ApplyFilter("length", input, CallArgs{{}, {}, line}));
      const Value* length_v = args.Get(0, "length");
      int64_t limit = length_v != nullptr && length_v->is_int() ? length_v->AsInt() : 255;
      if (len.AsInt() <= limit + 5) return input;
      return absl::UnimplementedError(
          Cat("unsupported: truncate of a long ", PyTypeName(input), " at line ", line));
    }
    Text s = input.ToText();
    JINJA_ASSIGN_OR_RETURN(int64_t length, IntArg(args, 0, "length", 255, name));
    bool killwords = BoolArg(args, 1, "killwords", false);
    const Value* end_v = args.Get(2, "end");
    Text end = end_v != nullptr ? end_v->ToText() : Text("...", true);
    JINJA_ASSIGN_OR_RETURN(int64_t leeway, IntArg(args, 3, "leeway", 5, name));
    std::vector<size_t> offsets = CodePointOffsets(s.str());
    int64_t n = static_cast<int64_t>(offsets.size()) - 1;
    int64_t end_len = static_cast<int64_t>(CodePointCount(end.str()));
    if (length < end_len) return FilterError(args, name, "expected length >= len(end)");
    if (leeway < 0) return FilterError(args, name, "expected leeway >= 0");
    if (n <= length + leeway) return Value::String(s);
    int64_t keep = std::min(length - end_len, n);
    Text head = s.Substr(0, offsets[static_cast<size_t>(keep)]);
    if (!killwords) {
      size_t space = head.str().rfind(' ');
      if (space != std::string::npos) head = head.Substr(0, space);
    }
    head.Append(end);
    return Value::String(std::move(head));
  }
  if (name == "attr") {
    const Value* attr = args.Get(0, "name");
    if (attr == nullptr) return FilterError(args, name, "needs a name");
    // Python getattr only: no fallback to dict items.
    if (input.is_dict() && !IsBuiltinMethod(input, attr->ToText().str())) {
      return Value::Undefined(Cat("'dict object' has no attribute '", attr->ToText().str(), "'"));
    }
    return GetAttr(input, attr->ToText().str(), line);
  }

  JINJA_ASSIGN_OR_RETURN(Value result, ApplySequenceFilter(name, input, args));
  // jinja2 returns generators (or an iterator, for reverse) from these.
  bool lazy = name == "map" || name == "select" || name == "reject" || name == "selectattr" ||
              name == "rejectattr" || name == "batch" || name == "unique" || name == "items" ||
              (name == "reverse" && !input.is_string());
  if (lazy && result.is_list()) return result.AsGenerator();
  return result;
}

}  // namespace ringlm::jinja::internal
