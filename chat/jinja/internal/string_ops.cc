#include "chat/jinja/internal/string_ops.h"

#include <string>

#include "absl/status/status.h"
#include "chat/jinja/internal/format_number.h"
#include "chat/jinja/internal/str_cat.h"
#include "chat/jinja/internal/unicode.h"

namespace ringlm::jinja::internal {

Text StripText(const Text& s, const Text* chars, bool left, bool right) {
  size_t begin = 0;
  size_t end = 0;
  if (chars == nullptr) {
    StripSpaceRange(s.str(), left, right, &begin, &end);
  } else {
    StripCharsRange(s.str(), chars->str(), left, right, &begin, &end);
  }
  return s.Substr(begin, end - begin);
}

std::vector<Text> SplitText(const Text& s, const Text* sep, int64_t maxsplit, bool from_right,
                            size_t max_parts) {
  if (maxsplit < 0 || static_cast<uint64_t>(maxsplit) > max_parts) {
    maxsplit = static_cast<int64_t>(max_parts);
  }
  std::vector<Text> parts;
  const std::string& str = s.str();
  if (sep != nullptr) {
    const std::string& d = sep->str();
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        size_t found = str.find(d, pos);
        if (found == std::string::npos) break;
        parts.push_back(s.Substr(pos, found - pos));
        pos = found + d.size();
      }
      parts.push_back(s.Substr(pos));
      return parts;
    }
    size_t end = str.size();
    std::vector<Text> rev;
    while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
      if (end < d.size()) break;
      size_t found = str.rfind(d, end - d.size());
      if (found == std::string::npos) break;
      rev.push_back(s.Substr(found + d.size(), end - found - d.size()));
      end = found;
    }
    rev.push_back(s.Substr(0, end));
    parts.assign(rev.rbegin(), rev.rend());
    return parts;
  }
  // Whitespace split: code points, runs of IsPySpace.
  std::vector<std::pair<size_t, size_t>> words;  // [begin, end)
  std::vector<size_t> offsets = CodePointOffsets(str);
  auto space_at = [&](size_t i) {
    size_t len = 1;
    return IsPySpace(DecodeUtf8(str, offsets[i], &len));
  };
  size_t n = offsets.size() - 1;
  if (!from_right) {
    size_t i = 0;
    while (i < n) {
      while (i < n && space_at(i)) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
        // The rest, with trailing whitespace kept (as Python does).
        words.emplace_back(offsets[i], offsets[n]);
        break;
      }
      size_t j = i;
      while (j < n && !space_at(j)) ++j;
      words.emplace_back(offsets[i], offsets[j]);
      i = j;
    }
  } else {
    size_t i = n;
    std::vector<std::pair<size_t, size_t>> rev;
    while (i > 0) {
      while (i > 0 && space_at(i - 1)) --i;
      if (i == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(rev.size()) == maxsplit) {
        rev.emplace_back(offsets[0], offsets[i]);
        break;
      }
      size_t j = i;
      while (j > 0 && !space_at(j - 1)) --j;
      rev.emplace_back(offsets[j], offsets[i]);
      i = j;
    }
    words.assign(rev.rbegin(), rev.rend());
  }
  for (const auto& [b, e] : words) parts.push_back(s.Substr(b, e - b));
  return parts;
}

