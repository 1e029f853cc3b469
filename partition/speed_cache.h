// The speed figures a node measured, kept in its state directory, so that a
// restarted daemon neither waits for the measurement again (fast rejoin) nor
// gets a noisier one, which could move layers between nodes.
#ifndef RINGLM_PARTITION_SPEED_CACHE_H_
#define RINGLM_PARTITION_SPEED_CACHE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace ringlm {

struct SpeedFigures {
  double matmul_gflops = 0;
  double read_gbps = 0;

  bool operator==(const SpeedFigures&) const = default;
};

// The figures saved at `path` for this CPU model and thread count; nullopt
// when the file is missing, unreadable, malformed (any line or value out of
// place, a figure that is not finite and positive), or was written for
// another CPU model or thread count: the caller measures again.
std::optional<SpeedFigures> LoadSpeedFigures(const std::string& path, std::string_view cpu_model,
                                             uint32_t threads);

// Writes the figures for this CPU model and thread count to `path`, through
// a temporary file renamed into place, so a reader never sees half a file.
absl::Status SaveSpeedFigures(const std::string& path, std::string_view cpu_model, uint32_t threads,
                              const SpeedFigures& figures);

}  // namespace ringlm

#endif  // RINGLM_PARTITION_SPEED_CACHE_H_
