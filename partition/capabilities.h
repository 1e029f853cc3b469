// What a node offers to the cluster: memory and compute, measured at start.
// Plain data: carried in discovery announcements and in topology replies, and
// the only input (with the node id) to the ring partition.
#ifndef RINGLM_PARTITION_CAPABILITIES_H_
#define RINGLM_PARTITION_CAPABILITIES_H_

#include <cstdint>
#include <string>

namespace ringlm {

// How a node asks the cluster to place layers (ringlmd --placement). The
// cluster places by speed only when every node asks for it, so nodes that
// disagree still compute one plan (see PartitionLayers).
enum class Placement : uint8_t {
  kMemory = 0,  // layers in proportion to memory (what every node did before)
  kSpeed = 1,   // the fastest nodes first, each within its memory
};

struct DeviceCapabilities {
  uint64_t total_memory_bytes = 0;
  // Memory the node may use for weights and KV cache. From /proc/meminfo's
  // MemAvailable, or from --memory-mb when given.
  uint64_t usable_memory_bytes = 0;
  double matmul_gflops = 0;  // measured briefly at start; 0 when unknown
  double read_gbps = 0;      // memory read bandwidth, measured at start; 0 when unknown
  std::string cpu_model;     // /proc/cpuinfo "model name", may be empty
  uint32_t threads = 0;      // compute threads the node will use
  Placement placement = Placement::kMemory;

  bool operator==(const DeviceCapabilities&) const = default;
};

}  // namespace ringlm

#endif  // RINGLM_PARTITION_CAPABILITIES_H_
