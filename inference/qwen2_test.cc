// The qwen2 architecture (llama plus Q/K/V biases and NEOX RoPE), on a qwen2
// copy of the bundled model made with the project's GGUF writer.
#include <cstring>
#include <optional>
#include <string>

#include "gguf/gguf_writer.h"
#include "gtest/gtest.h"
#include "inference/model.h"
#include "inference/stage_engine.h"

namespace ringlm {
namespace {

const std::string kModel = std::string(RINGLM_SHARED_DIR) + "/models/stories260K-f32.gguf";

// Rewrites the llama GGUF as qwen2: keys renamed, and unless `bias` is
// nullopt one bias per Q/K/V matrix with every value `bias`.
std::string AsQwen2(const GgufFile& llama, std::optional<float> bias) {
  GgufWriter w;
  for (const auto& [key, value] : llama.metadata()) {
    std::string k = key;
    if (k.rfind("llama.", 0) == 0) k = "qwen2." + k.substr(6);
    if (k == "general.architecture") {
      w.SetString(k, "qwen2");
    } else {
      w.SetValue(k, value);
    }
  }
  for (const GgufTensorInfo& t : llama.tensors()) {
    EXPECT_TRUE(w.AddTensor(t.name, t.dims, t.type,
                            std::string(reinterpret_cast<const char*>(t.data), t.n_bytes))
                    .ok());
    if (!bias.has_value()) continue;
    for (const char* m : {"attn_q", "attn_k", "attn_v"}) {
      const std::string suffix = std::string(m) + ".weight";
      if (t.name.size() > suffix.size() &&
          t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        std::vector<float> values(t.dims[1], *bias);
        std::string bytes(values.size() * 4, '\0');
        std::memcpy(bytes.data(), values.data(), bytes.size());
        const std::string name = t.name.substr(0, t.name.size() - 6) + "bias";
        EXPECT_TRUE(w.AddTensor(name, {t.dims[1]}, TensorType::kF32, bytes).ok());
      }
    }
  }
  return w.ToBytes();
}

std::vector<float> Logits(const ModelConfig& config, const StageWeights& weights) {
  StageEngine engine(config, weights, nullptr);
  KvCache cache = engine.NewCache(64);
  std::vector<float> logits;
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  EXPECT_TRUE(engine.Forward(cache, {prompt, {}}, LogitsMode::kLastPosition, &logits).ok());
  return logits;
}

TEST(Qwen2Test, ZeroBiasesEqualLlamaWithNeoxRopeAndBiasesMatter) {
  auto llama = Model::Load(kModel, {});
  ASSERT_TRUE(llama.ok()) << llama.status();
  for (float bias : {0.0f, 0.25f}) {
    auto file = GgufFile::FromBytes(AsQwen2((*llama)->file(), bias));
    ASSERT_TRUE(file.ok()) << file.status();
    auto config = ModelConfig::FromGguf(**file);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->architecture, "qwen2");
    EXPECT_TRUE(config->has_qkv_bias);
    EXPECT_EQ(config->rope_style, RopeStyle::kNeox);
    auto weights = StageWeights::Load(**file, *config, {0, config->n_layer});
    ASSERT_TRUE(weights.ok()) << weights.status();
    ASSERT_NE(weights->layer(0).bq, nullptr);

    ModelConfig neox_llama = (*llama)->config();
    neox_llama.rope_style = RopeStyle::kNeox;
    const std::vector<float> expected = Logits(neox_llama, (*llama)->weights());
    const std::vector<float> got = Logits(*config, *weights);
    if (bias == 0.0f) {
      EXPECT_EQ(got, expected);
    } else {
      EXPECT_NE(got, expected);
    }
  }
}

TEST(Qwen2Test, MissingBiasIsNamed) {
  auto llama = Model::Load(kModel, {});
  ASSERT_TRUE(llama.ok());
  auto file = GgufFile::FromBytes(AsQwen2((*llama)->file(), std::nullopt));
  ASSERT_TRUE(file.ok());
  auto config = ModelConfig::FromGguf(**file);
  ASSERT_TRUE(config.ok());
  absl::StatusOr<StageWeights> weights = StageWeights::Load(**file, *config, {0, 1});
  EXPECT_EQ(weights.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(weights.status().message().find("blk.0.attn_q.bias"), std::string::npos)
      << weights.status();
}

}  // namespace
}  // namespace ringlm
