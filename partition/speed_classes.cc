#include "partition/speed_classes.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ringlm {

std::optional<double> LayerSeconds(const DeviceCapabilities& caps, uint64_t bytes_per_layer) {
  const double bytes = static_cast<double>(bytes_per_layer);
  std::optional<double> seconds;
  if (std::isfinite(caps.read_gbps) && caps.read_gbps > 0) {
    seconds = bytes / (caps.read_gbps * 1e9);
  }
  if (std::isfinite(caps.matmul_gflops) && caps.matmul_gflops > 0) {
    seconds = seconds.value_or(0) + 2 * bytes / (caps.matmul_gflops * 1e9);
  }
  return seconds;
}

std::vector<uint32_t> SpeedClasses(const std::vector<DeviceCapabilities>& caps,
                                   uint64_t bytes_per_layer) {
  std::vector<uint32_t> classes(caps.size(), 0);
  std::vector<std::pair<double, size_t>> timed;  // (seconds, index)
  for (size_t i = 0; i < caps.size(); ++i) {
    if (std::optional<double> s = LayerSeconds(caps[i], bytes_per_layer)) timed.push_back({*s, i});
  }
  std::sort(timed.begin(), timed.end());
  uint32_t current = 0;
  double leader = 0;
  for (size_t k = 0; k < timed.size(); ++k) {
    if (k == 0) {
      leader = timed[k].first;
    } else if (timed[k].first > leader * kSpeedClassRatio) {
      ++current;
      leader = timed[k].first;
    }
    classes[timed[k].second] = current;
  }
  return classes;
}

}  // namespace ringlm
