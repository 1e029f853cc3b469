// The memory-weighted ring partition: which node runs which layers.
#ifndef RINGLM_PARTITION_RING_PARTITION_H_
#define RINGLM_PARTITION_RING_PARTITION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "partition/capabilities.h"

namespace ringlm {

// A node as the partition sees it: identity, where to reach it, what it has.
struct NodeDescriptor {
  std::string node_id;  // unique in the cluster, non-empty
  std::string address;  // host:port of its gRPC server
  DeviceCapabilities caps;

  bool operator==(const NodeDescriptor&) const = default;
};

// What the model asks of memory. Extras are charged to the stage that holds
// them: the token embedding to stage 0, the output norm and head to the last
// stage (both to the only stage when there is one). Layers may differ (a
// dense leading layer is smaller than a MoE one): `layer_bytes` gives each
// layer's own bytes; empty, every layer weighs `bytes_per_layer`.
struct ModelFootprint {
  uint32_t n_layers = 0;                 // > 0
  uint64_t bytes_per_layer = 0;          // > 0 when layer_bytes is empty
  uint64_t first_stage_extra_bytes = 0;  // token embedding
  uint64_t last_stage_extra_bytes = 0;   // output norm + output head
  std::vector<uint64_t> layer_bytes;     // empty, or n_layers sizes, each > 0

  // Bytes of layer `i` (< n_layers).
  uint64_t LayerBytes(uint32_t i) const {
    return layer_bytes.empty() ? bytes_per_layer : layer_bytes[i];
  }
  // True when every layer weighs the same.
  bool Uniform() const;
  // Bytes of all layers together.
  unsigned __int128 TotalLayerBytes() const;

  bool operator==(const ModelFootprint&) const = default;
};

// One node's share of the ring: layers [first_layer, last_layer).
struct Stage {
  std::string node_id;
  std::string address;
  uint32_t first_layer = 0;
  uint32_t last_layer = 0;

  bool operator==(const Stage&) const = default;
};

// Stages in ring order: stage 0 holds layer 0, each stage starts where the
// previous one ends, the last ends at n_layers. Idle nodes hold no layer;
// both lists are in the partition's node order (memory desc, then id).
struct Partition {
  std::vector<Stage> stages;
  std::vector<std::string> idle_node_ids;

  bool operator==(const Partition&) const = default;
};

// Largest node set PartitionLayers accepts; keeps its 128-bit arithmetic exact.
inline constexpr size_t kMaxPartitionNodes = 4096;

// Splits the model's layers over `nodes`. A pure function of the set of nodes
// (input order does not matter) and the footprint, so every node that sees the
// same peers computes the same partition.
//
// Rule:
//  1. Order nodes by usable memory, descending, ties by node id. The ring
//     follows this order: the largest node is stage 0 and pays the embedding,
//     the smallest participating node is the last stage and pays the head.
//  2. At most n_layers nodes take part (the largest ones). A node's capacity is
//     floor((usable - extras of its position) / bytes_per_layer). While the
//     last participant cannot hold its extras plus one layer, it drops out
//     (idle) and the one before it becomes last. Nodes left out are idle.
//  3. If the participants' capacities add up to less than n_layers, the model
//     does not fit: ResourceExhausted, saying how many MiB are missing.
//  4. Otherwise each participant gets a contiguous block in proportion to its
//     memory left for layers (usable - extras), bounded below by 1 and above by
//     its capacity (proportional apportionment with bounds, exact integer
//     arithmetic), rounded by largest remainder (ties to the earlier node) so
//     the counts add up to n_layers exactly.
//  When layers differ in size (layer_bytes), steps 2-4 count bytes, not layers:
//  2'. A node's capacity is its memory left after its extras; the last
//     participant drops out while it cannot hold its extras and the last layer.
//  3'. If no contiguous split gives each participant at least one layer within
//     its capacity, ResourceExhausted as in 3.
//  4'. In ring order, stage i (from where stage i-1 ended) takes the block
//     whose bytes are nearest (ties to the shorter block) to its memory's
//     share, among stages i.. , of the bytes still to place, choosing only
//     among ends from which the later stages can still hold the rest. So
//     bytes, not layer counts, follow memory, within a layer per stage where
//     no capacity binds. (Speed placement's filled stages take the longest
//     such block, and the others share what those leave.)
//  A footprint whose layer_bytes are all equal is placed by steps 2-4.
//
// Speed placement (when every node announces Placement::kSpeed; the memory
// rule alone otherwise):
//  5. Nodes are grouped into speed classes by their measured per-layer time
//     (SpeedClasses, partition/speed_classes.h). The rule above runs over the
//     fastest class alone; if it cannot hold the model, over the two fastest,
//     and so on. The nodes of a slower class are idle when the faster ones
//     can hold the model.
//  6. When slower nodes are needed, the faster classes' participants get
//     their capacity, and the slowest class taken shares only the layers
//     left (each of its participants at least one), by memory. (Classes
//     depend on the ratio of nodes' per-layer times alone, not on the size.)
//  Within one class, or when all nodes are alike, it is the memory rule.
//
// Errors: InvalidArgument for no nodes, more than kMaxPartitionNodes, an empty
// or duplicate node id, n_layers == 0, bytes_per_layer == 0 without
// layer_bytes, layer_bytes of another length than n_layers, with a 0, or
// adding up to 2^64 or more;
// ResourceExhausted when the cluster cannot hold the model.
absl::StatusOr<Partition> PartitionLayers(std::vector<NodeDescriptor> nodes, ModelFootprint model);

// One line for logs, e.g.
// "3 stages: a@10.0.0.1:7070[0,20) b@10.0.0.2:7070[20,28) c@...[28,32); idle: d".
std::string DescribePartition(const Partition& partition);

}  // namespace ringlm

#endif  // RINGLM_PARTITION_RING_PARTITION_H_
