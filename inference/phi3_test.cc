// The phi3 architecture: its config (window, LongRoPE keys), its fused
// tensors as row views, and RoPE with LongRoPE factors. Exactness against
// llama.cpp is tests/synth_reference_test.cc's (phi3-tiny).
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "gtest/gtest.h"
#include "inference/model_config.h"
#include "inference/ops/norm_rope.h"
#include "inference/stage_weights.h"

namespace ringlm {
namespace {

constexpr uint32_t kEmbd = 64;
constexpr uint32_t kHeads = 4;  // heads of 16
constexpr uint32_t kFf = 128;
constexpr uint32_t kVocab = 300;

// An f32 tensor of `dims` whose value i is i (so row views can be told apart).
std::string Counting(uint64_t n) {
  std::vector<float> values(n);
  for (uint64_t i = 0; i < n; ++i) values[i] = static_cast<float>(i);
  std::string bytes(n * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

void Add(GgufWriter& w, const std::string& name, std::vector<uint64_t> dims) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  ASSERT_TRUE(w.AddTensor(name, std::move(dims), TensorType::kF32, Counting(n)).ok()) << name;
}

// A one-layer phi3 of width 64 (4 heads, as many KV heads), window 8,
// LongRoPE from an original context of 32. `qkv_rows` and `up_rows` shape
// the fused tensors (right: 3 x 64 and 2 x 128).
GgufWriter Phi3(uint64_t qkv_rows = 3 * kEmbd, uint64_t up_rows = 2 * kFf) {
  GgufWriter w;
  w.SetString("general.architecture", "phi3");
  w.SetUint32("phi3.block_count", 1);
  w.SetUint32("phi3.context_length", 128);
  w.SetUint32("phi3.embedding_length", kEmbd);
  w.SetUint32("phi3.feed_forward_length", kFf);
  w.SetUint32("phi3.attention.head_count", kHeads);
  w.SetUint32("phi3.attention.head_count_kv", kHeads);
  w.SetUint32("phi3.rope.dimension_count", kEmbd / kHeads);
  w.SetUint32("phi3.attention.sliding_window", 8);
  w.SetFloat32("phi3.rope.scaling.attn_factor", 1.25f);
  w.SetUint32("phi3.rope.scaling.original_context_length", 32);
  Add(w, "token_embd.weight", {kEmbd, kVocab});
  Add(w, "rope_factors_long.weight", {kEmbd / kHeads / 2});
  Add(w, "rope_factors_short.weight", {kEmbd / kHeads / 2});
  Add(w, "blk.0.attn_norm.weight", {kEmbd});
  Add(w, "blk.0.attn_qkv.weight", {kEmbd, qkv_rows});
  Add(w, "blk.0.attn_output.weight", {kEmbd, kEmbd});
  Add(w, "blk.0.ffn_norm.weight", {kEmbd});
  Add(w, "blk.0.ffn_up.weight", {kEmbd, up_rows});
  Add(w, "blk.0.ffn_down.weight", {kFf, kEmbd});
  Add(w, "output_norm.weight", {kEmbd});
  Add(w, "output.weight", {kEmbd, kVocab});
  return w;
}

struct Opened {
  std::unique_ptr<GgufFile> file;
  absl::StatusOr<ModelConfig> config;
};

Opened Open(const GgufWriter& w) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(w.ToBytes());
  EXPECT_TRUE(f.ok()) << f.status();
  Opened o{std::move(*f), absl::InternalError("unset")};
  o.config = ModelConfig::FromGguf(*o.file);
  return o;
}

TEST(Phi3Test, ConfigReadsWindowAndLongRope) {
  Opened o = Open(Phi3());
  ASSERT_TRUE(o.config.ok()) << o.config.status();
  const ModelConfig& c = *o.config;
  EXPECT_EQ(c.rope_style, RopeStyle::kNeox);
  EXPECT_TRUE(c.fused_qkv);
  EXPECT_TRUE(c.fused_gate_up);
  EXPECT_EQ(c.n_swa, 8u);
  EXPECT_TRUE(c.IsSlidingLayer(0));
  EXPECT_EQ(c.kq_scale, 1.0f);
  EXPECT_EQ(c.q_scale, 0.25f);  // 1 / sqrt(16), after RoPE
  EXPECT_EQ(c.n_ctx_orig, 32u);
  EXPECT_EQ(c.rope_attn_factor, 1.25f);
  EXPECT_FALSE(c.UsesLongRopeFactors(32));
  EXPECT_TRUE(c.UsesLongRopeFactors(33));
}

TEST(Phi3Test, WindowDefaultsByShapeOrIsRequired) {
  GgufWriter w = Phi3();
  w.Remove("phi3.attention.sliding_window");
  Opened o = Open(w);
  EXPECT_EQ(o.config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(o.config.status().message().find("phi3.attention.sliding_window"), std::string::npos);
  // Phi-3 mini 4k's shape: llama.cpp's default of 2047.
  w.SetUint32("phi3.block_count", 32);
  w.SetUint32("phi3.context_length", 4096);
  o = Open(w);
  ASSERT_TRUE(o.config.ok()) << o.config.status();
  EXPECT_EQ(o.config->n_swa, 2047u);
  // Phi-4: a window of 0 slides nothing.
  w.SetUint32("phi3.attention.sliding_window", 0);
  o = Open(w);
  ASSERT_TRUE(o.config.ok()) << o.config.status();
  EXPECT_FALSE(o.config->IsSlidingLayer(0));
}

TEST(Phi3Test, BadKeysAreNamed) {
  GgufWriter w = Phi3();
  w.SetFloat32("phi3.rope.scaling.attn_factor", -1.0f);
  Opened o = Open(w);
  EXPECT_EQ(o.config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(o.config.status().message().find("phi3.rope.scaling.attn_factor"), std::string::npos);
  w = Phi3();
  w.SetUint32("phi3.attention.key_length", 32);  // heads wider than n_embd / n_head
  w.SetUint32("phi3.rope.dimension_count", 32);
  o = Open(w);
  EXPECT_EQ(o.config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(o.config.status().message().find("attn_qkv"), std::string::npos);
  w = Phi3();
  w.SetFloat32("phi3.rope.scaling.factor", 4.0f);
  o = Open(w);
  EXPECT_EQ(o.config.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(Phi3Test, FusedTensorsAreViewedByRows) {
  Opened o = Open(Phi3());
  ASSERT_TRUE(o.config.ok()) << o.config.status();
  absl::StatusOr<StageWeights> w = StageWeights::Load(*o.file, *o.config, {0, 1});
  ASSERT_TRUE(w.ok()) << w.status();
  const LayerWeights& l = w->layer(0);
  // Counting values: row r of a [64 x rows] tensor starts with 64 * r.
  auto first = [](const WeightMatrix& m) { return static_cast<const float*>(m.data)[0]; };
  EXPECT_EQ(l.wq.rows, kEmbd);
  EXPECT_EQ(first(l.wq), 0.0f);
  EXPECT_EQ(first(l.wk), 64.0f * kEmbd);
  EXPECT_EQ(first(l.wv), 64.0f * 2 * kEmbd);
  EXPECT_EQ(l.gate.rows, kFf);
  EXPECT_EQ(first(l.gate), 0.0f);
  EXPECT_EQ(first(l.up), 64.0f * kFf);
  // The factors by the context size; both tensors counted once each.
  ASSERT_NE(w->rope_factors(*o.config, 32), nullptr);
  EXPECT_NE(w->rope_factors(*o.config, 32), w->rope_factors(*o.config, 64));
  EXPECT_EQ(w->tensors().size(), 11u);
}

TEST(Phi3Test, WrongFusedShapesNameTheTensor) {
  for (auto [qkv, up, name] : {std::tuple{3 * kEmbd - 1, 2 * kFf, "blk.0.attn_qkv.weight"},
                               std::tuple{3 * kEmbd, kFf, "blk.0.ffn_up.weight"}}) {
    Opened o = Open(Phi3(qkv, up));
    ASSERT_TRUE(o.config.ok()) << o.config.status();
    absl::StatusOr<StageWeights> w = StageWeights::Load(*o.file, *o.config, {0, 1});
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(w.status().message().find(name), std::string::npos) << w.status();
  }
}

TEST(Phi3Test, RopeFactorsDivideTheAnglesAndTheAttnFactorScales) {
  // NeoX, one head of 4: pairs (x0, x2) and (x1, x3).
  const float factors[] = {2.0f, 4.0f};
  float x[] = {1.0f, 1.0f, 0.0f, 0.0f};
  ApplyRope(x, 1, 4, 4, 3, 10000.0f, RopeStyle::kNeox, factors, 1.5f);
  const float theta0 = 3.0f / 2.0f;
  const float theta1 = 3.0f * std::pow(10000.0f, -0.5f) / 4.0f;
  EXPECT_FLOAT_EQ(x[0], std::cos(theta0) * 1.5f);
  EXPECT_FLOAT_EQ(x[2], std::sin(theta0) * 1.5f);
  EXPECT_FLOAT_EQ(x[1], std::cos(theta1) * 1.5f);
  EXPECT_FLOAT_EQ(x[3], std::sin(theta1) * 1.5f);
  // The defaults change nothing.
  float a[] = {0.3f, -0.7f, 0.2f, 0.9f};
  float b[] = {0.3f, -0.7f, 0.2f, 0.9f};
  const float ones[] = {1.0f, 1.0f};
  ApplyRope(a, 1, 4, 4, 7, 10000.0f, RopeStyle::kNeox);
  ApplyRope(b, 1, 4, 4, 7, 10000.0f, RopeStyle::kNeox, ones, 1.0f);
  EXPECT_EQ(std::memcmp(a, b, sizeof(a)), 0);
}

}  // namespace
}  // namespace ringlm
