// PartitionLayers when every node asks for speed placement, and the speed
// classes it rests on.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partition/ring_partition.h"
#include "partition/speed_classes.h"
#include "partition/test_partition.h"

namespace ringlm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A node that asks for speed placement and reads memory at `read_gbps`.
NodeDescriptor Timed(std::string id, uint64_t usable_bytes, double read_gbps) {
  NodeDescriptor node = Node(std::move(id), usable_bytes);
  node.caps.read_gbps = read_gbps;
  node.caps.placement = Placement::kSpeed;
  return node;
}

std::vector<std::string> StageIds(const Partition& p) {
  std::vector<std::string> ids;
  for (const Stage& s : p.stages) ids.push_back(s.node_id);
  return ids;
}

TEST(SpeedClassesTest, LayerSecondsAddsTheMeasuredTerms) {
  DeviceCapabilities caps;
  EXPECT_FALSE(LayerSeconds(caps, 1000).has_value());
  caps.read_gbps = 10;
  EXPECT_DOUBLE_EQ(*LayerSeconds(caps, 1000), 1000 / 10e9);
  caps.matmul_gflops = 20;
  EXPECT_DOUBLE_EQ(*LayerSeconds(caps, 1000), 1000 / 10e9 + 2000 / 20e9);
  caps.read_gbps = 0;
  EXPECT_DOUBLE_EQ(*LayerSeconds(caps, 1000), 2000 / 20e9);
}

TEST(SpeedClassesTest, ClassesStartWhereTimeExceedsTheLeaderByTheRatio) {
  auto caps = [](double gbps) {
    DeviceCapabilities c;
    c.read_gbps = gbps;
    return c;
  };
  // Times 1, 1.4, 1.6, 2.3 and 4 (relative): 1.6 > 1.5 * 1 starts class 1,
  // 2.3 <= 1.5 * 1.6 stays in it, 4 > 1.5 * 1.6 starts class 2. The node
  // that measured nothing is class 0.
  const std::vector<DeviceCapabilities> nodes = {caps(10),       caps(10 / 1.4),
                                                 caps(10 / 4.0), caps(10 / 1.6),
                                                 caps(10 / 2.3), DeviceCapabilities{}};
  EXPECT_THAT(SpeedClasses(nodes, 1 << 20), ElementsAre(0, 0, 2, 1, 1, 0));
}

TEST(SpeedPlacementTest, ASlowNodeWithMemoryToSpareGetsNoLayers) {
  // Each node could hold the whole model; "slow" reads at a quarter of the
  // others' rate, and has the most memory (memory placement's stage 0).
  const std::vector<NodeDescriptor> nodes = {Timed("slow", 16 * kGiB, 2.5),
                                             Timed("a", 8 * kGiB, 10), Timed("b", 8 * kGiB, 11)};
  const ModelFootprint model = Model(30, 100 * kMiB, 50 * kMiB, 80 * kMiB);
  const auto p = PartitionLayers(nodes, model);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectWellFormed(nodes, model, *p);
  EXPECT_THAT(StageIds(*p), ElementsAre("a", "b"));
  EXPECT_THAT(LayerCounts(*p), ElementsAre(15, 15));
  EXPECT_THAT(p->idle_node_ids, ElementsAre("slow"));
}

TEST(SpeedPlacementTest, ASlowNodeThatMemoryRequiresGetsOnlyWhatMemoryForces) {
  // The fast nodes hold 10 layers each; the slow one must take the other 12,
  // not the 22 that its memory share would give it.
  const std::vector<NodeDescriptor> nodes = {Timed("slow", 40 * kGiB, 2), Timed("a", 10 * kGiB, 10),
                                             Timed("b", 10 * kGiB, 10)};
  const ModelFootprint model = Model(32, kGiB);
  const auto p = PartitionLayers(nodes, model);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectWellFormed(nodes, model, *p);
  EXPECT_THAT(StageIds(*p), ElementsAre("slow", "a", "b"));
  EXPECT_THAT(LayerCounts(*p), ElementsAre(12, 10, 10));

  std::vector<NodeDescriptor> by_memory = nodes;
  for (NodeDescriptor& n : by_memory) n.caps.placement = Placement::kMemory;
  EXPECT_THAT(LayerCounts(PartitionLayers(by_memory, model).value()), ElementsAre(22, 5, 5));
}

