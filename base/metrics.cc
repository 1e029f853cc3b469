#include "base/metrics.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/internal/metric_names.h"

namespace ringlm {
namespace {

// [a-zA-Z_:][a-zA-Z0-9_:]* for metric names, without ':' for label keys.
bool IsValidName(std::string_view name, bool allow_colon) {
  if (name.empty() || !IsNameStart(name[0], allow_colon)) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return IsNameChar(c, allow_colon); });
}
bool IsValidMetricName(std::string_view name) { return IsValidName(name, /*allow_colon=*/true); }
bool IsValidLabelKey(std::string_view key) { return IsValidName(key, /*allow_colon=*/false); }

// A number as Prometheus (Go's strconv.ParseFloat) reads it back exactly:
// integers without exponent or fraction, other values in the shortest form
// that round-trips, and the spellings +Inf, -Inf and NaN.
std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == 0) return "0";  // also -0
  if (v == std::trunc(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return absl::StrFormat("%.17g", v);  // not reached: 64 bytes suffice
  return std::string(buf, end);
}

// Label values escape backslash, double quote and newline.
void AppendEscapedLabelValue(std::string_view value, std::string* out) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '"':
        out->append("\\\"");
        break;
      case '\n':
        out->append("\\n");
        break;
      default:
        out->push_back(c);
    }
  }
}

// HELP text escapes backslash and newline only.
void AppendEscapedHelp(std::string_view help, std::string* out) {
  for (char c : help) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      default:
        out->push_back(c);
    }
  }
}

// `{k="v",...}` from sorted labels plus an optional `le` last; empty when
// there are no labels at all.
std::string RenderLabels(const MetricLabels& labels, const std::string* le = nullptr) {
  if (labels.empty() && le == nullptr) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : labels) {
    if (!first) out.push_back(',');
    first = false;
    absl::StrAppend(&out, key, "=\"");
    AppendEscapedLabelValue(value, &out);
    out.push_back('"');
  }
  if (le != nullptr) absl::StrAppend(&out, first ? "" : ",", "le=\"", *le, "\"");
  out.push_back('}');
  return out;
}

void AppendSample(std::string_view name, std::string_view suffix, const std::string& labels,
                  double value, std::string* out) {
  out->append(name);
  out->append(suffix);
  out->append(labels);
  out->push_back(' ');
  out->append(FormatValue(value));
  out->push_back('\n');
}

}  // namespace

// ---------------------------------------------------------------- metrics

void Counter::Increment(double delta) {
  if (!(delta >= 0)) return;  // negative or NaN
  value_.fetch_add(delta, std::memory_order_relaxed);
}

void Gauge::Add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  // The first bound >= value: `le` is inclusive. Past the end is +Inf.
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::BucketCounts() const {
  std::vector<uint64_t> counts(bounds_.size() + 1);
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = counts_[i].load(std::memory_order_relaxed);
  return counts;
}

uint64_t Histogram::Count() const {
  uint64_t total = 0;
  for (uint64_t c : BucketCounts()) total += c;
  return total;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) bounds.push_back(b);
  return bounds;
}

// ---------------------------------------------------------------- registry

enum class MetricsRegistry::Kind : int { kCounter, kGauge, kHistogram };

// One labelled series. Everything but the metric's own atomics is immutable
// once the series is published in its family.
struct MetricsRegistry::Series {
  MetricLabels labels;  // sorted by key
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Gauge> gauge;
  std::unique_ptr<Histogram> histogram;
  std::function<double()> read;  // a callback gauge or counter
};

// Name, help, kind and bounds are immutable; `series` grows under mu_.
struct MetricsRegistry::Family {
  std::string name;
  std::string help;
  Kind kind;
  std::vector<double> bounds;  // histograms only
  std::vector<std::unique_ptr<Series>> series;
};

namespace {

const char* KindName(int kind) {
  static constexpr const char* kNames[] = {"counter", "gauge", "histogram"};
  return kNames[kind];
}

}  // namespace

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

