// Measures what this machine offers: memory, CPU model, matmul speed.
#ifndef RINGLM_PARTITION_DEVICE_PROBE_H_
#define RINGLM_PARTITION_DEVICE_PROBE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "partition/capabilities.h"

namespace ringlm {

// The two /proc/meminfo lines the node needs, in bytes.
struct MemInfo {
  uint64_t total_bytes = 0;      // MemTotal
  uint64_t available_bytes = 0;  // MemAvailable

  bool operator==(const MemInfo&) const = default;
};

// Parses /proc/meminfo text ("MemTotal:  16318412 kB" lines). Other lines are
// ignored. InvalidArgument when MemTotal or MemAvailable is missing (kernels
// before 3.14 lack MemAvailable), not a "<number> kB" value, or overflows.
absl::StatusOr<MemInfo> ParseMemInfo(std::string_view proc_meminfo_text);

// The first "model name" value of /proc/cpuinfo text, trimmed; empty when
// there is none (e.g. many ARM kernels).
std::string ParseCpuModel(std::string_view proc_cpuinfo_text);

// Single-threaded f32 matmul throughput: repeats a blocked 256x256x256
// product until `budget` has passed (at least once) and reports the flops
// done over the wall time taken (2*n^3 flops each), so a CPU quota (a cgroup
// at a quarter of a core) shows as it would in decode. Noisy on a busy
// machine; for ranking nodes, not for benchmarking.
double MeasureMatmulGflops(absl::Duration budget = absl::Milliseconds(200));

// Memory read bandwidth with `threads` threads (at least 1): each sums its
// slice of a buffer larger than the last-level caches of today's CPUs, again
// and again until `budget` has passed, and the result is the bytes read over
// the wall time taken, in GB/s (1e9 bytes), quota included as above.
// Allocates the buffer (kReadProbeBytes) for the call.
inline constexpr size_t kReadProbeBytes = size_t{128} << 20;
double MeasureReadGbps(uint32_t threads, absl::Duration budget = absl::Milliseconds(200));

// ProbeOptions: how to probe. Every field has a usable default.
struct ProbeOptions {
  // Usable memory to announce instead of MemAvailable (--memory-mb). May
  // exceed the real memory (useful for simulated clusters on one host).
  std::optional<uint64_t> memory_override_bytes;
  // Compute threads the node will use; 0 = std::thread::hardware_concurrency().
  uint32_t threads = 0;
  // Measure matmul_gflops and read_gbps, each for `speed_budget`; when
  // false both stay 0 (unknown).
  bool measure_speed = true;
  absl::Duration speed_budget = absl::Milliseconds(200);
  // Where the figures are kept (partition/speed_cache.h): figures saved there
  // for this CPU model and thread count are used instead of measuring, and
  // new measurements are saved there. Empty = measure every time.
  std::string speed_cache_path;
  // Where to read from; tests point these at fixtures.
  std::string meminfo_path = "/proc/meminfo";
  std::string cpuinfo_path = "/proc/cpuinfo";
};

// Probes this machine. Fails (with the path in the message) only when the
// meminfo file cannot be read or parsed; an unreadable cpuinfo leaves
// cpu_model empty. Takes about 2 * speed_budget when measure_speed is set,
// else a few milliseconds. Thread-compatible; reads files, no global state.
// Where ProbeDevice took the speed figures from.
enum class SpeedSource { kNotMeasured, kMeasured, kCached };
absl::StatusOr<DeviceCapabilities> ProbeDevice(const ProbeOptions& options,
                                               SpeedSource* source = nullptr);

}  // namespace ringlm

#endif  // RINGLM_PARTITION_DEVICE_PROBE_H_
