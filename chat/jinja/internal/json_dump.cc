#include "chat/jinja/internal/json_dump.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "chat/jinja/internal/format_number.h"
#include "chat/jinja/internal/interpreter.h"
#include "chat/jinja/internal/str_cat.h"
#include "chat/jinja/internal/unicode.h"

namespace ringlm::jinja::internal {
namespace {

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    uint32_t cp = DecodeUtf8(s, pos, &len);
    char buf[16];
    switch (cp) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (cp < 0x20) {
          snprintf(buf, sizeof(buf), "\\u%04x", cp);
          *out += buf;
        } else if (ensure_ascii && cp >= 0x80) {
          if (cp >= 0x10000) {
            uint32_t v = cp - 0x10000;
            snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
          } else {
            snprintf(buf, sizeof(buf), "\\u%04x", cp);
          }
          *out += buf;
        } else {
          out->append(s.substr(pos, len));
        }
    }
    pos += len;
  }
  out->push_back('"');
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : o_(o) {
    item_sep_ = o.item_separator.value_or(o.indent.has_value() ? "," : ", ");
    key_sep_ = o.key_separator.value_or(": ");
  }

  absl::Status Dump(const Value& v, int depth) {
    if (out_.size() > o_.max_bytes) {
      return absl::ResourceExhaustedError("tojson output too large");
    }
    if (depth > o_.max_depth) {
      return absl::InvalidArgumentError("RecursionError: value nested too deeply for tojson");
    }
    switch (v.kind()) {
      case Value::Kind::kNone:
        out_ += "null";
        return absl::OkStatus();
      case Value::Kind::kBool:
        out_ += v.AsBool() ? "true" : "false";
        return absl::OkStatus();
      case Value::Kind::kInt:
        out_ += std::to_string(v.AsInt());
        return absl::OkStatus();
      case Value::Kind::kFloat: {
        double d = v.AsDouble();
        if (std::isnan(d)) {
          out_ += "NaN";
        } else if (std::isinf(d)) {
          out_ += d > 0 ? "Infinity" : "-Infinity";
        } else {
          out_ += PyFloatRepr(d);
        }
        return absl::OkStatus();
      }
      case Value::Kind::kString:
        AppendJsonString(v.AsText().str(), o_.ensure_ascii, &out_);
        return absl::OkStatus();
      case Value::Kind::kList: {
        if (v.is_generator()) {
          return absl::InvalidArgumentError(
              "TypeError: Object of type generator is not JSON serializable");
        }
        const ValueList& items = v.AsList();
        if (items.empty()) {
          out_ += "[]";
          return absl::OkStatus();
        }
        out_.push_back('[');
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) out_ += item_sep_;
          NewLine(depth + 1);
          JINJA_RETURN_IF_ERROR(Dump(items[i], depth + 1));
        }
        NewLine(depth);
        out_.push_back(']');
        return absl::OkStatus();
      }
      case Value::Kind::kDict: {
        const auto& items = v.AsDict().items();
        if (items.empty()) {
          out_ += "{}";
          return absl::OkStatus();
        }
        std::vector<size_t> order(items.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        if (o_.sort_keys) {
          std::stable_sort(order.begin(), order.end(),
                           [&](size_t a, size_t b) { return items[a].first < items[b].first; });
        }
        out_.push_back('{');
        for (size_t i = 0; i < order.size(); ++i) {
          if (i > 0) out_ += item_sep_;
          NewLine(depth + 1);
          AppendJsonString(items[order[i]].first, o_.ensure_ascii, &out_);
          out_ += key_sep_;
          JINJA_RETURN_IF_ERROR(Dump(items[order[i]].second, depth + 1));
        }
        NewLine(depth);
        out_.push_back('}');
        return absl::OkStatus();
      }
      default:
        return absl::InvalidArgumentError(
            Cat("TypeError: Object of type ", PyTypeName(v), " is not JSON serializable"));
    }
  }

  std::string& out() { return out_; }

 private:
  void NewLine(int depth) {
    if (!o_.indent.has_value()) return;
    out_.push_back('\n');
    for (int i = 0; i < depth; ++i) out_ += *o_.indent;
  }

  const JsonDumpOptions& o_;
  std::string item_sep_;
  std::string key_sep_;
  std::string out_;
};

}  // namespace

absl::StatusOr<std::string> JsonDump(const Value& value, const JsonDumpOptions& options) {
  Dumper dumper(options);
  JINJA_RETURN_IF_ERROR(dumper.Dump(value, 0));
  return std::move(dumper.out());
}

bool AllTrusted(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kString:
      return value.AsText().AllControl();
    case Value::Kind::kList:
      if (!value.trusted()) return false;
      for (const Value& item : value.AsList()) {
        if (!AllTrusted(item)) return false;
      }
      return true;
    case Value::Kind::kDict:
      if (!value.trusted()) return false;
      for (const auto& [key, item] : value.AsDict().items()) {
        if (!AllTrusted(item)) return false;
      }
      return true;
    default:
      return value.trusted();
  }
}

}  // namespace ringlm::jinja::internal