absl::StatusOr<MetricsRegistry::Family*> MetricsRegistry::FindOrAddFamily(
    std::string_view name, std::string_view help, Kind kind, const std::vector<double>* bounds,
    MetricLabels labels, MetricLabels* sorted) {
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid metric name '", std::string(name), "'"));
  }
  std::sort(labels.begin(), labels.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string& key = labels[i].first;
    if (!IsValidLabelKey(key) || key.starts_with("__")) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid label key '", key, "' on metric ", std::string(name)));
    }
    if (i > 0 && key == labels[i - 1].first) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate label key '", key, "' on metric ", std::string(name)));
    }
    if (kind == Kind::kHistogram && key == "le") {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram ", std::string(name), " may not have an 'le' label"));
    }
  }
  *sorted = std::move(labels);

  if (auto it = by_name_.find(name); it != by_name_.end()) {
    Family* family = it->second;
    if (family->kind != kind) {
      return absl::AlreadyExistsError(absl::StrCat("metric ", std::string(name), " is a ",
                                                   KindName(static_cast<int>(family->kind))));
    }
    if (bounds != nullptr && *bounds != family->bounds) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram ", std::string(name), " registered with other bounds"));
    }
    return family;
  }

  // A histogram's samples are name_bucket, name_sum and name_count; no other
  // family may use those names.
  for (std::string_view suffix : kHistogramSuffixes) {
    if (kind == Kind::kHistogram) {
      if (by_name_.contains(absl::StrCat(std::string(name), std::string(suffix)))) {
        return absl::AlreadyExistsError(absl::StrCat("histogram ", std::string(name),
                                                     " clashes with metric ", std::string(name),
                                                     std::string(suffix)));
      }
    } else if (name.ends_with(suffix)) {
      auto it = by_name_.find(name.substr(0, name.size() - suffix.size()));
      if (it != by_name_.end() && it->second->kind == Kind::kHistogram) {
        return absl::AlreadyExistsError(
            absl::StrCat("metric ", std::string(name), " clashes with histogram ", it->first));
      }
    }
  }

  auto family = std::make_unique<Family>();
  family->name = std::string(name);
  family->help = std::string(help);
  family->kind = kind;
  if (bounds != nullptr) family->bounds = *bounds;
  Family* raw = family.get();
  families_.push_back(std::move(family));
  by_name_.emplace(raw->name, raw);
  return raw;
}

namespace {

template <typename SeriesPtr>
auto* FindSeriesIn(const std::vector<SeriesPtr>& series, const MetricLabels& sorted) {
  for (const auto& s : series) {
    if (s->labels == sorted) return s.get();
  }
  return static_cast<decltype(series.front().get())>(nullptr);
}

}  // namespace

absl::StatusOr<Counter*> MetricsRegistry::AddCounter(std::string_view name, std::string_view help,
                                                     MetricLabels labels) {
  absl::MutexLock lock(&mu_);
  MetricLabels sorted;
  absl::StatusOr<Family*> family =
      FindOrAddFamily(name, help, Kind::kCounter, nullptr, std::move(labels), &sorted);
  if (!family.ok()) return family.status();
  if (Series* s = FindSeriesIn((*family)->series, sorted)) {
    if (s->counter == nullptr) {
      return absl::AlreadyExistsError(
          absl::StrCat("counter ", std::string(name), " with these labels is a callback counter"));
    }
    return s->counter.get();
  }
  auto s = std::make_unique<Series>();
  s->labels = std::move(sorted);
  s->counter.reset(new Counter());
  Counter* counter = s->counter.get();
  (*family)->series.push_back(std::move(s));
  return counter;
}

absl::StatusOr<Gauge*> MetricsRegistry::AddGauge(std::string_view name, std::string_view help,
                                                 MetricLabels labels) {
  absl::MutexLock lock(&mu_);
  MetricLabels sorted;
  absl::StatusOr<Family*> family =
      FindOrAddFamily(name, help, Kind::kGauge, nullptr, std::move(labels), &sorted);
  if (!family.ok()) return family.status();
  if (Series* s = FindSeriesIn((*family)->series, sorted)) {
    if (s->gauge == nullptr) {
      return absl::AlreadyExistsError(
          absl::StrCat("gauge ", std::string(name), " with these labels is a callback gauge"));
    }
    return s->gauge.get();
  }
  auto s = std::make_unique<Series>();
  s->labels = std::move(sorted);
  s->gauge.reset(new Gauge());
  Gauge* gauge = s->gauge.get();
  (*family)->series.push_back(std::move(s));
  return gauge;
}

absl::StatusOr<Histogram*> MetricsRegistry::AddHistogram(std::string_view name,
                                                         std::string_view help,
                                                         std::vector<double> bucket_upper_bounds,
                                                         MetricLabels labels) {
  std::vector<double>& bounds = bucket_upper_bounds;
  if (!bounds.empty() && bounds.back() == std::numeric_limits<double>::infinity()) {
    bounds.pop_back();
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (std::isnan(bounds[i]) || std::isinf(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i]))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram ", std::string(name), " bounds must be finite and strictly increasing"));
    }
  }
  absl::MutexLock lock(&mu_);
  MetricLabels sorted;
  absl::StatusOr<Family*> family =
      FindOrAddFamily(name, help, Kind::kHistogram, &bounds, std::move(labels), &sorted);
  if (!family.ok()) return family.status();
  if (Series* s = FindSeriesIn((*family)->series, sorted)) return s->histogram.get();
  auto s = std::make_unique<Series>();
  s->labels = std::move(sorted);
  s->histogram.reset(new Histogram(bounds));
  Histogram* histogram = s->histogram.get();
  (*family)->series.push_back(std::move(s));
  return histogram;
}

