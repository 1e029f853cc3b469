// The engine against llama.cpp's recorded outputs for the bundled model
// (../shared/refs/stories260k_llamacpp.json): greedy ids, logits and
// tokenizer ids. Every prompt and case in the file is checked, so a fuller
// reference file is covered without code changes.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "inference/generator.h"
#include "inference/model.h"
#include "nlohmann/json.hpp"

namespace ringlm {
namespace {

using nlohmann::json;

const std::string kShared = RINGLM_SHARED_DIR;

const json& References() {
  static const json* refs = [] {
    std::ifstream in(kShared + "/refs/stories260k_llamacpp.json");
    return new json(json::parse(in));
  }();
  return *refs;
}

std::unique_ptr<Model> LoadWholeModel(const std::string& file) {
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Load(kShared + "/models/" + file, {});
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

struct Variant {
  std::string file;
  std::string key;  // "f32" or "q8_0" in the reference file
};

class ReferenceTest : public testing::TestWithParam<Variant> {};

TEST_P(ReferenceTest, GreedyIdsMatchLlamaCppForEveryPrompt) {
  std::unique_ptr<Model> model = LoadWholeModel(GetParam().file);
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  LocalGenerator generator(*model, &pool);
  GenerateOptions options;
  options.max_tokens = 64;
  options.sampling.temperature = 0;
  ASSERT_FALSE(References()["generation"].empty());
  for (const json& g : References()["generation"]) {
    const std::string prompt = g["prompt"];
    SCOPED_TRACE("prompt: '" + prompt + "'");
    const std::vector<int32_t> prompt_ids =
        model->tokenizer().Encode(prompt, /*add_special=*/true, /*parse_special=*/false);
    EXPECT_EQ(prompt_ids, g["prompt_ids"].get<std::vector<int32_t>>());
    const json& ref = g[GetParam().key];
    absl::StatusOr<std::vector<int32_t>> ids = generator.Generate(prompt_ids, options);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, ref["generated_ids"].get<std::vector<int32_t>>());
    std::string text;
    for (int32_t id : *ids) text += model->tokenizer().TokenToPiece(id);
    EXPECT_EQ(text, ref["generated_text"].get<std::string>());
  }
}

TEST_P(ReferenceTest, LogitsAfterOnceUponATimeMatch) {
  std::unique_ptr<Model> model = LoadWholeModel(GetParam().file);
  ASSERT_NE(model, nullptr);
  const json& ref = References()["logits_after_once_upon_a_time"];
  const std::vector<int32_t> prompt = ref["prompt_ids"];
  const std::vector<float> expected = ref[GetParam().key]["all_logits"];
  StageEngine engine(model->config(), model->weights(), nullptr);
  KvCache cache = engine.NewCache(model->context_size());
  std::vector<float> logits;
  ASSERT_TRUE(engine.Forward(cache, {prompt, {}}, LogitsMode::kLastPosition, &logits).ok());
  ASSERT_EQ(logits.size(), expected.size());
  double worst = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double rel = std::fabs(logits[i] - expected[i]) / std::max(1.0f, std::fabs(expected[i]));
    worst = std::max(worst, rel);
    EXPECT_LE(rel, 1e-3) << "logit of token " << i << ": " << logits[i] << " vs " << expected[i];
  }
  std::printf("worst relative logit difference (%s): %.3g\n", GetParam().key.c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(BundledModels, ReferenceTest,
                         testing::Values(Variant{"stories260K-f32.gguf", "f32"},
                                         Variant{"stories260K-q8_0.gguf", "q8_0"}),
                         [](const testing::TestParamInfo<Variant>& info) {
                           return info.param.key == "f32" ? "F32" : "Q8_0";
                         });

TEST(TokenizerReferenceTest, EveryCaseMatchesLlamaTokenize) {
  std::unique_ptr<Model> model = LoadWholeModel("stories260K-f32.gguf");
  ASSERT_NE(model, nullptr);
  const json& cases = References()["tokenizer"]["cases"];
  ASSERT_FALSE(cases.empty());
  for (const json& c : cases) {
    const std::string text = c["text"];
    SCOPED_TRACE("text: '" + text + "'");
    EXPECT_EQ(model->tokenizer().Encode(text, true, /*parse_special=*/true),
              c["ids"].get<std::vector<int32_t>>());
    if (c.contains("ids_no_parse_special")) {
      EXPECT_EQ(model->tokenizer().Encode(text, true, /*parse_special=*/false),
                c["ids_no_parse_special"].get<std::vector<int32_t>>());
    }
  }
}

}  // namespace
}  // namespace ringlm
