#include "base/prometheus_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/internal/metric_names.h"

namespace ringlm {

namespace {

// A cursor over one line, for the parser.
struct LineCursor {
  std::string_view rest;

  bool AtEnd() const { return rest.empty(); }
  char Peek() const { return rest.empty() ? '\0' : rest[0]; }
  bool Consume(char c) {
    if (Peek() != c) return false;
    rest.remove_prefix(1);
    return true;
  }
  // Returns how many blanks (space or tab) were skipped.
  size_t SkipBlanks() {
    size_t n = 0;
    while (!rest.empty() && (rest[0] == ' ' || rest[0] == '\t')) rest.remove_prefix(1), ++n;
    return n;
  }
  std::string_view Token() {  // up to the next blank
    size_t n = 0;
    while (n < rest.size() && rest[n] != ' ' && rest[n] != '\t') ++n;
    std::string_view token = rest.substr(0, n);
    rest.remove_prefix(n);
    return token;
  }
  std::string_view Name(bool allow_colon) {
    size_t n = 0;
    while (n < rest.size() &&
           (n == 0 ? IsNameStart(rest[n], allow_colon) : IsNameChar(rest[n], allow_colon))) {
      ++n;
    }
    std::string_view name = rest.substr(0, n);
    rest.remove_prefix(n);
    return name;
  }
};

// Go's ParseFloat as Prometheus uses it, minus hex and underscores: a decimal
// float, or Inf/+Inf/-Inf/NaN in any case.
std::optional<double> ParseFloatValue(std::string_view s) {
  auto lower = [](std::string_view a) {
    std::string out(a);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  std::string l = lower(s);
  if (l == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (l == "inf" || l == "+inf") return std::numeric_limits<double>::infinity();
  if (l == "-inf") return -std::numeric_limits<double>::infinity();
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) {
    return std::nullopt;
  }
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return negative ? -v : v;
}

// Undoes `\\`, `\n` and (when `allow_quote`) `\"`; nullopt for any other escape.
std::optional<std::string> Unescape(std::string_view s, bool allow_quote) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out.push_back(s[i]);
      continue;
    }
    if (++i == s.size()) return std::nullopt;
    if (s[i] == '\\') {
      out.push_back('\\');
    } else if (s[i] == 'n') {
      out.push_back('\n');
    } else if (s[i] == '"' && allow_quote) {
      out.push_back('"');
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::string SeriesKey(std::string_view name, MetricLabels labels, std::string_view skip_key = "") {
  std::sort(labels.begin(), labels.end());
  std::string key(name);
  for (const auto& [k, v] : labels) {
    if (k != skip_key) absl::StrAppend(&key, "\x1f", k, "\x1e", v);
  }
  return key;
}

struct ParsedFamily {
  std::string type = "untyped";
  bool has_help = false;
  bool has_type = false;
  bool has_samples = false;
};

// What one histogram series (labels without `le`) has shown so far.
struct HistogramSeries {
  std::string family;
  std::vector<std::pair<double, double>> buckets;  // (le, cumulative count) in order
  std::optional<double> sum;
  std::optional<double> count;
};

absl::Status LineError(size_t line_no, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": ", std::string(what)));
}

}  // namespace

