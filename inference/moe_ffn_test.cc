// The mixture-of-experts block: routing as llama.cpp's graph does it, the
// grouped feed-forward against a token-by-token reference, and the load-time
// errors for expert metadata and tensors that disagree.
#include "inference/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gguf/gguf_writer.h"
#include "gtest/gtest.h"
#include "inference/ops/activations.h"
#include "inference/ops/matmul.h"

namespace ringlm {
namespace {

ModelConfig RouterConfig(uint32_t n_expert, uint32_t n_used, bool norm) {
  ModelConfig c;
  c.n_expert = n_expert;
  c.n_expert_used = n_used;
  c.expert_weights_norm = norm;
  return c;
}

TEST(RouteTokenTest, PicksTheLargestLogitsBestFirst) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 3.0f, 0.5f, 2.5f, 0.0f, 1.0f, -2.0f};
  const ExpertChoice c = RouteToken(RouterConfig(9, 3, false), logits.data());
  EXPECT_EQ(c.experts, (std::vector<int32_t>{3, 5, 1}));
  // Without normalisation the weights are the softmax probabilities.
  double sum = 0;
  for (float l : logits) sum += std::exp(l - 3.0f);
  ASSERT_EQ(c.weights.size(), 3u);
  EXPECT_NEAR(c.weights[0], 1.0 / sum, 1e-6);
  EXPECT_NEAR(c.weights[1], std::exp(-0.5) / sum, 1e-6);
  EXPECT_GT(c.weights[0], c.weights[1]);
  EXPECT_GT(c.weights[1], c.weights[2]);
}

