// The engine on synthetic mixture-of-experts models (moe-tiny, Mixtral's
// layout; qwen2moe-tiny, with a shared expert; qwen3moe-tiny, with QK-norm
// and heads wider than n_embd / n_head; deepseek3-tiny, MLA and a dense first
// layer) and on gemma2-tiny, gemma3-tiny and phi3-tiny
// (sliding-window layers, whose window of 16 (phi3: 24) the 24-position prompt overruns at
// its last position; phi3's fused tensors and LongRoPE factors): a split over
// stages, a batch of sessions, a chunked prefill and another thread count
// all give the bits of one whole-model pass.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/synth/synth_model.h"
#include "gtest/gtest.h"
#include "inference/model.h"
#include "inference/ops/weight_layout.h"
#include "inference/stage_engine.h"

namespace ringlm {
namespace {

const std::vector<int32_t> kPrompt = {1,   318, 271,  519, 1476, 1161, 264,  262,
                                      847, 261, 900,  77,  314,  779,  1278, 269,
                                      531, 492, 1179, 271, 694,  309,  914,  1061};

struct MoeCase {
  std::string preset;
  TensorType type;
  bool moe = true;  // false: a dense preset (gemma2-tiny)
};

class MoeEngineTest : public testing::TestWithParam<MoeCase> {
 protected:
  void SetUp() override {
    path_ = testing::TempDir() + "/moe_engine_test_" + std::to_string(::getpid()) + "_" +
            GetParam().preset + "_" + std::string(TraitsOf(GetParam().type).name) + ".gguf";
    SynthOptions options;
    options.preset = GetParam().preset;
    options.type = GetParam().type;
    options.seed = 3;
    options.threads = 2;
    ASSERT_TRUE(WriteSynthModel(options, path_).ok());
  }
  void TearDown() override { std::remove(path_.c_str()); }

  std::unique_ptr<Model> Load(std::optional<LayerRange> layers) {
    ModelOptions options;
    options.layers = layers;
    options.context_size = 128;
    absl::StatusOr<std::unique_ptr<Model>> m = Model::Load(path_, options);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::move(*m) : nullptr;
  }

