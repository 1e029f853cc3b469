// DeepSeek (deepseek2) metadata and tensors: what ModelConfig reads and
// derives (the MLA ranks, YaRN's pre-scaling, the experts' routing keys),
// and the load errors, naming the key or tensor, for a file whose ranks or
// expert shapes disagree with its metadata. The forward pass is held to
// llama.cpp's ids by tests/synth_reference_test.cc.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "gtest/gtest.h"
#include "inference/model_config.h"
#include "inference/stage_engine.h"
#include "inference/stage_weights.h"

namespace ringlm {
namespace {

// A two-layer V3-like model: n_embd 32, 2 heads of 16 key values (8
// rotated) and 8 value values, q and kv ranks 16, a dense layer of width 32,
// then 4 experts of width 16, 2 used, one shared; sigmoid gating with a
// selection bias; YaRN 4x from 64 positions.
constexpr uint32_t kEmbd = 32, kVocab = 300, kHeads = 2, kKey = 16, kRot = 8, kValue = 8;
constexpr uint32_t kRank = 16, kExperts = 4, kFfExp = 16;

std::string Floats(size_t n, float scale) {
  std::string out(n * sizeof(float), '\0');
  uint32_t s = static_cast<uint32_t>(n) * 2654435761u + 7;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    const float v = (static_cast<float>(s >> 8) / 16777216.0f * 2.0f - 1.0f) * scale;
    std::memcpy(&out[i * sizeof(float)], &v, sizeof(float));
  }
  return out;
}

GgufWriter DeepSeekHeader() {
  GgufWriter w;
  const std::string a = "deepseek2.";
  w.SetString("general.architecture", "deepseek2");
  w.SetUint32(a + "block_count", 2);
  w.SetUint32(a + "context_length", 256);
  w.SetUint32(a + "embedding_length", kEmbd);
  w.SetUint32(a + "feed_forward_length", 32);
  w.SetUint32(a + "attention.head_count", kHeads);
  w.SetUint32(a + "attention.head_count_kv", kHeads);
  w.SetUint32(a + "attention.key_length", kKey);
  w.SetUint32(a + "attention.value_length", kValue);
  w.SetUint32(a + "rope.dimension_count", kRot);
  w.SetFloat32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.SetUint32(a + "leading_dense_block_count", 1);
  w.SetUint32(a + "attention.q_lora_rank", kRank);
  w.SetUint32(a + "attention.kv_lora_rank", kRank);
  w.SetUint32(a + "expert_count", kExperts);
  w.SetUint32(a + "expert_used_count", 2);
  w.SetUint32(a + "expert_feed_forward_length", kFfExp);
  w.SetUint32(a + "expert_shared_count", 1);
  w.SetFloat32(a + "expert_weights_scale", 2.5f);
  w.SetBool(a + "expert_weights_norm", true);
  w.SetUint32(a + "expert_gating_func", 2);
  w.SetString(a + "rope.scaling.type", "yarn");
  w.SetFloat32(a + "rope.scaling.factor", 4.0f);
  w.SetUint32(a + "rope.scaling.original_context_length", 64);
  w.SetFloat32(a + "rope.scaling.yarn_log_multiplier", 0.1f);
  EXPECT_TRUE(
      w.AddTensor("token_embd.weight", {kEmbd, kVocab}, TensorType::kF32, Floats(kEmbd * kVocab, 1))
          .ok());
  return w;
}

// The header plus every tensor; `skip` names one to leave out (to add it
// in another shape).
GgufWriter DeepSeekModel(const std::string& skip = "") {
  GgufWriter w = DeepSeekHeader();
  auto add = [&](const std::string& name, std::vector<uint64_t> dims, float scale = 0.2f) {
    if (name == skip) return;
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    EXPECT_TRUE(w.AddTensor(name, dims, TensorType::kF32, Floats(n, scale)).ok()) << name;
  };
  for (int i = 0; i < 2; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    add(b + "attn_norm.weight", {kEmbd});
    add(b + "attn_q_a.weight", {kEmbd, kRank});
    add(b + "attn_q_a_norm.weight", {kRank});
    add(b + "attn_q_b.weight", {kRank, kHeads * kKey});
    add(b + "attn_kv_a_mqa.weight", {kEmbd, kRank + kRot});
    add(b + "attn_kv_a_norm.weight", {kRank});
    add(b + "attn_kv_b.weight", {kRank, kHeads * (kKey - kRot + kValue)});
    add(b + "attn_output.weight", {kHeads * kValue, kEmbd});
    add(b + "ffn_norm.weight", {kEmbd});
    if (i == 0) {
      add(b + "ffn_gate.weight", {kEmbd, 32});
      add(b + "ffn_up.weight", {kEmbd, 32});
      add(b + "ffn_down.weight", {32, kEmbd});
      continue;
    }
    add(b + "ffn_gate_inp.weight", {kEmbd, kExperts});
    add(b + "exp_probs_b.bias", {kExperts});
    add(b + "ffn_gate_exps.weight", {kEmbd, kFfExp, kExperts});
    add(b + "ffn_up_exps.weight", {kEmbd, kFfExp, kExperts});
    add(b + "ffn_down_exps.weight", {kFfExp, kEmbd, kExperts});
    add(b + "ffn_gate_shexp.weight", {kEmbd, kFfExp});
    add(b + "ffn_up_shexp.weight", {kEmbd, kFfExp});
    add(b + "ffn_down_shexp.weight", {kFfExp, kEmbd});
  }
  add("output_norm.weight", {kEmbd});
  add("output.weight", {kEmbd, kVocab});
  return w;
}

struct Loaded {
  std::unique_ptr<GgufFile> file;
  absl::StatusOr<ModelConfig> config = absl::UnknownError("not read");
  absl::StatusOr<StageWeights> weights = absl::UnknownError("not loaded");
};

Loaded Load(const GgufWriter& w) {
  Loaded m;
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(w.ToBytes());
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return m;
  m.file = std::move(*f);
  m.config = ModelConfig::FromGguf(*m.file);
  if (m.config.ok()) m.weights = StageWeights::Load(*m.file, *m.config, LayerRange{0, 2});
  return m;
}

TEST(DeepSeekConfigTest, ReadsMlaExpertsAndYarnAsLlamaCpp) {
  const Loaded m = Load(DeepSeekModel());
  ASSERT_TRUE(m.config.ok()) << m.config.status();
  const ModelConfig& c = *m.config;
  EXPECT_TRUE(c.is_mla());
  EXPECT_EQ(c.head_dim, kKey);
  EXPECT_EQ(c.head_dim_v, kValue);
  // Keys and values of their own widths: what the cache holds, and what
  // `ringlm status` and `inspect` count.
  EXPECT_EQ(c.kv_bytes_per_position(), uint64_t{c.n_head_kv} * (kKey + kValue) * 2);
  EXPECT_EQ(c.n_rot, kRot);
  EXPECT_EQ(c.q_lora_rank, kRank);
  EXPECT_EQ(c.kv_lora_rank, kRank);
  EXPECT_EQ(c.rope_style, RopeStyle::kNormal);
  EXPECT_FALSE(c.IsMoeLayer(0));
  EXPECT_TRUE(c.IsMoeLayer(1));
  EXPECT_EQ(c.n_ff_exp, kFfExp);
  EXPECT_EQ(c.n_ff_shexp, kFfExp);
  EXPECT_FALSE(c.shared_expert_gated);
  EXPECT_TRUE(c.sigmoid_gating);
  EXPECT_TRUE(c.expert_weights_norm);
  EXPECT_EQ(c.expert_weights_scale, 2.5f);
  EXPECT_EQ(c.rope_yarn.freq_scale, 0.25f);
  EXPECT_EQ(c.rope_yarn.ext_factor, 1.0f);
  EXPECT_EQ(c.n_ctx_orig, 64u);
  // build_deepseek2: mscale = 1 + 0.1 ln 4; kq_scale = mscale^2 / sqrt(16);
  // the rope's factor 1 / (1 + 0.1 ln 4).
  const float mscale = 1.0f * (1.0f + 0.1f * std::log(4.0f));
  EXPECT_EQ(c.kq_scale, 1.0f * mscale * mscale / 4.0f);
  EXPECT_EQ(c.rope_attn_factor, 1.0f / (1.0f + 0.1f * std::log(4.0f)));
  ASSERT_TRUE(m.weights.ok()) << m.weights.status();
  EXPECT_NE(m.weights->layer(1).moe.probs_bias, nullptr);
  EXPECT_EQ(m.weights->layer(1).moe.shared_gate_inp, nullptr);
}

TEST(DeepSeekConfigTest, WithoutScalingOrQLoraIsV2LiteLike) {
  GgufWriter w = DeepSeekHeader();
  for (const char* key : {"attention.q_lora_rank", "rope.scaling.type", "rope.scaling.factor",
                          "rope.scaling.original_context_length", "expert_gating_func"}) {
    w.Remove(std::string("deepseek2.") + key);
  }
  const Loaded m = Load(w);
  ASSERT_TRUE(m.config.ok()) << m.config.status();
  EXPECT_EQ(m.config->q_lora_rank, 0u);
  EXPECT_FALSE(m.config->sigmoid_gating);  // absent: softmax, as V2's files
  EXPECT_EQ(m.config->rope_yarn.freq_scale, 1.0f);
  EXPECT_EQ(m.config->rope_yarn.ext_factor, 0.0f);
  EXPECT_EQ(m.config->rope_attn_factor, 1.0f);
  EXPECT_EQ(m.config->kq_scale, 0.25f);
}

TEST(DeepSeekConfigTest, StageRunsAndGivesFiniteLogits) {
  const Loaded m = Load(DeepSeekModel());
  ASSERT_TRUE(m.weights.ok()) << m.weights.status();
  StageEngine engine(*m.config, *m.weights, nullptr);
  KvCache cache = engine.NewCache(32);
  EXPECT_EQ(cache.widths().key, kHeads * kKey);
  EXPECT_EQ(cache.widths().value, kHeads * kValue);
  const std::vector<int32_t> tokens = {1, 17, 42, 299, 5};
  std::vector<float> logits;
  ASSERT_TRUE(engine.Forward(cache, {tokens, {}}, LogitsMode::kAllPositions, &logits).ok());
  ASSERT_EQ(logits.size(), tokens.size() * kVocab);
  for (float l : logits) ASSERT_TRUE(std::isfinite(l));
}

// Each mismatch gets an error naming the key or tensor.
void ExpectNamed(const absl::Status& s, absl::StatusCode code, const std::string& name) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_NE(s.message().find(name), std::string::npos) << s;
}

