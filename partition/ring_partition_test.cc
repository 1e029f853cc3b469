#include "partition/ring_partition.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partition/test_partition.h"

namespace ringlm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Brute force over ring sizes: can the largest k nodes (memory order) hold the
// model, each with at least one layer?
bool SomePrefixFits(std::vector<NodeDescriptor> nodes, const ModelFootprint& model) {
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
    return a.caps.usable_memory_bytes != b.caps.usable_memory_bytes
               ? a.caps.usable_memory_bytes > b.caps.usable_memory_bytes
               : a.node_id < b.node_id;
  });
  for (size_t k = 1; k <= nodes.size(); ++k) {
    unsigned __int128 total = 0;
    bool each_holds_one = true;
    for (size_t i = 0; i < k; ++i) {
      unsigned __int128 extras = 0;
      if (i == 0) extras += model.first_stage_extra_bytes;
      if (i + 1 == k) extras += model.last_stage_extra_bytes;
      const uint64_t usable = nodes[i].caps.usable_memory_bytes;
      const unsigned __int128 cap = usable < extras ? 0 : (usable - extras) / model.bytes_per_layer;
      each_holds_one = each_holds_one && cap >= 1;
      total += cap;
    }
    if (each_holds_one && total >= model.n_layers) return true;
  }
  return false;
}

TEST(RingPartitionTest, SingleNodeGetsAllLayers) {
  const std::vector<NodeDescriptor> nodes = {Node("solo", 8 * kGiB)};
  const auto p = PartitionLayers(nodes, Model(32, 100 * kMiB, 500 * kMiB, 500 * kMiB));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->stages.size(), 1u);
  EXPECT_EQ(p->stages[0], (Stage{"solo", "solo:7070", 0, 32}));
  EXPECT_TRUE(p->idle_node_ids.empty());
}

TEST(RingPartitionTest, ProportionalToMemoryWhenNothingBinds) {
  const std::vector<NodeDescriptor> nodes = {Node("c", 2 * kGiB), Node("a", 8 * kGiB),
                                             Node("d", 2 * kGiB), Node("b", 4 * kGiB)};
  const auto p = PartitionLayers(nodes, Model(32, kMiB));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(LayerCounts(*p), ElementsAre(16, 8, 4, 4));
  EXPECT_EQ(p->stages[0].node_id, "a");
  EXPECT_EQ(p->stages[1].node_id, "b");
  EXPECT_EQ(p->stages[2].node_id, "c");  // tie with d, broken by id
  EXPECT_EQ(p->stages[3].node_id, "d");
}

TEST(RingPartitionTest, EachCountIsFloorOrCeilOfItsQuota) {
  // Quotas 31.1, 22.2, 13.3, 8.9, 4.4: floors sum to 78, and the two spare
  // layers go to the largest remainders, .9 and .4 (not .3).
  const std::vector<NodeDescriptor> nodes = {Node("n1", 7 * kGiB), Node("n2", 5 * kGiB),
                                             Node("n3", 3 * kGiB), Node("n4", 2 * kGiB),
                                             Node("n5", 1 * kGiB)};
  const auto p = PartitionLayers(nodes, Model(80, kMiB));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(LayerCounts(*p), ElementsAre(31, 22, 13, 9, 5));
}

TEST(RingPartitionTest, ExoSkewedClusterGivesEveryNodeALayer) {
  // exo's floor rounding gave the two small nodes nothing here.
  const std::vector<NodeDescriptor> nodes = {Node("big", 100000 * kMiB), Node("mid", 1000 * kMiB),
                                             Node("small", 900 * kMiB)};
  const ModelFootprint model = Model(32, 400 * kMiB, 300 * kMiB, 400 * kMiB);
  const auto p = PartitionLayers(nodes, model);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectWellFormed(nodes, model, *p);
  EXPECT_THAT(LayerCounts(*p), ElementsAre(30, 1, 1));
  EXPECT_TRUE(p->idle_node_ids.empty());
}

