// The ring partition over layers of different sizes (PartitionLayers steps
// 2'-4'): dense leading layers before MoE ones.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partition/ring_partition.h"
#include "partition/test_partition.h"

namespace ringlm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Brute force over every split: can the largest `k` nodes (memory order)
// hold the model in contiguous blocks of at least one layer each?
bool SomeSplitFits(std::vector<NodeDescriptor> nodes, const ModelFootprint& model, size_t k) {
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
    return a.caps.usable_memory_bytes != b.caps.usable_memory_bytes
               ? a.caps.usable_memory_bytes > b.caps.usable_memory_bytes
               : a.node_id < b.node_id;
  });
  auto fits = [&](auto&& self, size_t i, uint32_t start) -> bool {
    if (i == k) return start == model.n_layers;
    unsigned __int128 room = nodes[i].caps.usable_memory_bytes;
    unsigned __int128 extras = 0;
    if (i == 0) extras += model.first_stage_extra_bytes;
    if (i + 1 == k) extras += model.last_stage_extra_bytes;
    if (room < extras) return false;
    room -= extras;
    for (uint32_t end = start + 1; end <= model.n_layers; ++end) {
      if (LayerBytes(model, start, end) > room) break;
      if (self(self, i + 1, end)) return true;
    }
    return false;
  };
  return fits(fits, 0, 0);
}

// The ring the rule tries (step 2'): the largest nodes, at most one a layer,
// less trailing ones that cannot hold their extras and the last layer.
size_t Participants(std::vector<NodeDescriptor> nodes, const ModelFootprint& model) {
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
    return a.caps.usable_memory_bytes > b.caps.usable_memory_bytes;
  });
  size_t k = std::min<size_t>(nodes.size(), model.n_layers);
  while (k > 0) {
    unsigned __int128 need = model.last_stage_extra_bytes + model.LayerBytes(model.n_layers - 1);
    if (k == 1) need += model.first_stage_extra_bytes;
    if (nodes[k - 1].caps.usable_memory_bytes >= need) break;
    --k;
  }
  return k;
}

TEST(BytePartitionTest, DenseLeadingLayerLetsTheModelFitWhereTheLargestLayerRuleFailed) {
  // 1 dense layer of 100 MiB, 26 MoE layers of 1000 MiB: 26,100 MiB.
  const ModelFootprint model = DenseThenMoe(1, 100 * kMiB, 26, 1000 * kMiB);
  const std::vector<NodeDescriptor> nodes = {Node("solo", 26150 * kMiB)};
  const ModelFootprint largest = Model(27, 1000 * kMiB);
  EXPECT_TRUE(absl::IsResourceExhausted(PartitionLayers(nodes, largest).status()));
  const auto p = PartitionLayers(nodes, model);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(LayerCounts(*p), ElementsAre(27));
  ExpectWellFormed(nodes, model, *p);
}

TEST(BytePartitionTest, SmallDenseLayersGiveTheirNodeMoreLayersThanTheLargestLayerRule) {
  // 4 dense layers of 10 MiB, then 12 MoE layers of 500 MiB: 6,040 MiB.
  const ModelFootprint model = DenseThenMoe(4, 10 * kMiB, 12, 500 * kMiB);
  const std::vector<NodeDescriptor> nodes = {Node("b", 4100 * kMiB), Node("a", 4200 * kMiB)};
  // Largest layer everywhere: 8 + 8 layers (8,000 MiB counted).
  const auto before = PartitionLayers(nodes, Model(16, 500 * kMiB));
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_THAT(LayerCounts(*before), ElementsAre(8, 8));
  const auto p = PartitionLayers(nodes, model);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectWellFormed(nodes, model, *p);
  // Stage 0 (a) holds the four dense layers and six MoE ones: 3,040 of its
  // 4,200 MiB, against b's 3,000 of 4,100: bytes in proportion to memory.
  EXPECT_EQ(p->stages[0].node_id, "a");
  EXPECT_THAT(LayerCounts(*p), ElementsAre(10, 6));
}

TEST(BytePartitionTest, BytesFollowMemoryWithinOneLayer) {
  // The case: a dense first layer, MoE layers after, three nodes.
  const ModelFootprint model = DenseThenMoe(1, 50 * kMiB, 47, 400 * kMiB, 300 * kMiB, 300 * kMiB);
  const std::vector<NodeDescriptor> nodes = {Node("a", 16 * kGiB), Node("b", 8 * kGiB),
                                             Node("c", 4 * kGiB)};
  const auto p = PartitionLayers(nodes, model);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectWellFormed(nodes, model, *p);
  const double total = static_cast<double>(LayerBytes(model, 0, model.n_layers));
  double weights[3], weight_sum = 0;
  for (int i = 0; i < 3; ++i) {
    weights[i] = static_cast<double>(nodes[i].caps.usable_memory_bytes) - 300.0 * kMiB;
    weight_sum += weights[i];
  }
  for (size_t i = 0; i < p->stages.size(); ++i) {
    const Stage& s = p->stages[i];
    const double got = static_cast<double>(LayerBytes(model, s.first_layer, s.last_layer));
    EXPECT_NEAR(got, total * weights[i] / weight_sum, 400.0 * kMiB) << "stage " << i;
  }
}