  std::string path_;
};

TEST_P(MoeEngineTest, EverySplitEqualsTheWholeModelBitForBit) {
  ThreadPool pool(2);
  std::unique_ptr<Model> whole = Load(std::nullopt);
  ASSERT_NE(whole, nullptr);
  ASSERT_EQ(whole->config().is_moe(), GetParam().moe);
  StageEngine engine(whole->config(), whole->weights(), &pool);
  KvCache cache = engine.NewCache(128);
  std::vector<float> expected;
  ASSERT_TRUE(engine.Forward(cache, {kPrompt, {}}, LogitsMode::kAllPositions, &expected).ok());
  const uint32_t n_layer = whole->config().n_layer;
  for (uint32_t k = 1; k < n_layer; ++k) {
    SCOPED_TRACE("split at layer " + std::to_string(k));
    std::unique_ptr<Model> head = Load(LayerRange{0, k});
    std::unique_ptr<Model> tail = Load(LayerRange{k, n_layer});
    ASSERT_NE(head, nullptr);
    ASSERT_NE(tail, nullptr);
    StageEngine first(head->config(), head->weights(), &pool);
    StageEngine second(tail->config(), tail->weights(), &pool);
    KvCache c1 = first.NewCache(128);
    KvCache c2 = second.NewCache(128);
    std::vector<float> hidden, logits;
    ASSERT_TRUE(first.Forward(c1, {kPrompt, {}}, LogitsMode::kAllPositions, &hidden).ok());
    ASSERT_TRUE(second.Forward(c2, {kPrompt, hidden}, LogitsMode::kAllPositions, &logits).ok());
    EXPECT_EQ(logits, expected);
  }
}

TEST_P(MoeEngineTest, ChunksBatchesAndThreadCountsGiveTheSameBits) {
  std::unique_ptr<Model> m = Load(std::nullopt);
  ASSERT_NE(m, nullptr);
  ThreadPool two(2);
  ThreadPool one(1);
  StageEngine engine(m->config(), m->weights(), &two);
  StageEngine single(m->config(), m->weights(), &one);
  // The whole prompt at once, all positions.
  KvCache whole = engine.NewCache(128);
  std::vector<float> expected;
  ASSERT_TRUE(engine.Forward(whole, {kPrompt, {}}, LogitsMode::kAllPositions, &expected).ok());
  const size_t n_vocab = m->config().n_vocab;
  auto rows = [&](size_t first, size_t count) {
    return std::vector<float>(expected.begin() + first * n_vocab,
                              expected.begin() + (first + count) * n_vocab);
  };
  // One thread; then chunks of 5, 1, 6, 9 and 3 positions.
  KvCache solo = single.NewCache(128);
  std::vector<float> out;
  ASSERT_TRUE(single.Forward(solo, {kPrompt, {}}, LogitsMode::kAllPositions, &out).ok());
  EXPECT_EQ(out, expected);
  KvCache chunked = engine.NewCache(128);
  const std::span<const int32_t> prompt(kPrompt);
  size_t done = 0;
  for (size_t count : {5, 1, 6, 9, 3}) {
    ASSERT_TRUE(
        engine.Forward(chunked, {prompt.subspan(done, count), {}}, LogitsMode::kAllPositions, &out)
            .ok());
    EXPECT_EQ(out, rows(done, count)) << "chunk at " << done;
    done += count;
  }
  // Three sessions in one batch: a prefill, a decode step after 20
  // positions, and a chunk after 3; each equals its rows of the whole pass.
  KvCache a = engine.NewCache(128), b = engine.NewCache(128), c = engine.NewCache(128);
  ASSERT_TRUE(engine.Forward(b, {prompt.first(20), {}}, LogitsMode::kLastPosition, &out).ok());
  ASSERT_TRUE(engine.Forward(c, {prompt.first(3), {}}, LogitsMode::kLastPosition, &out).ok());
  std::vector<float> out_a, out_b, out_c;
  const std::vector<StageBatchItem> items = {{&a, {prompt, {}}, &out_a},
                                             {&b, {prompt.subspan(20, 1), {}}, &out_b},
                                             {&c, {prompt.subspan(3, 18), {}}, &out_c}};
  ASSERT_TRUE(engine.ForwardBatch(items, LogitsMode::kAllPositions).ok());
  EXPECT_EQ(out_a, expected);
  EXPECT_EQ(out_b, rows(20, 1));
  EXPECT_EQ(out_c, rows(3, 18));
}

// Weights packed for the kernels (Model::Pack; Q4_0 in groups of 8 rows on
// x86) give the bits of the mapped ones, and two stages of one model that
// hold the same layer share its copy.
TEST_P(MoeEngineTest, PackedWeightsGiveTheBitsOfTheMappedOnes) {
  ThreadPool pool(2);
  std::unique_ptr<Model> mapped = Load(std::nullopt);
  std::unique_ptr<Model> packed = Load(std::nullopt);
  ASSERT_NE(mapped, nullptr);
  ASSERT_NE(packed, nullptr);
  ASSERT_TRUE(packed->LoadIntoMemory().ok());
  const bool packs = FastestLayout(GetParam().type, 8) != WeightLayout::kGguf;
  EXPECT_EQ(packed->weights().mapped_tensors().size() < packed->weights().tensors().size(), packs);
  std::vector<float> expected, out;
  StageEngine engine(mapped->config(), mapped->weights(), &pool);
  KvCache c1 = engine.NewCache(128);
  ASSERT_TRUE(engine.Forward(c1, {kPrompt, {}}, LogitsMode::kAllPositions, &expected).ok());
  StageEngine packed_engine(packed->config(), packed->weights(), &pool);
  KvCache c2 = packed_engine.NewCache(128);
  ASSERT_TRUE(packed_engine.Forward(c2, {kPrompt, {}}, LogitsMode::kAllPositions, &out).ok());
  EXPECT_EQ(out, expected);

  std::unique_ptr<Model> node = Load(LayerRange{0, 0});
  ASSERT_NE(node, nullptr);
  const uint32_t n_layer = node->config().n_layer;
  absl::StatusOr<StageWeights> before = node->LoadStage({0, n_layer});
  absl::StatusOr<StageWeights> after = node->LoadStage({n_layer - 1, n_layer});
  ASSERT_TRUE(before.ok() && after.ok());
  ASSERT_TRUE(node->Pack(*before).ok());
  ASSERT_TRUE(node->Pack(*after).ok());
  const LayerWeights& a = before->layer(n_layer - 1);
  const LayerWeights& b = after->layer(n_layer - 1);
  EXPECT_EQ(a.wo.data, b.wo.data);
  EXPECT_EQ(a.wo.layout, packs ? WeightLayout::kQ4_0x8 : WeightLayout::kGguf);
  EXPECT_EQ(a.moe.down.data, b.moe.down.data);
}

INSTANTIATE_TEST_SUITE_P(Presets, MoeEngineTest,
                         testing::Values(MoeCase{"moe-tiny", TensorType::kQ8_0},
                                         MoeCase{"moe-tiny", TensorType::kF16},
                                         MoeCase{"qwen2moe-tiny", TensorType::kQ8_0},
                                         MoeCase{"qwen3moe-tiny", TensorType::kQ8_0},
                                         MoeCase{"deepseek3-tiny", TensorType::kQ8_0},
                                         MoeCase{"gemma2-tiny", TensorType::kQ8_0, false},
                                         MoeCase{"gemma3-tiny", TensorType::kQ8_0, false},
                                         MoeCase{"phi3-tiny", TensorType::kQ8_0, false},
                                         // Q4_0, packed in groups of 8 rows on x86:
                                         // experts, shared experts, MLA and
                                         // phi3's fused tensors.
                                         MoeCase{"moe-tiny", TensorType::kQ4_0},
                                         MoeCase{"qwen2moe-tiny", TensorType::kQ4_0},
                                         MoeCase{"deepseek3-tiny", TensorType::kQ4_0},
                                         MoeCase{"phi3-tiny", TensorType::kQ4_0, false}),
                         [](const testing::TestParamInfo<MoeCase>& info) {
                           std::string name = info.param.preset + "_" +
                                              std::string(TraitsOf(info.param.type).name);
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace ringlm