TEST(RouteTokenTest, TiesKeepTheLowerExpertFirst) {
  const std::vector<float> logits = {1.0f, 2.0f, 2.0f, 0.0f, 2.0f, 1.0f, 0.0f, 0.0f};
  EXPECT_EQ(RouteToken(RouterConfig(8, 2, true), logits.data()).experts,
            (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(RouteToken(RouterConfig(8, 4, true), logits.data()).experts,
            (std::vector<int32_t>{1, 2, 4, 0}));
}

TEST(RouteTokenTest, NormalisedWeightsAreTheProbabilitiesOverTheirFloatSum) {
  const std::vector<float> logits = {0.3f, -0.2f, 0.9f, 0.1f, 0.7f, -0.4f, 0.2f, 0.0f};
  const ExpertChoice raw = RouteToken(RouterConfig(8, 2, false), logits.data());
  const ExpertChoice norm = RouteToken(RouterConfig(8, 2, true), logits.data());
  EXPECT_EQ(raw.experts, (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(norm.experts, raw.experts);
  const float total = static_cast<float>(double{raw.weights[0]} + double{raw.weights[1]});
  EXPECT_EQ(norm.weights[0], raw.weights[0] / total);
  EXPECT_EQ(norm.weights[1], raw.weights[1] / total);
}

// DeepSeek V3: sigmoid gating; the bias moves expert 0 to the front of the
// choice, but the weights are the unbiased sigmoids, renormalised, then
// scaled (llm_build_moe_ffn's order).
TEST(RouteTokenTest, SigmoidGatingWithASelectionBiasAndAScale) {
  ModelConfig c = RouterConfig(5, 2, true);
  c.sigmoid_gating = true;
  c.expert_weights_scale = 2.5f;
  const std::vector<float> logits = {-1.0f, 2.0f, 0.5f, 0.4f, -3.0f};
  const std::vector<float> bias = {1.5f, 0.0f, 0.0f, 0.0f, 0.0f};
  auto sigmoid = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  const ExpertChoice unbiased = RouteToken(c, logits.data());
  EXPECT_EQ(unbiased.experts, (std::vector<int32_t>{1, 2}));
  const ExpertChoice biased = RouteToken(c, logits.data(), bias.data());
  EXPECT_EQ(biased.experts, (std::vector<int32_t>{0, 1}));  // 0.27 + 1.5 beats 0.88
  const float p0 = sigmoid(-1.0f), p1 = sigmoid(2.0f);
  const float total = static_cast<float>(double{p0} + double{p1});
  EXPECT_EQ(biased.weights[0], p0 / total * 2.5f);
  EXPECT_EQ(biased.weights[1], p1 / total * 2.5f);
  // Without normalisation: the raw sigmoids, scaled.
  c.expert_weights_norm = false;
  const ExpertChoice raw = RouteToken(c, logits.data(), bias.data());
  EXPECT_EQ(raw.weights[0], p0 * 2.5f);
  EXPECT_EQ(raw.weights[1], p1 * 2.5f);
}

// Deterministic values in [-scale, scale).
std::vector<float> Values(size_t n, uint32_t seed, float scale) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (static_cast<float>(s >> 8) / 16777216.0f * 2.0f - 1.0f) * scale;
  }
  return v;
}

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// A one-layer f32 Mixtral-style model: n_embd 32, 4 heads, 6 experts of
// width 64, 2 used.
constexpr uint32_t kEmbd = 32, kFf = 64, kExperts = 6, kUsed = 2, kVocab = 300;

GgufWriter MoeWriter() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetUint32("llama.block_count", 1);
  w.SetUint32("llama.context_length", 64);
  w.SetUint32("llama.embedding_length", kEmbd);
  w.SetUint32("llama.feed_forward_length", kFf);
  w.SetUint32("llama.attention.head_count", 4);
  w.SetUint32("llama.expert_count", kExperts);
  w.SetUint32("llama.expert_used_count", kUsed);
  uint32_t seed = 1;
  auto add = [&](const std::string& name, std::vector<uint64_t> dims) {
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    const std::vector<float> v =
        dims.size() == 1 ? std::vector<float>(n, 1.0f) : Values(n, seed++, 0.3f);
    EXPECT_TRUE(w.AddTensor(name, dims, TensorType::kF32, Bytes(v)).ok()) << name;
  };
  add("token_embd.weight", {kEmbd, kVocab});
  add("blk.0.attn_norm.weight", {kEmbd});
  add("blk.0.attn_q.weight", {kEmbd, kEmbd});
  add("blk.0.attn_k.weight", {kEmbd, kEmbd});
  add("blk.0.attn_v.weight", {kEmbd, kEmbd});
  add("blk.0.attn_output.weight", {kEmbd, kEmbd});
  add("blk.0.ffn_norm.weight", {kEmbd});
  add("blk.0.ffn_gate_inp.weight", {kEmbd, kExperts});
  add("blk.0.ffn_gate_exps.weight", {kEmbd, kFf, kExperts});
  add("blk.0.ffn_up_exps.weight", {kEmbd, kFf, kExperts});
  add("blk.0.ffn_down_exps.weight", {kFf, kEmbd, kExperts});
  add("output_norm.weight", {kEmbd});
  add("output.weight", {kEmbd, kVocab});
  return w;
}

struct Loaded {
  std::unique_ptr<GgufFile> file;
  absl::StatusOr<ModelConfig> config;
  absl::StatusOr<StageWeights> weights = absl::UnknownError("not loaded");
};

Loaded Load(const GgufWriter& w) {
  Loaded l;
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(w.ToBytes());
  EXPECT_TRUE(f.ok()) << f.status();
  l.file = std::move(*f);
  l.config = ModelConfig::FromGguf(*l.file);
  if (l.config.ok()) l.weights = StageWeights::Load(*l.file, *l.config, {0, 1});
  return l;
}

TEST(MoeFeedForwardTest, GroupedByExpertEqualsTokenByToken) {
  const Loaded m = Load(MoeWriter());
  ASSERT_TRUE(m.weights.ok()) << m.weights.status();
  const ModelConfig& c = *m.config;
  EXPECT_TRUE(c.is_moe());
  EXPECT_EQ(c.n_ff_exp, kFf);
  const MoeWeights& w = m.weights->layer(0).moe;
  const int64_t n = 7;
  const std::vector<float> x = Values(n * kEmbd, 99, 1.0f);
  std::vector<float> out(n * kEmbd);
  ThreadPool pool(2);
  MoeFeedForward(c, w, x.data(), n, out.data(), &pool);
  // The same sums, one token and one expert at a time.
  for (int64_t t = 0; t < n; ++t) {
    SCOPED_TRACE(absl::StrCat("token ", t));
    const float* xt = &x[t * kEmbd];
    std::vector<float> logits(kExperts), gate(kFf), up(kFf), down(kEmbd), sum(kEmbd);
    RouterLogits(w.router, xt, 1, logits.data(), nullptr);
    const ExpertChoice choice = RouteToken(c, logits.data());
    for (uint32_t s = 0; s < kUsed; ++s) {
      const WeightMatrix g = w.gate.Expert(choice.experts[s]);
      const WeightMatrix u = w.up.Expert(choice.experts[s]);
      const WeightMatrix d = w.down.Expert(choice.experts[s]);
      MatMul(g.type, g.data, g.rows, g.cols, xt, 1, gate.data(), nullptr);
      MatMul(u.type, u.data, u.rows, u.cols, xt, 1, up.data(), nullptr);
      SwiGlu(gate.data(), up.data(), gate.data(), kFf);
      MatMul(d.type, d.data, d.rows, d.cols, gate.data(), 1, down.data(), nullptr);
      for (uint32_t j = 0; j < kEmbd; ++j) {
        const float v = down[j] * choice.weights[s];
        sum[j] = s == 0 ? v : sum[j] + v;
      }
    }
    EXPECT_EQ(std::vector<float>(out.begin() + t * kEmbd, out.begin() + (t + 1) * kEmbd), sum);
  }
}

TEST(MoeFeedForwardTest, ExpertsNoTokenChoseAreNeverRead) {
  const Loaded m = Load(MoeWriter());
  ASSERT_TRUE(m.weights.ok()) << m.weights.status();
  const ModelConfig& c = *m.config;
  const MoeWeights& w = m.weights->layer(0).moe;
  const int64_t n = 2;  // two tokens choose at most 4 of the 6 experts
  const std::vector<float> x = Values(n * kEmbd, 7, 1.0f);
  std::vector<float> expected(n * kEmbd);
  MoeFeedForward(c, w, x.data(), n, expected.data(), nullptr);
  std::vector<bool> chosen(kExperts, false);
  std::vector<float> logits(n * kExperts);
  RouterLogits(w.router, x.data(), n, logits.data(), nullptr);
  for (int64_t t = 0; t < n; ++t) {
    for (int32_t e : RouteToken(c, &logits[t * kExperts]).experts) chosen[e] = true;
  }
  // Copies of the expert tensors with every other expert's values NaN: a
  // read of any of them would poison the output.
  MoeWeights poisoned = w;
  std::vector<std::vector<float>> copies;
  for (ExpertMatrices* em : {&poisoned.gate, &poisoned.up, &poisoned.down}) {
    const int64_t per_expert = em->rows * em->cols;
    const float* src = static_cast<const float*>(em->data);
    std::vector<float>& copy = copies.emplace_back(src, src + per_expert * kExperts);
    for (uint32_t e = 0; e < kExperts; ++e) {
      if (!chosen[e]) std::fill_n(copy.begin() + e * per_expert, per_expert, NAN);
    }
    em->data = copy.data();
  }
  ASSERT_LT(std::count(chosen.begin(), chosen.end(), true), static_cast<int64_t>(kExperts));
  std::vector<float> out(n * kEmbd);
  MoeFeedForward(c, poisoned, x.data(), n, out.data(), nullptr);
  EXPECT_EQ(out, expected);
}

TEST(MoeLoadTest, MoreExpertsUsedThanExistIsNamed) {
  GgufWriter w = MoeWriter();
  w.SetUint32("llama.expert_used_count", kExperts + 1);
  const Loaded m = Load(w);
  EXPECT_EQ(m.config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.config.status().message().find("llama.expert_used_count"), std::string::npos)
      << m.config.status();
}

TEST(MoeLoadTest, MissingExpertsUsedIsNamed) {
  GgufWriter w = MoeWriter();
  w.Remove("llama.expert_used_count");
  const Loaded m = Load(w);
  EXPECT_EQ(m.config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(m.config.status().message().find("llama.expert_used_count"), std::string::npos)
      << m.config.status();
}

TEST(MoeLoadTest, Qwen2MoeNeedsExpertsAndReadsItsWidths) {
  GgufWriter w;
  w.SetString("general.architecture", "qwen2moe");
  w.SetUint32("qwen2moe.block_count", 1);
  w.SetUint32("qwen2moe.context_length", 64);
  w.SetUint32("qwen2moe.embedding_length", kEmbd);
  w.SetUint32("qwen2moe.feed_forward_length", 96);
  w.SetUint32("qwen2moe.attention.head_count", 4);
  w.SetUint32("qwen2moe.expert_used_count", 2);
  EXPECT_TRUE(w.AddTensor("token_embd.weight", {kEmbd, kVocab}, TensorType::kF32,
                          Bytes(Values(kEmbd * kVocab, 1, 0.1f)))
                  .ok());
  const Loaded missing = Load(w);
  EXPECT_EQ(missing.config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.config.status().message().find("qwen2moe.expert_count"), std::string::npos)
      << missing.config.status();
  w.SetUint32("qwen2moe.expert_count", 4);
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(w.ToBytes());
  ASSERT_TRUE(f.ok());
  absl::StatusOr<ModelConfig> c = ModelConfig::FromGguf(**f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_ff_exp, 48u);    // llama.cpp's default: n_ff / n_expert_used
  EXPECT_EQ(c->n_ff_shexp, 96u);  // and n_ff
  EXPECT_FALSE(c->expert_weights_norm);
  EXPECT_TRUE(c->has_qkv_bias);
  w.SetUint32("qwen2moe.expert_feed_forward_length", 64);
  w.SetUint32("qwen2moe.expert_shared_feed_forward_length", 128);
  f = GgufFile::FromBytes(w.ToBytes());
  ASSERT_TRUE(f.ok());
  c = ModelConfig::FromGguf(**f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_ff_exp, 64u);
  EXPECT_EQ(c->n_ff_shexp, 128u);
}

TEST(MoeLoadTest, TooManyExpertsIsNamed) {
  GgufWriter w = MoeWriter();
  w.SetUint32("llama.expert_count", 100000);
  const Loaded m = Load(w);
  EXPECT_EQ(m.config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.config.status().message().find("llama.expert_count"), std::string::npos)
      << m.config.status();
}

TEST(MoeLoadTest, ExpertCountThatDisagreesWithTheTensorsNamesTheTensor) {
  GgufWriter w = MoeWriter();
  w.SetUint32("llama.expert_count", kExperts - 1);
  const Loaded m = Load(w);
  ASSERT_TRUE(m.config.ok()) << m.config.status();
  EXPECT_EQ(m.weights.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.weights.status().message().find("blk.0.ffn_gate_inp.weight"), std::string::npos)
      << m.weights.status();
}

TEST(MoeLoadTest, ExpertTensorOfTheWrongShapeIsNamed) {
  GgufWriter w = MoeWriter();
  // A writer cannot replace a tensor, so build one whose down experts are
  // transposed: [n_embd, n_ff, n_expert] instead of [n_ff, n_embd, n_expert].
  GgufWriter bad;
  const Loaded good = Load(w);
  for (const auto& [key, value] : good.file->metadata()) bad.SetValue(key, value);
  for (const GgufTensorInfo& t : good.file->tensors()) {
    std::vector<uint64_t> dims = t.dims;
    if (t.name == "blk.0.ffn_down_exps.weight") std::swap(dims[0], dims[1]);
    ASSERT_TRUE(bad.AddTensor(t.name, dims, t.type,
                              std::string(reinterpret_cast<const char*>(t.data), t.n_bytes))
                    .ok());
  }
  const Loaded m = Load(bad);
  EXPECT_EQ(m.weights.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.weights.status().message().find("blk.0.ffn_down_exps.weight"), std::string::npos)
      << m.weights.status();
}

}  // namespace
}  // namespace ringlm