TEST(BytePartitionTest, EqualLayerSizesGiveTheLayerCountRule) {
  ModelFootprint sized = Model(32, 0, 500 * kMiB, 500 * kMiB);
  sized.layer_bytes.assign(32, 100 * kMiB);
  const std::vector<NodeDescriptor> nodes = {Node("a", 3 * kGiB), Node("b", 2 * kGiB),
                                             Node("c", 1 * kGiB)};
  const auto p = PartitionLayers(nodes, sized);
  const auto q = PartitionLayers(nodes, Model(32, 100 * kMiB, 500 * kMiB, 500 * kMiB));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(*p, *q);
}

TEST(BytePartitionTest, ANodeThatCannotHoldTheLastLayerDropsOut) {
  const ModelFootprint model = DenseThenMoe(2, 10 * kMiB, 2, 900 * kMiB);
  const std::vector<NodeDescriptor> nodes = {Node("big", 2 * kGiB), Node("tiny", 500 * kMiB)};
  const auto p = PartitionLayers(nodes, model);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(LayerCounts(*p), ElementsAre(4));
  EXPECT_THAT(p->idle_node_ids, ElementsAre("tiny"));
}

TEST(BytePartitionTest, DoesNotFitSaysHowManyLayersFit) {
  const ModelFootprint model = DenseThenMoe(1, 100 * kMiB, 3, 1000 * kMiB);
  // 3,100 MiB in all, and 3,200 MiB usable, but no node holds two MoE layers.
  const std::vector<NodeDescriptor> nodes = {Node("a", 1600 * kMiB), Node("b", 1600 * kMiB)};
  const auto p = PartitionLayers(nodes, model);
  ASSERT_TRUE(absl::IsResourceExhausted(p.status())) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr("only 3 of 4 layers fit, 1000 MiB short"));
}

TEST(BytePartitionTest, RejectsBadLayerSizes) {
  const std::vector<NodeDescriptor> nodes = {Node("a", kGiB)};
  ModelFootprint wrong_length = Model(3, 0);
  wrong_length.layer_bytes = {1, 2};
  EXPECT_THAT(PartitionLayers(nodes, wrong_length).status().message(),
              HasSubstr("2 layer sizes for 3 layers"));
  ModelFootprint zero = Model(2, 0);
  zero.layer_bytes = {1, 0};
  EXPECT_THAT(PartitionLayers(nodes, zero).status().message(), HasSubstr("layer 1 of 0 bytes"));
  ModelFootprint huge = Model(2, 0);
  huge.layer_bytes = {UINT64_MAX, 1};
  EXPECT_TRUE(absl::IsInvalidArgument(PartitionLayers(nodes, huge).status()));
}

TEST(BytePartitionTest, RandomModelsAreWellFormedAndFitIffSomeSplitFits) {
  std::mt19937_64 gen(39);
  for (int trial = 0; trial < 400; ++trial) {
    const uint32_t n_layers = 1 + gen() % 12;
    ModelFootprint model = Model(n_layers, 0, gen() % 3 * 50 * kMiB, gen() % 3 * 50 * kMiB);
    for (uint32_t i = 0; i < n_layers; ++i)
      model.layer_bytes.push_back((1 + gen() % 8) * 50 * kMiB);
    std::vector<NodeDescriptor> nodes;
    const size_t n_nodes = 1 + gen() % 5;
    for (size_t i = 0; i < n_nodes; ++i) {
      nodes.push_back(Node("n" + std::to_string(i), (1 + gen() % 30) * 50 * kMiB));
    }
    const auto p = PartitionLayers(nodes, model);
    if (p.ok()) {
      ExpectWellFormed(nodes, model, *p);
      if (::testing::Test::HasFailure()) {
        FAIL() << "trial " << trial;
      }
    } else {
      ASSERT_TRUE(absl::IsResourceExhausted(p.status())) << p.status();
      // It gives up only when no split over its participants fits.
      const size_t k = Participants(nodes, model);
      ASSERT_FALSE(k > 0 && SomeSplitFits(nodes, model, k)) << "trial " << trial;
    }
    std::shuffle(nodes.begin(), nodes.end(), gen);
    const auto again = PartitionLayers(nodes, model);
    ASSERT_EQ(again.ok(), p.ok());
    if (p.ok()) EXPECT_EQ(*again, *p);
  }
}

TEST(BytePartitionTest, SpeedPlacementFillsTheFastNodeFirst) {
  ModelFootprint model = DenseThenMoe(2, 10 * kMiB, 10, 100 * kMiB);
  std::vector<NodeDescriptor> nodes = {Node("fast", 700 * kMiB), Node("slow", 2 * kGiB),
                                       Node("slow2", 2 * kGiB)};
  for (NodeDescriptor& node : nodes) {
    node.caps.placement = Placement::kSpeed;
    node.caps.read_gbps = node.node_id == "fast" ? 20 : 2;
  }
  const auto p = PartitionLayers(nodes, model);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectWellFormed(nodes, model, *p);
  // The fast node, last in memory order, fills up: 7 MoE layers (700 MiB);
  // the slow ones share the other 320 MiB by memory, as near as layers go.
  ASSERT_EQ(p->stages.size(), 3u);
  EXPECT_EQ(p->stages[2].node_id, "fast");
  EXPECT_THAT(LayerCounts(*p), ElementsAre(3, 2, 7));
}

}  // namespace
}  // namespace ringlm