TEST(RingPartitionTest, CapacityBoundsTheProportionalShare) {
  // "a" has the most memory, but the embedding eats most of it: 2 layers fit,
  // while its proportional share would be 2.7.
  const std::vector<NodeDescriptor> nodes = {Node("a", 10 * kGiB), Node("b", 9 * kGiB),
                                             Node("c", 1 * kGiB)};
  const uint64_t embedding = 7 * kGiB + 100 * kMiB;
  const ModelFootprint model = Model(12, kGiB, embedding, 0);
  const auto p = PartitionLayers(nodes, model);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectWellFormed(nodes, model, *p);
  EXPECT_THAT(LayerCounts(*p), ElementsAre(2, 9, 1));
}

TEST(RingPartitionTest, NodeThatCannotHoldALayerIsIdle) {
  const std::vector<NodeDescriptor> nodes = {Node("tiny", 10 * kMiB), Node("big", 8 * kGiB)};
  const auto p = PartitionLayers(nodes, Model(16, 100 * kMiB));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->stages.size(), 1u);
  EXPECT_EQ(p->stages[0].node_id, "big");
  EXPECT_THAT(p->idle_node_ids, ElementsAre("tiny"));
}

TEST(RingPartitionTest, SmallNodeThatCannotCarryTheHeadDropsOut) {
  // "b" holds a layer but not a layer plus the 512 MiB head; "a" then is the
  // last stage too and carries embedding and head.
  const std::vector<NodeDescriptor> nodes = {Node("a", 10 * kGiB), Node("b", 1200 * kMiB)};
  const ModelFootprint model = Model(8, kGiB, 256 * kMiB, 512 * kMiB);
  const auto p = PartitionLayers(nodes, model);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectWellFormed(nodes, model, *p);
  EXPECT_THAT(LayerCounts(*p), ElementsAre(8));
  EXPECT_THAT(p->idle_node_ids, ElementsAre("b"));
}

TEST(RingPartitionTest, MoreNodesThanLayersUsesTheLargest) {
  const std::vector<NodeDescriptor> nodes = {Node("e", 1 * kGiB), Node("b", 4 * kGiB),
                                             Node("a", 4 * kGiB), Node("d", 2 * kGiB),
                                             Node("c", 3 * kGiB)};
  const auto p = PartitionLayers(nodes, Model(3, 10 * kMiB));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(LayerCounts(*p), ElementsAre(1, 1, 1));
  EXPECT_EQ(p->stages[0].node_id, "a");
  EXPECT_EQ(p->stages[1].node_id, "b");
  EXPECT_EQ(p->stages[2].node_id, "c");
  EXPECT_THAT(p->idle_node_ids, ElementsAre("d", "e"));
}

TEST(RingPartitionTest, DoesNotFitReportsShortfallInMiB) {
  const std::vector<NodeDescriptor> nodes = {Node("a", 2000 * kMiB), Node("b", 1000 * kMiB)};
  const auto p = PartitionLayers(nodes, Model(32, 128 * kMiB, 50 * kMiB, 54 * kMiB));
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(p.status().message(),
            "model needs 4200 MiB but the cluster has 3000 MiB usable: 1200 MiB short");
}

TEST(RingPartitionTest, DoesNotFitWhenLayersCannotBeSplit) {
  // 3072 MiB needed and 3072 MiB present, but each node holds one 1 GiB layer.
  const std::vector<NodeDescriptor> nodes = {Node("a", 1536 * kMiB), Node("b", 1536 * kMiB)};
  const auto p = PartitionLayers(nodes, Model(3, kGiB));
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(p.status().message(), HasSubstr("only 2 of 3 layers fit, 1024 MiB short"));
}

