// Test helpers for the ring partition's tests: nodes and footprints in a
// line, and an independent check of every promise a partition makes.
#ifndef RINGLM_PARTITION_TEST_PARTITION_H_
#define RINGLM_PARTITION_TEST_PARTITION_H_

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "partition/ring_partition.h"

namespace ringlm {

inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

inline NodeDescriptor Node(std::string id, uint64_t usable_bytes) {
  NodeDescriptor node;
  node.address = id + ":7070";
  node.node_id = std::move(id);
  node.caps.usable_memory_bytes = usable_bytes;
  node.caps.total_memory_bytes = usable_bytes;
  return node;
}

inline ModelFootprint Model(uint32_t n_layers, uint64_t bytes_per_layer, uint64_t first_extra = 0,
                            uint64_t last_extra = 0) {
  return {n_layers, bytes_per_layer, first_extra, last_extra, {}};
}

// Bytes of layers [first, last).
inline unsigned __int128 LayerBytes(const ModelFootprint& model, uint32_t first, uint32_t last) {
  if (model.layer_bytes.empty()) {
    return static_cast<unsigned __int128>(last - first) * model.bytes_per_layer;
  }
  unsigned __int128 bytes = 0;
  for (uint32_t i = first; i < last; ++i) bytes += model.LayerBytes(i);
  return bytes;
}

// A model of `dense` leading layers of `dense_bytes` and then `moe` layers
// of `moe_bytes` each.
inline ModelFootprint DenseThenMoe(uint32_t dense, uint64_t dense_bytes, uint32_t moe,
                                   uint64_t moe_bytes, uint64_t first_extra = 0,
                                   uint64_t last_extra = 0) {
  ModelFootprint model{dense + moe, 0, first_extra, last_extra, {}};
  model.layer_bytes.assign(dense, dense_bytes);
  model.layer_bytes.insert(model.layer_bytes.end(), moe, moe_bytes);
  return model;
}

inline std::vector<uint32_t> LayerCounts(const Partition& p) {
  std::vector<uint32_t> counts;
  for (const Stage& s : p.stages) counts.push_back(s.last_layer - s.first_layer);
  return counts;
}

// Independent check of every promise the partition makes.
inline void ExpectWellFormed(const std::vector<NodeDescriptor>& nodes, const ModelFootprint& model,
                             const Partition& p) {
  ASSERT_FALSE(p.stages.empty());
  std::set<std::string> seen;
  uint32_t next = 0;
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const Stage& s = p.stages[i];
    EXPECT_EQ(s.first_layer, next) << "stage " << i;
    EXPECT_GT(s.last_layer, s.first_layer) << "stage " << i << " has no layer";
    next = s.last_layer;
    const auto node = std::find_if(nodes.begin(), nodes.end(),
                                   [&](const NodeDescriptor& n) { return n.node_id == s.node_id; });
    ASSERT_NE(node, nodes.end());
    EXPECT_EQ(s.address, node->address);
    EXPECT_TRUE(seen.insert(s.node_id).second);
    unsigned __int128 need = LayerBytes(model, s.first_layer, s.last_layer);
    if (i == 0) need += model.first_stage_extra_bytes;
    if (i + 1 == p.stages.size()) need += model.last_stage_extra_bytes;
    EXPECT_LE(need, node->caps.usable_memory_bytes) << "stage " << i << " over capacity";
    if (i > 0) {
      const auto prev = std::find_if(nodes.begin(), nodes.end(), [&](const NodeDescriptor& n) {
        return n.node_id == p.stages[i - 1].node_id;
      });
      EXPECT_GE(prev->caps.usable_memory_bytes, node->caps.usable_memory_bytes);
    }
  }
  EXPECT_EQ(next, model.n_layers);
  for (const std::string& id : p.idle_node_ids) EXPECT_TRUE(seen.insert(id).second);
  EXPECT_EQ(seen.size(), nodes.size());
}

}  // namespace ringlm

#endif  // RINGLM_PARTITION_TEST_PARTITION_H_