TEST(SpeedPlacementTest, NodesOfOneSpeedClassSplitByMemory) {
  std::vector<NodeDescriptor> nodes = {Timed("a", 8 * kGiB, 10), Timed("b", 4 * kGiB, 12),
                                       Timed("c", 4 * kGiB, 9)};
  const ModelFootprint model = Model(32, kMiB);
  const auto by_speed = PartitionLayers(nodes, model);
  ASSERT_TRUE(by_speed.ok()) << by_speed.status();
  for (NodeDescriptor& n : nodes) n.caps.placement = Placement::kMemory;
  EXPECT_EQ(*by_speed, PartitionLayers(nodes, model).value());
  EXPECT_THAT(LayerCounts(*by_speed), ElementsAre(16, 8, 8));
}

TEST(SpeedPlacementTest, OneNodeAskingForMemoryPlacementMeansMemoryPlacement) {
  std::vector<NodeDescriptor> nodes = {Timed("slow", 16 * kGiB, 1), Timed("a", 8 * kGiB, 10)};
  nodes[1].caps.placement = Placement::kMemory;
  const auto p = PartitionLayers(nodes, Model(24, kMiB));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(StageIds(*p), ElementsAre("slow", "a"));
  EXPECT_THAT(LayerCounts(*p), ElementsAre(16, 8));
}

TEST(SpeedPlacementTest, ANodeThatMeasuredNothingIsNotLeftOut) {
  const std::vector<NodeDescriptor> nodes = {Timed("a", 8 * kGiB, 10),
                                             Timed("unmeasured", 8 * kGiB, 0)};
  const auto p = PartitionLayers(nodes, Model(10, kMiB));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(LayerCounts(*p), ElementsAre(5, 5));
}

TEST(SpeedPlacementTest, WhatDoesNotFitOnEveryClassIsRefusedWithTheMiBMissing) {
  const std::vector<NodeDescriptor> nodes = {Timed("slow", 2 * kGiB, 1), Timed("a", 2 * kGiB, 10)};
  const auto p = PartitionLayers(nodes, Model(8, kGiB));
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr("4096 MiB short"));
}

TEST(SpeedPlacementTest, RandomClustersAreWellFormedAndIndependentOfInputOrder) {
  std::mt19937_64 gen(20261206);
  int fitted = 0;
  int with_idle_fast_enough = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = 1 + static_cast<int>(gen() % 7);
    std::vector<NodeDescriptor> nodes;
    for (int i = 0; i < n; ++i) {
      const uint64_t mib = 1 + gen() % 20000;
      const double gbps = (gen() % 5 == 0) ? 0.0 : 1.0 + static_cast<double>(gen() % 400) / 10;
      nodes.push_back(Timed("n" + std::to_string(i), mib * kMiB, gbps));
    }
    const ModelFootprint model =
        Model(1 + static_cast<uint32_t>(gen() % 80), (1 + gen() % 600) * kMiB, (gen() % 500) * kMiB,
              (gen() % 500) * kMiB);
    const auto p = PartitionLayers(nodes, model);
    std::vector<NodeDescriptor> by_memory = nodes;
    for (NodeDescriptor& node : by_memory) node.caps.placement = Placement::kMemory;
    // Speed placement fits exactly when memory placement does.
    ASSERT_EQ(p.ok(), PartitionLayers(by_memory, model).ok()) << "trial " << trial;
    if (!p.ok()) continue;
    ++fitted;
    ExpectWellFormed(nodes, model, *p);
    std::vector<NodeDescriptor> shuffled = nodes;
    std::shuffle(shuffled.begin(), shuffled.end(), gen);
    EXPECT_EQ(PartitionLayers(shuffled, model).value(), *p);
    if (!p->idle_node_ids.empty()) ++with_idle_fast_enough;
    if (HasFailure()) break;
  }
  EXPECT_GT(fitted, 300);
  EXPECT_GT(with_idle_fast_enough, 50);
}

}  // namespace
}  // namespace ringlm