absl::Status MetricsRegistry::AddCallbackGauge(std::string_view name, std::string_view help,
                                               MetricLabels labels, std::function<double()> read) {
  return AddCallback(name, help, Kind::kGauge, std::move(labels), std::move(read));
}

absl::Status MetricsRegistry::AddCallbackCounter(std::string_view name, std::string_view help,
                                                 MetricLabels labels,
                                                 std::function<double()> read) {
  return AddCallback(name, help, Kind::kCounter, std::move(labels), std::move(read));
}

absl::Status MetricsRegistry::AddCallback(std::string_view name, std::string_view help, Kind kind,
                                          MetricLabels labels, std::function<double()> read) {
  const char* what = kind == Kind::kGauge ? "gauge " : "counter ";
  if (!read) {
    return absl::InvalidArgumentError(
        absl::StrCat("callback ", what, std::string(name), " has no callback"));
  }
  absl::MutexLock lock(&mu_);
  MetricLabels sorted;
  absl::StatusOr<Family*> family =
      FindOrAddFamily(name, help, kind, nullptr, std::move(labels), &sorted);
  if (!family.ok()) return family.status();
  if (FindSeriesIn((*family)->series, sorted) != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat(what, std::string(name), " with these labels already exists"));
  }
  auto s = std::make_unique<Series>();
  s->labels = std::move(sorted);
  s->read = std::move(read);
  (*family)->series.push_back(std::move(s));
  return absl::OkStatus();
}

std::string MetricsRegistry::RenderPrometheusText() const {
  return RenderPrometheusText({{this, {}}});
}

std::string MetricsRegistry::RenderPrometheusText(const std::vector<Labelled>& registries) {
  // Collect stable pointers under each lock, then format (and run callbacks)
  // without it: families and series are never removed, and what we read of
  // them is immutable or atomic. Families group by name, in first-seen order.
  struct Part {
    const Series* series;
    MetricLabels labels;  // the series' own and the registry's, sorted by key
  };
  struct Group {
    const Family* first;
    std::vector<Part> parts;
  };
  std::vector<Group> groups;
  std::map<std::string, size_t, std::less<>> group_of;
  for (const Labelled& r : registries) {
    absl::MutexLock lock(&r.registry->mu_);
    for (const auto& family : r.registry->families_) {
      auto [it, added] = group_of.try_emplace(family->name, groups.size());
      if (added) groups.push_back({family.get(), {}});
      Group& group = groups[it->second];
      if (group.first->kind != family->kind) continue;
      for (const auto& series : family->series) {
        MetricLabels labels = series->labels;  // sorted already
        if (!r.labels.empty()) {
          labels.insert(labels.end(), r.labels.begin(), r.labels.end());
          std::sort(labels.begin(), labels.end());
        }
        group.parts.push_back({series.get(), std::move(labels)});
      }
    }
  }

  std::string out;
  for (const Group& group : groups) {
    const Family* family = group.first;
    absl::StrAppend(&out, "# HELP ", family->name, " ");
    AppendEscapedHelp(family->help, &out);
    absl::StrAppend(&out, "\n# TYPE ", family->name, " ", KindName(static_cast<int>(family->kind)),
                    "\n");
    for (const Part& part : group.parts) {
      const Series* s = part.series;
      const std::string labels = RenderLabels(part.labels);
      if (s->counter != nullptr) {
        AppendSample(family->name, "", labels, s->counter->Value(), &out);
      } else if (s->gauge != nullptr) {
        AppendSample(family->name, "", labels, s->gauge->Value(), &out);
      } else if (s->read) {
        AppendSample(family->name, "", labels, s->read(), &out);
      } else {
        // Read each bucket once; _count is their total, so it always equals
        // the +Inf bucket even while observations race with the render.
        const Histogram& h = *s->histogram;
        std::vector<uint64_t> counts = h.BucketCounts();
        uint64_t cumulative = 0;
        for (size_t i = 0; i < counts.size(); ++i) {
          cumulative += counts[i];
          std::string le = i < h.bounds().size() ? FormatValue(h.bounds()[i]) : "+Inf";
          AppendSample(family->name, "_bucket", RenderLabels(part.labels, &le),
                       static_cast<double>(cumulative), &out);
        }
        AppendSample(family->name, "_sum", labels, h.Sum(), &out);
        AppendSample(family->name, "_count", labels, static_cast<double>(cumulative), &out);
      }
    }
  }
  return out;
}

}  // namespace ringlm
