#include "inference/model_config.h"

#include <cmath>

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

// A qwen3 header with heads of 64 while n_embd / n_head is 32.
GgufWriter Qwen3Header() {
  GgufWriter w;
  w.SetString("general.architecture", "qwen3");
  w.SetUint32("qwen3.block_count", 2);
  w.SetUint32("qwen3.context_length", 128);
  w.SetUint32("qwen3.embedding_length", 256);
  w.SetUint32("qwen3.feed_forward_length", 512);
  w.SetUint32("qwen3.attention.head_count", 8);
  w.SetUint32("qwen3.attention.head_count_kv", 4);
  w.SetUint32("qwen3.attention.key_length", 64);
  w.SetUint32("qwen3.attention.value_length", 64);
  EXPECT_TRUE(w.AddTensor("token_embd.weight", {256, 300}, TensorType::kF32,
                          std::string(256 * 300 * sizeof(float), '\0'))
                  .ok());
  return w;
}

absl::StatusOr<ModelConfig> ConfigOf(const GgufWriter& w) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(w.ToBytes());
  if (!f.ok()) return f.status();
  return ModelConfig::FromGguf(**f);
}

TEST(ModelConfigTest, Qwen3HeadSizeComesFromKeyLength) {
  absl::StatusOr<ModelConfig> c = ConfigOf(Qwen3Header());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 64u);
  EXPECT_EQ(c->n_rot, 64u);
  EXPECT_EQ(c->n_embd_kv(), 256u);
  EXPECT_TRUE(c->has_qk_norm);
  EXPECT_FALSE(c->has_qkv_bias);
  EXPECT_EQ(c->rope_style, RopeStyle::kNeox);
}

TEST(ModelConfigTest, ValuesNarrowerThanKeysAreNamed) {
  GgufWriter w = Qwen3Header();
  w.SetUint32("qwen3.attention.value_length", 32);
  absl::StatusOr<ModelConfig> c = ConfigOf(w);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("qwen3.attention.value_length"), std::string::npos)
      << c.status();
}

TEST(ModelConfigTest, WithoutKeyLengthHeadsMustDivideTheWidth) {
  GgufWriter w = Qwen3Header();
  w.Remove("qwen3.attention.key_length");
  w.Remove("qwen3.attention.value_length");
  w.SetUint32("qwen3.attention.head_count", 6);
  w.SetUint32("qwen3.attention.head_count_kv", 3);
  EXPECT_EQ(ConfigOf(w).status().code(), absl::StatusCode::kInvalidArgument);
}

// A gemma2 header shaped like Gemma 2 2B scaled down: heads of 64 at n_embd
// 256 with 2 heads, soft-caps, a window of 16.
GgufWriter Gemma2Header() {
  GgufWriter w;
  w.SetString("general.architecture", "gemma2");
  w.SetUint32("gemma2.block_count", 26);
  w.SetUint32("gemma2.context_length", 128);
  w.SetUint32("gemma2.embedding_length", 256);
  w.SetUint32("gemma2.feed_forward_length", 512);
  w.SetUint32("gemma2.attention.head_count", 2);
  w.SetUint32("gemma2.attention.head_count_kv", 1);
  w.SetUint32("gemma2.attention.key_length", 64);
  w.SetUint32("gemma2.attention.value_length", 64);
  w.SetFloat32("gemma2.attn_logit_softcapping", 50.0f);
  w.SetFloat32("gemma2.final_logit_softcapping", 30.0f);
  w.SetUint32("gemma2.attention.sliding_window", 16);
  EXPECT_TRUE(w.AddTensor("token_embd.weight", {256, 300}, TensorType::kF32,
                          std::string(256 * 300 * sizeof(float), '\0'))
                  .ok());
  return w;
}

