// Process metrics in the Prometheus text exposition format (version 0.0.4):
// counters, gauges, histograms and gauges read from a callback at render time,
// plus a strict parser of the format for tests and `ringlm status`.
#ifndef RINGLM_BASE_METRICS_H_
#define RINGLM_BASE_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace ringlm {

// The Content-Type of RenderPrometheusText() output, for the HTTP response.
inline constexpr char kPrometheusContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// Label pairs (key, value) fixed when a series is registered, e.g.
// {{"stage", "0"}}. Keys match [a-zA-Z_][a-zA-Z0-9_]* and do not start with
// "__"; values are any text (escaped on output). The order given does not
// matter: a series is identified and rendered with its labels sorted by key.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// A monotonically increasing total. Thread-safe and lock-free; owned by the
// MetricsRegistry that handed it out.
class Counter {
 public:
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds `delta`. A counter never goes down: a negative or NaN delta is
  // ignored (a programming error, but not worth aborting a daemon for).
  void Increment(double delta = 1);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  friend class MetricsRegistry;
  Counter() = default;
  std::atomic<double> value_{0};
};

// A value that goes up and down. Thread-safe and lock-free; owned by the
// MetricsRegistry that handed it out.
class Gauge {
 public:
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta);  // negative to subtract
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  friend class MetricsRegistry;
  Gauge() = default;
  std::atomic<double> value_{0};
};

// Counts observations into buckets by upper bound (a value lands in the first
// bucket whose bound is >= the value; +Inf catches the rest) and keeps their
// sum. Thread-safe and lock-free; owned by the MetricsRegistry that handed it
// out. A render concurrent with Observe() may see an observation in the
// counts but not yet in the sum; the buckets and _count always agree.
class Histogram {
 public:
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // NaN is ignored.
  void Observe(double value);

  // The finite upper bounds, strictly increasing (+Inf is implicit).
  const std::vector<double>& bounds() const { return bounds_; }
  // Per-bucket counts, not cumulative; one more entry than bounds() (+Inf).
  std::vector<uint64_t> BucketCounts() const;
  uint64_t Count() const;
  double Sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  friend class MetricsRegistry;
  explicit Histogram(std::vector<double> bounds);
  const std::vector<double> bounds_;
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1
  std::atomic<double> sum_{0};
};

// `count` bounds start, start*factor, start*factor^2, ... for AddHistogram.
// Requires start > 0, factor > 1, count >= 1.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// MetricsRegistry: the metrics of one process, rendered for GET /metrics.
//
// Purpose: components register their metrics once (at startup) and update
// them on hot paths through the returned pointers, which cost one atomic
// operation per update and never take the registry lock.
// Ownership: the registry owns every metric; returned pointers stay valid for
// the registry's lifetime. Metrics cannot be removed.
// Thread-safety: all methods are thread-safe.
// Names: a metric name matches [a-zA-Z_:][a-zA-Z0-9_:]*. One name is one
// family with one HELP and TYPE line; several series of a family differ in
// their labels. Registering the same name and labels again with the same kind
// returns the existing metric (its first help text stays). Errors, all
// without side effects:
//   - InvalidArgument: a bad metric name, label key or histogram bounds, a
//     duplicate label key, an "le" label on a histogram, or a histogram
//     re-registered with other bounds;
//   - AlreadyExists: the name is taken by another kind of metric (counter,
//     gauge or histogram), or clashes with a histogram's _bucket/_sum/_count
//     samples, or a callback gauge with these labels already exists, or a
//     plain gauge and a callback gauge share name and labels.
class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  absl::StatusOr<Counter*> AddCounter(std::string_view name, std::string_view help,
                                      MetricLabels labels = {});
  absl::StatusOr<Gauge*> AddGauge(std::string_view name, std::string_view help,
                                  MetricLabels labels = {});
  // `bucket_upper_bounds` must be strictly increasing and not NaN; a
  // trailing +Inf is dropped (it is always there).
  absl::StatusOr<Histogram*> AddHistogram(std::string_view name, std::string_view help,
                                          std::vector<double> bucket_upper_bounds,
                                          MetricLabels labels = {});
  // A gauge whose value is `read()` at each render (peers, layers held, cache
  // bytes). `read` runs on the rendering thread without the registry lock
  // held, so it may take the caller's own locks; it must be thread-safe and
  // outlive the registry's last render.
  absl::Status AddCallbackGauge(std::string_view name, std::string_view help, MetricLabels labels,
                                std::function<double()> read);
  // A counter read the same way, for a count another part keeps; `read`
  // must never decrease.
  absl::Status AddCallbackCounter(std::string_view name, std::string_view help, MetricLabels labels,
                                  std::function<double()> read);

  // Every family in registration order: "# HELP", "# TYPE", then its series
  // in registration order. Histograms give cumulative _bucket{le="..."}
  // samples ending with le="+Inf", then _sum and _count.
  std::string RenderPrometheusText() const;

  // One registry's series, each with `labels` added (e.g. {"model", name}
  // for each model a daemon serves); none of its series may have those keys.
  struct Labelled {
    const MetricsRegistry* registry;
    MetricLabels labels;
  };
  // Several registries as one exposition: a family registered in several
  // (same name and kind) is one group, with the HELP of its first; a family
  // whose kind differs from the first of its name is left out.
  static std::string RenderPrometheusText(const std::vector<Labelled>& registries);

 private:
  enum class Kind : int;
  struct Series;
  struct Family;

  absl::Status AddCallback(std::string_view name, std::string_view help, Kind kind,
                           MetricLabels labels, std::function<double()> read);
  // The family `name` of `kind`, created if absent. Validates name and labels
  // and fills `*sorted` with the labels sorted by key.
  absl::StatusOr<Family*> FindOrAddFamily(std::string_view name, std::string_view help, Kind kind,
                                          const std::vector<double>* bounds, MetricLabels labels,
                                          MetricLabels* sorted) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Family>> families_ ABSL_GUARDED_BY(mu_);  // registration order
  std::map<std::string, Family*, std::less<>> by_name_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringlm

#endif  // RINGLM_BASE_METRICS_H_
