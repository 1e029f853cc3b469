#include "inference/model_config.h"

#include "gguf/gguf_writer.h"
#include "gtest/gtest.h"
#include "inference/model.h"

namespace ringlm {
namespace {

const std::string kModelDir = std::string(RINGLM_SHARED_DIR) + "/models/";

TEST(ModelConfigTest, ReadsTheBundledModel) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(kModelDir + "stories260K-f32.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<ModelConfig> c = ModelConfig::FromGguf(**f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->n_layer, 5u);
  EXPECT_EQ(c->n_embd, 64u);
  EXPECT_EQ(c->n_ff, 172u);
  EXPECT_EQ(c->n_head, 8u);
  EXPECT_EQ(c->n_head_kv, 4u);
  EXPECT_EQ(c->head_dim, 8u);
  EXPECT_EQ(c->n_rot, 8u);
  EXPECT_EQ(c->n_vocab, 512u);
  EXPECT_EQ(c->n_ctx_train, 128u);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->rope_freq_base, 10000.0f);
}

TEST(ModelConfigTest, RejectsAnotherArchitecture) {
  GgufWriter w;
  w.SetString("general.architecture", "mamba");
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(w.ToBytes());
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<ModelConfig> c = ModelConfig::FromGguf(**f);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("unsupported architecture 'mamba'"), std::string::npos);
}

TEST(ModelConfigTest, MissingKeyIsNamed) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetUint32("llama.block_count", 2);
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(w.ToBytes());
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<ModelConfig> c = ModelConfig::FromGguf(**f);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("llama.embedding_length"), std::string::npos);
}

TEST(ModelTest, LoadsOnlyTheRequestedLayers) {
  ModelOptions options;
  options.layers = LayerRange{1, 3};
  absl::StatusOr<std::unique_ptr<Model>> m =
      Model::Load(kModelDir + "stories260K-f32.gguf", options);
  ASSERT_TRUE(m.ok()) << m.status();
  const StageWeights& w = (*m)->weights();
  EXPECT_FALSE(w.is_first());
  EXPECT_FALSE(w.is_last());
  EXPECT_EQ(w.tensors().size(), 2u * 9);
  EXPECT_EQ((*m)->context_size(), 128u);
  EXPECT_FALSE((*m)->fingerprint().empty());

  options.layers = LayerRange{3, 9};
  EXPECT_EQ(Model::Load(kModelDir + "stories260K-f32.gguf", options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModelTest, ContextSizeDefaultsToTheModelsAndCanBeRaised) {
  ModelOptions options;
  options.context_size = 512;
  absl::StatusOr<std::unique_ptr<Model>> m =
      Model::Load(kModelDir + "stories260K-q8_0.gguf", options);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->context_size(), 512u);
  EXPECT_TRUE((*m)->context_above_training());
}

}  // namespace
}  // namespace ringlm