TEST(DeepSeekLoadTest, KvRankThatDisagreesWithTheTensorsNamesTheTensor) {
  GgufWriter w = DeepSeekModel();
  w.SetUint32("deepseek2.attention.kv_lora_rank", kRank * 2);
  const Loaded m = Load(w);
  ASSERT_TRUE(m.config.ok()) << m.config.status();
  ExpectNamed(m.weights.status(), absl::StatusCode::kInvalidArgument, "blk.0.attn_kv_a_mqa.weight");
}

TEST(DeepSeekLoadTest, QRankThatDisagreesWithTheTensorsNamesTheTensor) {
  GgufWriter w = DeepSeekModel();
  w.SetUint32("deepseek2.attention.q_lora_rank", kRank / 2);
  const Loaded m = Load(w);
  ASSERT_TRUE(m.config.ok()) << m.config.status();
  ExpectNamed(m.weights.status(), absl::StatusCode::kInvalidArgument, "blk.0.attn_q_a.weight");
}

TEST(DeepSeekLoadTest, ValueWidthThatDisagreesWithKvBNamesIt) {
  GgufWriter w = DeepSeekModel("blk.1.attn_kv_b.weight");
  EXPECT_TRUE(w.AddTensor("blk.1.attn_kv_b.weight", {kRank, kHeads * (kKey - kRot + kValue + 1)},
                          TensorType::kF32, Floats(kRank * kHeads * 17, 0.2f))
                  .ok());
  const Loaded m = Load(w);
  ASSERT_TRUE(m.config.ok()) << m.config.status();
  ExpectNamed(m.weights.status(), absl::StatusCode::kInvalidArgument, "blk.1.attn_kv_b.weight");
}