absl::StatusOr<std::vector<PrometheusSample>> ParsePrometheusText(std::string_view text) {
  if (!text.empty() && text.back() != '\n') {
    return absl::InvalidArgumentError("the last line does not end with a newline");
  }
  std::vector<PrometheusSample> samples;
  std::map<std::string, ParsedFamily, std::less<>> families;
  std::set<std::string> closed;  // families whose group of lines has ended
  std::string current;           // the family of the latest line
  std::set<std::string> seen_series;
  std::map<std::string, HistogramSeries> histograms;  // by SeriesKey without le
  std::vector<std::string> histogram_order;

  // Every HELP, TYPE or sample line belongs to a family; its lines form one group.
  auto enter_family = [&](const std::string& family) {
    if (family == current) return true;
    if (closed.contains(family)) return false;
    if (!current.empty()) closed.insert(current);
    current = family;
    return true;
  };

  size_t line_no = 0;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol + 1);
    ++line_no;
    LineCursor cur{line};
    cur.SkipBlanks();
    if (cur.AtEnd()) continue;

    if (cur.Consume('#')) {
      cur.SkipBlanks();
      std::string_view keyword = cur.Token();
      if (keyword != "HELP" && keyword != "TYPE") continue;  // a plain comment
      if (cur.SkipBlanks() == 0) return LineError(line_no, "no metric name");
      std::string name(cur.Name(/*allow_colon=*/true));
      if (name.empty() || (!cur.AtEnd() && cur.SkipBlanks() == 0)) {
        return LineError(line_no, "invalid metric name");
      }
      if (!enter_family(name)) return LineError(line_no, name + " lines are not one group");
      ParsedFamily& family = families[name];
      if (family.has_samples) return LineError(line_no, std::string(keyword) + " after samples");
      if (keyword == "HELP") {
        if (family.has_help) return LineError(line_no, "second HELP for " + name);
        if (!Unescape(cur.rest, /*allow_quote=*/false)) {
          return LineError(line_no, "invalid escape in HELP");
        }
        family.has_help = true;
      } else {
        if (family.has_type) return LineError(line_no, "second TYPE for " + name);
        std::string type(cur.Token());
        cur.SkipBlanks();
        if (!cur.AtEnd() || (type != "counter" && type != "gauge" && type != "histogram" &&
                             type != "summary" && type != "untyped")) {
          return LineError(line_no, "invalid TYPE");
        }
        family.has_type = true;
        family.type = type;
      }
      continue;
    }

    // name{labels} value [timestamp]
    PrometheusSample sample;
    sample.name = std::string(cur.Name(/*allow_colon=*/true));
    if (sample.name.empty()) return LineError(line_no, "invalid metric name");
    size_t blanks = cur.SkipBlanks();  // allowed before '{' too
    if (cur.Consume('{')) {
      while (true) {
        cur.SkipBlanks();
        if (cur.Consume('}')) break;
        std::string key(cur.Name(/*allow_colon=*/false));
        if (key.empty()) return LineError(line_no, "invalid label name");
        cur.SkipBlanks();
        if (!cur.Consume('=')) return LineError(line_no, "no '=' after label " + key);
        cur.SkipBlanks();
        if (!cur.Consume('"')) return LineError(line_no, "label value not quoted");
        size_t end = 0;
        while (end < cur.rest.size() && cur.rest[end] != '"') end += cur.rest[end] == '\\' ? 2 : 1;
        if (end >= cur.rest.size()) return LineError(line_no, "unterminated label value");
        std::optional<std::string> value = Unescape(cur.rest.substr(0, end), true);
        if (!value) return LineError(line_no, "invalid escape in label value");
        cur.rest.remove_prefix(end + 1);
        for (const auto& [k, v] : sample.labels) {
          if (k == key) return LineError(line_no, "duplicate label " + key);
        }
        sample.labels.emplace_back(std::move(key), std::move(*value));
        cur.SkipBlanks();
        if (cur.Consume('}')) break;
        if (!cur.Consume(',')) return LineError(line_no, "expected ',' or '}' in labels");
      }
      blanks = cur.SkipBlanks();
    }
    if (blanks == 0) return LineError(line_no, "no blank before the value");
    std::optional<double> value = ParseFloatValue(cur.Token());
    if (!value) return LineError(line_no, "invalid value");
    sample.value = *value;
    if (cur.SkipBlanks() > 0 && !cur.AtEnd()) {
      std::string_view ts = cur.Token();
      int64_t t = 0;
      auto [end, ec] = std::from_chars(ts.data(), ts.data() + ts.size(), t);
      if (ec != std::errc() || end != ts.data() + ts.size()) {
        return LineError(line_no, "invalid timestamp");
      }
      cur.SkipBlanks();
    }
    if (!cur.AtEnd()) return LineError(line_no, "trailing text after the value");

    // Which family: the name itself, or a histogram/summary it is a sample of.
    std::string family_name = sample.name;
    std::string_view suffix;
    if (auto own = families.find(sample.name); own == families.end() || !own->second.has_type) {
      for (std::string_view s : kHistogramSuffixes) {
        if (!std::string_view(sample.name).ends_with(s)) continue;
        auto it = families.find(sample.name.substr(0, sample.name.size() - s.size()));
        if (it == families.end()) continue;
        if (it->second.type == "histogram" || (it->second.type == "summary" && s != "_bucket")) {
          family_name = it->first;
          suffix = s;
        }
      }
    }
    if (!enter_family(family_name)) {
      return LineError(line_no, family_name + " lines are not one group");
    }
    ParsedFamily& family = families[family_name];
    family.has_samples = true;
    if (!seen_series.insert(SeriesKey(sample.name, sample.labels)).second) {
      return LineError(line_no, "duplicate series " + sample.name);
    }
    if (family.type == "counter" && sample.value < 0) {
      return LineError(line_no, "negative counter " + sample.name);
    }
    if (family.type == "histogram") {
      if (suffix.empty()) return LineError(line_no, "histogram sample without a suffix");
      HistogramSeries& h = histograms[SeriesKey(family_name, sample.labels, "le")];
      if (h.family.empty()) {
        h.family = family_name;
        histogram_order.push_back(SeriesKey(family_name, sample.labels, "le"));
      }
      if (suffix == "_bucket") {
        auto le = std::find_if(sample.labels.begin(), sample.labels.end(),
                               [](const auto& kv) { return kv.first == "le"; });
        std::optional<double> bound;
        if (le != sample.labels.end()) bound = ParseFloatValue(le->second);
        if (!bound || std::isnan(*bound)) return LineError(line_no, "bucket without a valid le");
        if (!h.buckets.empty() && !(h.buckets.back().first < *bound)) {
          return LineError(line_no, "bucket le not increasing");
        }
        if (!h.buckets.empty() && sample.value < h.buckets.back().second) {
          return LineError(line_no, "bucket counts not cumulative");
        }
        h.buckets.emplace_back(*bound, sample.value);
      } else if (suffix == "_sum") {
        h.sum = sample.value;
      } else {
        h.count = sample.value;
      }
    }
    samples.push_back(std::move(sample));
  }

  for (const std::string& key : histogram_order) {
    const HistogramSeries& h = histograms[key];
    if (h.buckets.empty() || !std::isinf(h.buckets.back().first)) {
      return absl::InvalidArgumentError("histogram " + h.family + " has no le=\"+Inf\" bucket");
    }
    if (!h.count || *h.count != h.buckets.back().second) {
      return absl::InvalidArgumentError("histogram " + h.family +
                                        " _count missing or not equal to the +Inf bucket");
    }
    if (!h.sum) return absl::InvalidArgumentError("histogram " + h.family + " has no _sum");
  }
  return samples;
}

std::optional<double> FindSample(const std::vector<PrometheusSample>& samples,
                                 std::string_view name, const MetricLabels& labels) {
  std::string want = SeriesKey(name, labels);
  for (const PrometheusSample& s : samples) {
    if (s.name == name && SeriesKey(s.name, s.labels) == want) return s.value;
  }
  return std::nullopt;
}

}  // namespace ringlm