Text ReplaceText(const Text& s, const Text& old, const Text& replacement, int64_t count,
                 size_t max_bytes) {
  const std::string& str = s.str();
  Text out;
  if (old.empty()) {
    std::vector<size_t> offsets = CodePointOffsets(str);
    int64_t done = 0;
    for (size_t i = 0; i < offsets.size(); ++i) {
      if (out.size() > max_bytes) return out;
      if (count < 0 || done < count) {
        out.Append(replacement);
        ++done;
      }
      if (i + 1 < offsets.size()) {
        out.Append(s.Substr(offsets[i], offsets[i + 1] - offsets[i]));
      }
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while ((count < 0 || done < count) && out.size() <= max_bytes) {
    size_t found = str.find(old.str(), pos);
    if (found == std::string::npos) break;
    out.Append(s.Substr(pos, found - pos));
    out.Append(replacement);
    pos = found + old.size();
    ++done;
  }
  out.Append(s.Substr(pos));
  return out;
}

std::vector<Text> SplitLines(const Text& s, size_t max_parts) {
  std::vector<Text> lines;
  const std::string& str = s.str();
  size_t start = 0;
  size_t pos = 0;
  while (pos < str.size()) {
    size_t len = 1;
    uint32_t cp = DecodeUtf8(str, pos, &len);
    bool is_break = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C ||
                    cp == 0x1D || cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (is_break) {
      if (lines.size() > max_parts) return lines;
      lines.push_back(s.Substr(start, pos - start));
      if (cp == '\r' && pos + 1 < str.size() && str[pos + 1] == '\n') ++len;
      start = pos + len;
    }
    pos += len;
  }
  if (start < str.size()) lines.push_back(s.Substr(start));
  return lines;
}

absl::StatusOr<Text> PercentFormat(const Text& format, const std::vector<Value>& args,
                                   size_t max_bytes, bool allow_unused) {
  const std::string& f = format.str();
  Text out;
  size_t next_arg = 0;
  size_t literal_start = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') continue;
    if (out.size() > max_bytes) return absl::ResourceExhaustedError("formatted string too large");
    out.Append(format.Substr(literal_start, i - literal_start));
    size_t j = i + 1;
    std::string spec;
    while (j < f.size() && std::string_view("-+ #0").find(f[j]) != std::string_view::npos) {
      spec.push_back(f[j++]);
    }
    while (j < f.size() && f[j] >= '0' && f[j] <= '9') spec.push_back(f[j++]);
    if (j < f.size() && f[j] == '.') {
      spec.push_back(f[j++]);
      while (j < f.size() && f[j] >= '0' && f[j] <= '9') spec.push_back(f[j++]);
    }
    if (j >= f.size()) {
      return absl::InvalidArgumentError("ValueError: incomplete format");
    }
    char conv = f[j];
    if (conv == '%') {
      out.Append("%", format.Substr(i, 1).AllControl());
      literal_start = j + 1;
      i = j;
      continue;
    }
    if (next_arg >= args.size()) {
      return absl::InvalidArgumentError("TypeError: not enough arguments for format string");
    }
    const Value& arg = args[next_arg++];
    char buf[512];
    if (conv == 's' || conv == 'r') {
      Text t = conv == 's' ? arg.ToText() : arg.Repr();
      if (spec.empty()) {
        out.Append(t);
      } else {
        snprintf(buf, sizeof(buf), ("%" + spec + "s").c_str(), t.str().c_str());
        out.Append(buf, t.AllControl());
      }
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
      if (!arg.is_number()) {
        return absl::InvalidArgumentError(
            Cat("TypeError: %", std::string(1, conv), " format: a number is required"));
      }
      long long v = arg.is_float() ? static_cast<long long>(arg.AsDouble())
                                   : static_cast<long long>(arg.AsInt());
      snprintf(buf, sizeof(buf),
               ("%" + spec + "ll" + std::string(1, conv == 'i' ? 'd' : conv)).c_str(), v);
      out.Append(buf, arg.trusted());
    } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'E' || conv == 'g' ||
               conv == 'G') {
      if (!arg.is_number()) {
        return absl::InvalidArgumentError("TypeError: must be real number, not str");
      }
      snprintf(buf, sizeof(buf), ("%" + spec + std::string(1, conv)).c_str(), arg.AsDouble());
      out.Append(buf, arg.trusted());
    } else {
      return absl::InvalidArgumentError(
          Cat("ValueError: unsupported format character '", std::string(1, conv), "'"));
    }
    literal_start = j + 1;
    i = j;
  }
  out.Append(format.Substr(literal_start));
  if (next_arg < args.size() && !allow_unused) {
    return absl::InvalidArgumentError(
        "TypeError: not all arguments converted during string formatting");
  }
  return out;
}

absl::StatusOr<Text> BraceFormat(const Text& format, const std::vector<Value>& args,
                                 size_t max_bytes,
                                 const std::vector<std::pair<std::string, Value>>& kwargs) {
  const std::string& f = format.str();
  Text out;
  size_t auto_index = 0;
  size_t i = 0;
  size_t literal_start = 0;
  while (i < f.size()) {
    char c = f[i];
    if ((c == '{' || c == '}') && i + 1 < f.size() && f[i + 1] == c) {
      out.Append(format.Substr(literal_start, i - literal_start + 1));
      i += 2;
      literal_start = i;
      continue;
    }
    if (c == '}') {
      return absl::InvalidArgumentError("ValueError: Single '}' encountered in format string");
    }
    if (c != '{') {
      ++i;
      continue;
    }
    out.Append(format.Substr(literal_start, i - literal_start));
    size_t close = f.find('}', i);
    if (close == std::string::npos) {
      return absl::InvalidArgumentError("ValueError: Single '{' encountered in format string");
    }
    std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      return absl::InvalidArgumentError(Cat("unsupported str.format field '{", field, "}'"));
    }
    const Value* value = nullptr;
    if (field.empty()) {
      if (auto_index < args.size()) value = &args[auto_index];
      ++auto_index;
    } else if (field.find_first_not_of("0123456789") == std::string::npos) {
      size_t index = std::stoul(field.substr(0, 9));
      if (index < args.size()) value = &args[index];
    } else {
      for (const auto& [key, v] : kwargs) {
        if (key == field) value = &v;
      }
    }
    if (value == nullptr) {
      return absl::InvalidArgumentError(
          Cat("IndexError/KeyError: format field '{", field, "}' has no value"));
    }
    out.Append(value->ToText());
    if (out.size() > max_bytes) return absl::ResourceExhaustedError("formatted string too large");
    i = close + 1;
    literal_start = i;
  }
  out.Append(format.Substr(literal_start));
  return out;
}

}  // namespace ringlm::jinja::internal