TEST(DeepSeekLoadTest, SharedExpertsThatDisagreeWithTheirTensorsAreNamed) {
  GgufWriter w = DeepSeekModel();
  w.SetUint32("deepseek2.expert_shared_count", 2);
  const Loaded m = Load(w);
  ASSERT_TRUE(m.config.ok()) << m.config.status();
  ExpectNamed(m.weights.status(), absl::StatusCode::kInvalidArgument,
              "blk.1.ffn_gate_shexp.weight");
}

TEST(DeepSeekLoadTest, ExpertWidthThatDisagreesWithTheExpertsIsNamed) {
  GgufWriter w = DeepSeekModel();
  w.SetUint32("deepseek2.expert_feed_forward_length", kFfExp + 16);
  const Loaded m = Load(w);
  ASSERT_TRUE(m.config.ok()) << m.config.status();
  ExpectNamed(m.weights.status(), absl::StatusCode::kInvalidArgument, "blk.1.ffn_gate_exps.weight");
}

TEST(DeepSeekLoadTest, BadKeysAreNamed) {
  {
    GgufWriter w = DeepSeekHeader();
    w.SetUint32("deepseek2.attention.head_count_kv", 1);
    ExpectNamed(Load(w).config.status(), absl::StatusCode::kInvalidArgument, "head_count_kv");
  }
  {
    GgufWriter w = DeepSeekHeader();
    w.SetUint32("deepseek2.rope.dimension_count", kKey);
    ExpectNamed(Load(w).config.status(), absl::StatusCode::kInvalidArgument,
                "rope.dimension_count");
  }
  {
    GgufWriter w = DeepSeekHeader();
    w.Remove("deepseek2.attention.kv_lora_rank");
    ExpectNamed(Load(w).config.status(), absl::StatusCode::kNotFound,
                "deepseek2.attention.kv_lora_rank");
  }
  {
    GgufWriter w = DeepSeekHeader();
    w.Remove("deepseek2.rope.scaling.yarn_log_multiplier");
    ExpectNamed(Load(w).config.status(), absl::StatusCode::kNotFound,
                "deepseek2.rope.scaling.yarn_log_multiplier");
  }
  {
    GgufWriter w = DeepSeekHeader();
    w.SetUint32("deepseek2.expert_gating_func", 3);
    ExpectNamed(Load(w).config.status(), absl::StatusCode::kInvalidArgument,
                "deepseek2.expert_gating_func");
  }
  {
    GgufWriter w = DeepSeekHeader();
    w.SetUint32("deepseek2.leading_dense_block_count", 3);
    ExpectNamed(Load(w).config.status(), absl::StatusCode::kInvalidArgument,
                "deepseek2.leading_dense_block_count");
  }
  {
    GgufWriter w = DeepSeekHeader();
    w.SetString("deepseek2.rope.scaling.type", "longrope");
    ExpectNamed(Load(w).config.status(), absl::StatusCode::kUnimplemented,
                "deepseek2.rope.scaling.type");
  }
}

}  // namespace
}  // namespace ringlm