TEST(ModelConfigTest, Gemma2ReadsSoftCapsWindowAndScales) {
  absl::StatusOr<ModelConfig> c = ConfigOf(Gemma2Header());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_style, RopeStyle::kNeox);
  EXPECT_EQ(c->head_dim, 64u);
  EXPECT_FLOAT_EQ(c->attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(c->final_softcap, 30.0f);
  EXPECT_EQ(c->n_swa, 16u);
  EXPECT_TRUE(c->has_post_norms);
  EXPECT_TRUE(c->gelu_ffn);
  EXPECT_EQ(c->embd_scale, 16.0f);
  // Q is scaled after RoPE by 1 / sqrt(head_dim); the softmax then by 1.
  EXPECT_EQ(c->q_scale, 0.125f);
  EXPECT_EQ(c->kq_scale, 1.0f);
  // Even layers slide, odd ones attend to everything.
  EXPECT_TRUE(c->IsSlidingLayer(0));
  EXPECT_FALSE(c->IsSlidingLayer(1));
  EXPECT_TRUE(c->IsSlidingLayer(24));
  EXPECT_FALSE(c->IsSlidingLayer(25));
}

TEST(ModelConfigTest, Gemma2DefaultsAsLlamaCpp) {
  GgufWriter w = Gemma2Header();
  w.Remove("gemma2.attn_logit_softcapping");
  w.Remove("gemma2.final_logit_softcapping");
  w.Remove("gemma2.attention.sliding_window");
  w.SetUint32("gemma2.block_count", 46);  // the 27B: Q scaled by 1 / sqrt(n_embd / n_head)
  absl::StatusOr<ModelConfig> c = ConfigOf(w);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FLOAT_EQ(c->attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(c->final_softcap, 30.0f);
  EXPECT_EQ(c->n_swa, 4096u);
  EXPECT_EQ(c->q_scale, 1.0f / std::sqrt(128.0f));
}

TEST(ModelConfigTest, Gemma3SlidesFiveLayersOfSixWithItsOwnRopeBase) {
  GgufWriter w;
  w.SetString("general.architecture", "gemma3");
  w.SetUint32("gemma3.block_count", 12);
  w.SetUint32("gemma3.context_length", 128);
  w.SetUint32("gemma3.embedding_length", 256);
  w.SetUint32("gemma3.feed_forward_length", 512);
  w.SetUint32("gemma3.attention.head_count", 4);
  w.SetUint32("gemma3.attention.head_count_kv", 1);
  w.SetUint32("gemma3.attention.key_length", 64);
  w.SetFloat32("gemma3.rope.freq_base", 1e6f);
  EXPECT_TRUE(w.AddTensor("token_embd.weight", {256, 300}, TensorType::kF32,
                          std::string(256 * 300 * sizeof(float), '\0'))
                  .ok());
  // The window is required.
  absl::StatusOr<ModelConfig> c = ConfigOf(w);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("gemma3.attention.sliding_window"), std::string::npos)
      << c.status();
  w.SetUint32("gemma3.attention.sliding_window", 16);
  c = ConfigOf(w);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->has_qk_norm);
  EXPECT_TRUE(c->has_post_norms);
  EXPECT_EQ(c->attn_softcap, 0.0f);
  EXPECT_EQ(c->final_softcap, 0.0f);
  EXPECT_EQ(c->q_scale, 0.125f);
  for (uint32_t il : {0u, 4u, 6u, 10u}) {
    EXPECT_TRUE(c->IsSlidingLayer(il)) << il;
    EXPECT_EQ(c->RopeBase(il), 10000.0f) << il;
  }
  for (uint32_t il : {5u, 11u}) {
    EXPECT_FALSE(c->IsSlidingLayer(il)) << il;
    EXPECT_EQ(c->RopeBase(il), 1e6f) << il;
  }
}

TEST(ModelConfigTest, Gemma2BadSoftCapOrWindowIsNamed) {
  for (const char* key : {"gemma2.attn_logit_softcapping", "gemma2.final_logit_softcapping"}) {
    GgufWriter w = Gemma2Header();
    w.SetFloat32(key, 0.0f);
    absl::StatusOr<ModelConfig> c = ConfigOf(w);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status();
  }
  GgufWriter w = Gemma2Header();
  w.SetUint32("gemma2.attention.sliding_window", 0);
  absl::StatusOr<ModelConfig> c = ConfigOf(w);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("gemma2.attention.sliding_window"), std::string::npos)
      << c.status();
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
