// What a node offers to the cluster: memory and compute, measured at start.
// Plain data: carried in discovery announcements and in topology replies, and
// the only input (with the node id) to the ring partition.
#ifndef RINGLM_PARTITION_CAPABILITIES_H_
#define RINGLM_PARTITION_CAPABILITIES_H_

#include <cstdint>
#include <string>

namespace ringlm {

struct DeviceCapabilities {
  uint64_t total_memory_bytes = 0;
  // Memory the node may use for weights and KV cache. From /proc/meminfo's
  // MemAvailable, or from --memory-mb when given.
  uint64_t usable_memory_bytes = 0;
  double matmul_gflops = 0;  // measured briefly at start; 0 when unknown
  std::string cpu_model;     // /proc/cpuinfo "model name", may be empty
  uint32_t threads = 0;      // compute threads the node will use

  bool operator==(const DeviceCapabilities&) const = default;
};

}  // namespace ringlm

#endif  // RINGLM_PARTITION_CAPABILITIES_H_
