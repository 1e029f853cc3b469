// Reading Prometheus text exposition (what /metrics serves): for `ringlm
// status`, which reads the figures every node exports, and for tests that
// check them.
#ifndef RINGLM_BASE_PROMETHEUS_TEXT_H_
#define RINGLM_BASE_PROMETHEUS_TEXT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/metrics.h"

namespace ringlm {

// One sample line of Prometheus text, labels in the order written.
struct PrometheusSample {
  std::string name;
  MetricLabels labels;
  double value = 0;
};

// Parses text exposition format 0.0.4 strictly; InvalidArgument naming the
// line for anything a Prometheus server would reject or that breaks the
// format's rules. Checks: every line is blank, a comment, or
// `name{labels} value [timestamp]` with a valid name, label keys, escapes and
// float value; HELP and TYPE at most once per family and before its samples;
// a family's lines are one group; no duplicate series; counters not negative;
// each histogram series has buckets with increasing `le`, cumulative counts,
// a last le="+Inf" bucket equal to its _count, and a _sum.
absl::StatusOr<std::vector<PrometheusSample>> ParsePrometheusText(std::string_view text);

// The value of the sample with exactly this name and label set (in any
// order); nullopt when there is none.
std::optional<double> FindSample(const std::vector<PrometheusSample>& samples,
                                 std::string_view name, const MetricLabels& labels = {});

}  // namespace ringlm

#endif  // RINGLM_BASE_PROMETHEUS_TEXT_H_