TEST(RingPartitionTest, DoesNotFitWhenNoNodeCanHoldTheEmbedding) {
  const std::vector<NodeDescriptor> nodes = {Node("a", 3 * kGiB), Node("b", 3 * kGiB)};
  const auto p = PartitionLayers(nodes, Model(2, 256 * kMiB, 3 * kGiB, 0));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(RingPartitionTest, RejectsBadInput) {
  EXPECT_EQ(PartitionLayers({}, Model(4, kMiB)).status().code(),
            absl::StatusCode::kInvalidArgument);
  const auto dup = PartitionLayers({Node("a", kGiB), Node("a", 2 * kGiB)}, Model(4, kMiB));
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dup.status().message(), HasSubstr("duplicate node id \"a\""));
  EXPECT_EQ(PartitionLayers({Node("", kGiB)}, Model(4, kMiB)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionLayers({Node("a", kGiB)}, Model(0, kMiB)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionLayers({Node("a", kGiB)}, Model(4, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RingPartitionTest, HugeAnnouncedMemoryDoesNotOverflow) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  const std::vector<NodeDescriptor> nodes = {Node("x", kMax), Node("y", kMax), Node("z", kGiB)};
  const ModelFootprint model = Model(std::numeric_limits<uint32_t>::max(), 1, kMax / 2, kMax / 2);
  const auto p = PartitionLayers(nodes, model);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectWellFormed(nodes, model, *p);
}

TEST(RingPartitionTest, SameResultUnderEveryInputPermutation) {
  std::vector<NodeDescriptor> nodes = {Node("a", 6 * kGiB), Node("b", 6 * kGiB),
                                       Node("c", 3 * kGiB), Node("d", 2500 * kMiB),
                                       Node("e", 50 * kMiB)};
  const ModelFootprint model = Model(29, 150 * kMiB, 200 * kMiB, 300 * kMiB);
  const auto reference = PartitionLayers(nodes, model);
  ASSERT_TRUE(reference.ok()) << reference.status();
  ExpectWellFormed(nodes, model, *reference);
  std::sort(nodes.begin(), nodes.end(),
            [](const auto& x, const auto& y) { return x.node_id < y.node_id; });
  int permutations = 0;
  do {
    const auto p = PartitionLayers(nodes, model);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, *reference) << DescribePartition(*p);
    ++permutations;
  } while (std::next_permutation(nodes.begin(), nodes.end(), [](const auto& x, const auto& y) {
    return x.node_id < y.node_id;
  }));
  EXPECT_EQ(permutations, 120);
}

TEST(RingPartitionTest, RandomClustersAreWellFormedAndFitIffSomeRingFits) {
  std::mt19937_64 gen(20250101);
  int fitted = 0;
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = 1 + static_cast<int>(gen() % 9);
    std::vector<NodeDescriptor> nodes;
    for (int i = 0; i < n; ++i) {
      // Mix of tiny, equal and large memories to exercise idling and ties.
      const uint64_t mib = (gen() % 4 == 0) ? 1024 * (1 + gen() % 4) : 1 + gen() % 20000;
      nodes.push_back(
          Node("node" + std::to_string(gen() % 1000) + "_" + std::to_string(i), mib * kMiB));
    }
    const ModelFootprint model =
        Model(1 + static_cast<uint32_t>(gen() % 120), (1 + gen() % 600) * kMiB,
              (gen() % 800) * kMiB, (gen() % 800) * kMiB);
    const auto p = PartitionLayers(nodes, model);
    if (p.ok()) {
      ++fitted;
      ExpectWellFormed(nodes, model, *p);
      EXPECT_TRUE(SomePrefixFits(nodes, model));
      // Same answer for a shuffled copy.
      std::vector<NodeDescriptor> shuffled = nodes;
      std::shuffle(shuffled.begin(), shuffled.end(), gen);
      EXPECT_EQ(PartitionLayers(shuffled, model).value(), *p);
    } else {
      ++refused;
      ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted) << p.status();
      EXPECT_THAT(p.status().message(), HasSubstr("MiB short"));
      EXPECT_FALSE(SomePrefixFits(nodes, model)) << "refused a model that fits, trial " << trial;
    }
    if (HasFailure()) break;
  }
  // Both branches must have been exercised for the test to mean anything.
  EXPECT_GT(fitted, 300);
  EXPECT_GT(refused, 300);
}

TEST(RingPartitionTest, DescribePartitionIsOneLine) {
  Partition p;
  p.stages = {{"a", "10.0.0.1:7070", 0, 20}, {"b", "10.0.0.2:7070", 20, 32}};
  p.idle_node_ids = {"c", "d"};
  EXPECT_EQ(DescribePartition(p),
            "2 stages: a@10.0.0.1:7070[0,20) b@10.0.0.2:7070[20,32); idle: c d");
}

}  // namespace
}  // namespace ringlm
