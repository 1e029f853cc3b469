// Synthetic models: the plan follows the presets and llama.cpp's type rules,
// the files load and generate, the vocabulary tokenizes, and the bytes depend
// on the seed alone.
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "cli/synth/synth_model.h"
#include "gguf/gguf_file.h"
#include "gtest/gtest.h"
#include "inference/generator.h"
#include "inference/model.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

std::string TempPath(const std::string& name) {
  return testing::TempDir() + "/synth_test_" + std::to_string(::getpid()) + "_" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const SynthTensor* FindIn(const SynthPlan& plan, const std::string& name) {
  for (const SynthTensor& t : plan.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

TEST(SynthPresetTest, PresetsHaveTheRealModelsShapes) {
  absl::StatusOr<SynthPreset> t = FindSynthPreset("tinyllama-1.1b");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->n_embd, 2048u);
  EXPECT_EQ(t->n_layer, 22u);
  EXPECT_EQ(t->n_head, 32u);
  EXPECT_EQ(t->n_head_kv, 4u);
  EXPECT_EQ(t->n_ff, 5632u);
  EXPECT_EQ(t->n_vocab, 32000u);
  absl::StatusOr<SynthPreset> l = FindSynthPreset("llama-3.2-1b");
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->tied_output);
  EXPECT_EQ(l->n_vocab, 128256u);
  EXPECT_EQ(l->n_ctx, 131072u);
  EXPECT_EQ(l->rope_freq_base, 500000.0f);
  absl::StatusOr<SynthPlan> plan = PlanSynthModel(*t, TensorType::kF16);
  ASSERT_TRUE(plan.ok());
  // TinyLlama-1.1B has 1,100,048,384 parameters.
  EXPECT_EQ(plan->n_params(), 1100048384u);
}

TEST(SynthPresetTest, BadNamesAreRejectedWithTheKnownOnes) {
  absl::StatusOr<SynthPreset> p = FindSynthPreset("llama-9b");
  ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("unknown preset 'llama-9b'"), absl::string_view::npos);
  EXPECT_NE(p.status().message().find("tinyllama-1.1b"), absl::string_view::npos);
  absl::StatusOr<TensorType> t = ParseSynthType("iq2_xxs");
  ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("unknown type 'iq2_xxs'"), absl::string_view::npos);
  SynthOptions options;
  options.preset = "nope";
  const std::string path = TempPath("never");
  EXPECT_EQ(WriteSynthModel(options, path).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::ifstream(path).good());
}

TEST(SynthPlanTest, TinyTensorsHaveLlamaNamesAndShapes) {
  absl::StatusOr<SynthPlan> plan = PlanSynthModel(*FindSynthPreset("tiny"), TensorType::kQ8_0);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->tensors.size(), 1 + 4 * 9 + 2u);
  const std::pair<std::string, std::vector<uint64_t>> expected[] = {
      {"token_embd.weight", {256, 2048}},  {"blk.0.attn_norm.weight", {256}},
      {"blk.0.attn_q.weight", {256, 256}}, {"blk.0.attn_k.weight", {256, 128}},
      {"blk.0.attn_v.weight", {256, 128}}, {"blk.3.attn_output.weight", {256, 256}},
      {"blk.3.ffn_norm.weight", {256}},    {"blk.3.ffn_gate.weight", {256, 768}},
      {"blk.3.ffn_up.weight", {256, 768}}, {"blk.3.ffn_down.weight", {768, 256}},
      {"output_norm.weight", {256}},       {"output.weight", {256, 2048}},
  };
  for (const auto& [name, dims] : expected) {
    const SynthTensor* t = FindIn(*plan, name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->dims, dims) << name;
    EXPECT_EQ(t->type, dims.size() == 1 ? TensorType::kF32 : TensorType::kQ8_0) << name;
  }
}

TEST(SynthPlanTest, Q4KFollowsLlamaCppsQ4KMMix) {
  absl::StatusOr<SynthPlan> plan =
      PlanSynthModel(*FindSynthPreset("tinyllama-1.1b"), TensorType::kQ4_K);
  ASSERT_TRUE(plan.ok());
  const TensorType big =
      IsComputeSupported(TensorType::kQ6_K) ? TensorType::kQ6_K : TensorType::kQ8_0;
  // use_more_bits for 22 layers, worked out by hand: 22/8 = 2, 7*22/8 = 19,
  // and (i - 2) % 3 == 2 for i = 4, 7, 10, 13, 16.
  const std::set<int> more_bits = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};
  for (int i = 0; i < 22; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const TensorType want = more_bits.count(i) ? big : TensorType::kQ4_K;
    EXPECT_EQ(FindIn(*plan, b + "attn_v.weight")->type, want) << i;
    EXPECT_EQ(FindIn(*plan, b + "ffn_down.weight")->type, want) << i;
    for (const char* other : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"}) {
      EXPECT_EQ(FindIn(*plan, b + other + ".weight")->type, TensorType::kQ4_K) << b << other;
    }
    EXPECT_EQ(FindIn(*plan, b + "attn_norm.weight")->type, TensorType::kF32);
  }
  EXPECT_EQ(FindIn(*plan, "output.weight")->type, big);
  EXPECT_EQ(FindIn(*plan, "token_embd.weight")->type, TensorType::kQ4_K);
  EXPECT_EQ(FindIn(*plan, "output_norm.weight")->type, TensorType::kF32);
}

TEST(SynthPlanTest, Q5KFollowsLlamaCppsQ5KMMix) {
  absl::StatusOr<SynthPlan> plan =
      PlanSynthModel(*FindSynthPreset("tinyllama-1.1b"), TensorType::kQ5_K);
  ASSERT_TRUE(plan.ok());
  const std::set<int> more_bits = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};  // as for Q4_K_M
  for (int i = 0; i < 22; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const TensorType want = more_bits.count(i) ? TensorType::kQ6_K : TensorType::kQ5_K;
    EXPECT_EQ(FindIn(*plan, b + "attn_v.weight")->type, want) << i;
    EXPECT_EQ(FindIn(*plan, b + "ffn_down.weight")->type, want) << i;
    for (const char* other : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"}) {
      EXPECT_EQ(FindIn(*plan, b + other + ".weight")->type, TensorType::kQ5_K) << b << other;
    }
  }
  EXPECT_EQ(FindIn(*plan, "output.weight")->type, TensorType::kQ6_K);
  EXPECT_EQ(FindIn(*plan, "token_embd.weight")->type, TensorType::kQ5_K);
}

// Q3_K_M and Q2_K. For "small" these are the types llama-quantize (c392e50)
// chose; tinyllama's GQA of 8 takes the other attn_v branch of Q2_K.
TEST(SynthPlanTest, Q3KAndQ2KFollowLlamaCppsQ3KMAndQ2KMixes) {
  for (const char* preset : {"tinyllama-1.1b", "small"}) {
    SCOPED_TRACE(preset);
    const SynthPreset p = *FindSynthPreset(preset);
    const int n = static_cast<int>(p.n_layer);
    absl::StatusOr<SynthPlan> q3 = PlanSynthModel(p, TensorType::kQ3_K);
    absl::StatusOr<SynthPlan> q2 = PlanSynthModel(p, TensorType::kQ2_K);
    ASSERT_TRUE(q3.ok() && q2.ok());
    const bool gqa4 = p.n_head / p.n_head_kv >= 4;  // tinyllama 8, small 2
    for (int i = 0; i < n; ++i) {
      const std::string b = "blk." + std::to_string(i) + ".";
      EXPECT_EQ(FindIn(*q3, b + "attn_v.weight")->type,
                i < 2 ? TensorType::kQ5_K : TensorType::kQ4_K);
      EXPECT_EQ(FindIn(*q3, b + "ffn_down.weight")->type,
                i < n / 16 ? TensorType::kQ5_K : TensorType::kQ4_K);
      EXPECT_EQ(FindIn(*q3, b + "attn_output.weight")->type, TensorType::kQ4_K);
      EXPECT_EQ(FindIn(*q2, b + "attn_v.weight")->type,
                gqa4 ? TensorType::kQ4_K : TensorType::kQ3_K);
      EXPECT_EQ(FindIn(*q2, b + "ffn_down.weight")->type, TensorType::kQ3_K);
      EXPECT_EQ(FindIn(*q2, b + "attn_output.weight")->type, TensorType::kQ3_K);
      for (const char* other : {"attn_q", "attn_k", "ffn_gate", "ffn_up"}) {
        EXPECT_EQ(FindIn(*q3, b + other + ".weight")->type, TensorType::kQ3_K) << b << other;
        EXPECT_EQ(FindIn(*q2, b + other + ".weight")->type, TensorType::kQ2_K) << b << other;
      }
    }
    EXPECT_EQ(FindIn(*q3, "output.weight")->type, TensorType::kQ6_K);
    EXPECT_EQ(FindIn(*q2, "output.weight")->type, TensorType::kQ6_K);
    EXPECT_EQ(FindIn(*q3, "token_embd.weight")->type, TensorType::kQ3_K);
    EXPECT_EQ(FindIn(*q2, "token_embd.weight")->type, TensorType::kQ2_K);
  }
}

// llama-quantize's IQ4_NL/IQ4_XS mixes without an importance matrix, and the
// Q4_1/Q5_1 ones (checked byte for byte against llama-quantize c392e50 on
// the tiny preset).
TEST(SynthPlanTest, Iq4AndLegacyMinMixesFollowLlamaQuantize) {
  SynthPreset p = *FindSynthPreset("tiny");
  p.n_layer = 8;
  p.n_head_kv = 2;  // GQA 4: attn_v takes Q5_K in the IQ4 mixes
  for (TensorType base : {TensorType::kIQ4_NL, TensorType::kIQ4_XS}) {
    absl::StatusOr<SynthPlan> plan = PlanSynthModel(p, base);
    ASSERT_TRUE(plan.ok()) << plan.status();
    for (int i = 0; i < 8; ++i) {
      const std::string b = absl::StrCat("blk.", i, ".");
      EXPECT_EQ(FindIn(*plan, b + "attn_v.weight")->type, TensorType::kQ5_K) << i;
      EXPECT_EQ(FindIn(*plan, b + "ffn_down.weight")->type, i < 1 ? TensorType::kQ5_K : base) << i;
      EXPECT_EQ(FindIn(*plan, b + "attn_q.weight")->type, base) << i;
    }
    EXPECT_EQ(FindIn(*plan, "output.weight")->type, TensorType::kQ6_K);
    EXPECT_EQ(FindIn(*plan, "token_embd.weight")->type, base);
  }
  for (TensorType base : {TensorType::kQ4_1, TensorType::kQ5_0, TensorType::kQ5_1}) {
    absl::StatusOr<SynthPlan> plan = PlanSynthModel(p, base);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(FindIn(*plan, "blk.0.attn_v.weight")->type, base);
    EXPECT_EQ(FindIn(*plan, "blk.0.ffn_down.weight")->type, base);
    EXPECT_EQ(FindIn(*plan, "output.weight")->type, TensorType::kQ6_K);
  }
  EXPECT_EQ(LlamaFileType(TensorType::kQ4_1), 3u);
  EXPECT_EQ(LlamaFileType(TensorType::kQ5_0), 8u);
  EXPECT_EQ(LlamaFileType(TensorType::kQ5_1), 9u);
  EXPECT_EQ(LlamaFileType(TensorType::kIQ4_NL), 25u);
  EXPECT_EQ(LlamaFileType(TensorType::kIQ4_XS), 30u);
  // IQ4_XS rows that 256 does not divide fall back to IQ4_NL, as llama.cpp.
  p.n_embd = 96;
  p.n_head = 3;
  p.n_head_kv = 1;
  absl::StatusOr<SynthPlan> odd = PlanSynthModel(p, TensorType::kIQ4_XS);
  ASSERT_TRUE(odd.ok()) << odd.status();
  EXPECT_EQ(FindIn(*odd, "blk.1.attn_q.weight")->type, TensorType::kIQ4_NL);
}

TEST(SynthPlanTest, TiedHeadTakesTheOutputRuleAndQ8_0KeepsItsHead) {
  absl::StatusOr<SynthPlan> tied =
      PlanSynthModel(*FindSynthPreset("llama-3.2-1b"), TensorType::kQ4_0);
  ASSERT_TRUE(tied.ok());
  EXPECT_EQ(FindIn(*tied, "output.weight"), nullptr);
  EXPECT_EQ(FindIn(*tied, "token_embd.weight")->type,
            IsComputeSupported(TensorType::kQ6_K) ? TensorType::kQ6_K : TensorType::kQ8_0);
  EXPECT_EQ(FindIn(*tied, "blk.0.ffn_down.weight")->type, TensorType::kQ4_0);
  absl::StatusOr<SynthPlan> q8 = PlanSynthModel(*FindSynthPreset("tiny"), TensorType::kQ8_0);
  EXPECT_EQ(FindIn(*q8, "output.weight")->type, TensorType::kQ8_0);
  absl::StatusOr<SynthPlan> f16 = PlanSynthModel(*FindSynthPreset("tiny"), TensorType::kF16);
  EXPECT_EQ(FindIn(*f16, "output.weight")->type, TensorType::kF16);
  EXPECT_EQ(FindIn(*f16, "token_embd.weight")->type, TensorType::kF16);
}

TEST(SynthPlanTest, RowsThatBlocksDoNotDivideFallBack) {
  SynthPreset odd = *FindSynthPreset("tiny");
  odd.name = "odd";
  odd.n_embd = 96;  // a multiple of 32, not of 256
  odd.n_head = 3;
  odd.n_head_kv = 1;
  odd.n_ff = 100;  // not even a multiple of 32
  absl::StatusOr<SynthPlan> plan = PlanSynthModel(odd, TensorType::kQ4_K);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_q.weight")->type, TensorType::kQ8_0);
  EXPECT_EQ(FindIn(*plan, "blk.1.ffn_down.weight")->type, TensorType::kF16);
  EXPECT_EQ(FindIn(*plan, "output.weight")->type, TensorType::kQ8_0);
  odd.n_head = 5;  // does not divide n_embd
  EXPECT_EQ(PlanSynthModel(odd, TensorType::kQ4_K).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanSynthModel(*FindSynthPreset("tiny"), TensorType::kBF16).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SynthPlanTest, MoeTinyHasMixtralsExpertTensors) {
  absl::StatusOr<SynthPreset> p = FindSynthPreset("moe-tiny");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->n_expert, 8u);
  EXPECT_EQ(p->n_expert_used, 2u);
  absl::StatusOr<SynthPlan> plan = PlanSynthModel(*p, TensorType::kQ8_0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(FindIn(*plan, "blk.0.ffn_gate.weight"), nullptr);
  const SynthTensor* router = FindIn(*plan, "blk.3.ffn_gate_inp.weight");
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->dims, (std::vector<uint64_t>{256, 8}));
  EXPECT_EQ(router->type, TensorType::kF32);  // llama-quantize leaves routers alone
  const SynthTensor* down = FindIn(*plan, "blk.3.ffn_down_exps.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->dims, (std::vector<uint64_t>{512, 256, 8}));
  EXPECT_EQ(down->type, TensorType::kQ8_0);
  EXPECT_EQ(FindIn(*plan, "blk.3.ffn_up_exps.weight")->dims, (std::vector<uint64_t>{256, 512, 8}));
  SynthPreset bad = *p;
  bad.n_expert_used = 9;
  EXPECT_EQ(PlanSynthModel(bad, TensorType::kF32).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SynthPlanTest, Qwen2MoeTinyHasBiasesAndASharedExpert) {
  absl::StatusOr<SynthPreset> p = FindSynthPreset("qwen2moe-tiny");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->architecture, "qwen2moe");
  absl::StatusOr<SynthPlan> plan = PlanSynthModel(*p, TensorType::kQ8_0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const SynthTensor* bias = FindIn(*plan, "blk.0.attn_k.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->dims, (std::vector<uint64_t>{256}));
  EXPECT_GT(bias->stddev, 0.0f);  // random, not ones
  const SynthTensor* gate = FindIn(*plan, "blk.1.ffn_gate_inp_shexp.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->type, TensorType::kF32);
  EXPECT_EQ(FindIn(*plan, "blk.1.ffn_down_shexp.weight")->dims, (std::vector<uint64_t>{512, 256}));
  EXPECT_EQ(FindIn(*plan, "blk.1.ffn_up_exps.weight")->dims, (std::vector<uint64_t>{256, 128, 12}));
  SynthPreset dense = *p;
  dense.n_expert = 0;  // qwen2moe without experts is not a model
  EXPECT_EQ(PlanSynthModel(dense, TensorType::kF32).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// DeepSeek: MLA tensors (q LoRA on V3's layout, plain attn_q on V2-Lite's
// 27 layers), a dense first layer, then experts, shared ones and (V3) the
// selection bias; the file's keys read back as the engine's config.
TEST(SynthPlanTest, DeepSeekTinyPresetsHaveMlaAndDeepSeeksExperts) {
  absl::StatusOr<SynthPreset> v3 = FindSynthPreset("deepseek3-tiny");
  ASSERT_TRUE(v3.ok()) << v3.status();
  absl::StatusOr<SynthPlan> plan = PlanSynthModel(*v3, TensorType::kQ4_K);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_q_a.weight")->dims, (std::vector<uint64_t>{256, 128}));
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_q_b.weight")->dims, (std::vector<uint64_t>{128, 256}));
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_kv_a_mqa.weight")->dims, (std::vector<uint64_t>{256, 160}));
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_kv_b.weight")->dims, (std::vector<uint64_t>{128, 256}));
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_output.weight")->dims, (std::vector<uint64_t>{128, 256}));
  EXPECT_NE(FindIn(*plan, "blk.0.ffn_down.weight"), nullptr);  // the dense lead
  EXPECT_EQ(FindIn(*plan, "blk.0.ffn_gate_inp.weight"), nullptr);
  EXPECT_EQ(FindIn(*plan, "blk.1.exp_probs_b.bias")->dims, (std::vector<uint64_t>{32}));
  EXPECT_EQ(FindIn(*plan, "blk.1.ffn_up_exps.weight")->dims, (std::vector<uint64_t>{256, 64, 32}));
  EXPECT_EQ(FindIn(*plan, "blk.1.ffn_down_shexp.weight")->dims, (std::vector<uint64_t>{64, 256}));
  EXPECT_EQ(FindIn(*plan, "blk.1.attn_q_a.weight")->type, TensorType::kQ4_K);
  EXPECT_EQ(FindIn(*plan, "blk.1.attn_kv_b.weight")->type, TensorType::kQ8_0);  // 128 wide rows

  absl::StatusOr<SynthPreset> lite = FindSynthPreset("deepseek2-lite-tiny");
  ASSERT_TRUE(lite.ok()) << lite.status();
  EXPECT_EQ(lite->n_layer, 27u);  // llama.cpp c392e50 takes 27 layers for V2-Lite
  plan = PlanSynthModel(*lite, TensorType::kF16);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_q.weight")->dims, (std::vector<uint64_t>{256, 256}));
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_q_a.weight"), nullptr);
  EXPECT_EQ(FindIn(*plan, "blk.1.exp_probs_b.bias"), nullptr);
  EXPECT_EQ(FindIn(*plan, "blk.1.ffn_up_shexp.weight")->dims, (std::vector<uint64_t>{256, 128}));

  SynthPreset bad = *v3;
  bad.rope_dim = bad.head_dim;  // nothing left unrotated
  EXPECT_EQ(PlanSynthModel(bad, TensorType::kF32).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = *v3;
  bad.n_head_kv = 2;  // MLA has a KV head per query head
  EXPECT_EQ(PlanSynthModel(bad, TensorType::kF32).status().code(),
            absl::StatusCode::kInvalidArgument);

  const std::string path = TempPath("deepseek3.gguf");
  SynthOptions options;
  options.preset = "deepseek3-tiny";
  options.type = TensorType::kQ8_0;
  options.threads = 2;
  ASSERT_TRUE(WriteSynthModel(options, path).ok());
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Load(path, ModelOptions{});
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ(c.architecture, "deepseek2");
  EXPECT_EQ(c.q_lora_rank, 128u);
  EXPECT_EQ(c.kv_lora_rank, 128u);
  EXPECT_EQ(c.head_dim, 64u);
  EXPECT_EQ(c.head_dim_v, 32u);
  EXPECT_EQ(c.n_rot, 32u);
  EXPECT_EQ(c.n_layer_dense_lead, 1u);
  EXPECT_EQ(c.n_ff_shexp, 64u);
  EXPECT_TRUE(c.sigmoid_gating);
  EXPECT_TRUE(c.expert_weights_norm);
  EXPECT_EQ(c.expert_weights_scale, 2.5f);
  EXPECT_EQ(c.rope_yarn.freq_scale, 0.25f);
  EXPECT_EQ(c.n_ctx_orig, 128u);
  m->reset();
  std::remove(path.c_str());
}

TEST(SynthPlanTest, Gemma2TinyHasPostNormsAndBothLayerKinds) {
  absl::StatusOr<SynthPreset> p = FindSynthPreset("gemma2-tiny");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->n_layer, 26u);  // the only small depth llama.cpp c392e50 runs Gemma 2 at
  EXPECT_EQ(p->HeadDim(), 48u);
  EXPECT_EQ(p->n_swa, 16u);  // shorter than the reference prompts plus 32 ids
  absl::StatusOr<SynthPlan> plan = PlanSynthModel(*p, TensorType::kQ8_0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(FindIn(*plan, "blk.25.attn_q.weight")->dims, (std::vector<uint64_t>{256, 192}));
  EXPECT_EQ(FindIn(*plan, "blk.25.post_attention_norm.weight")->dims, (std::vector<uint64_t>{256}));
  EXPECT_EQ(FindIn(*plan, "blk.25.post_ffw_norm.weight")->type, TensorType::kF32);
  EXPECT_EQ(FindIn(*plan, "output.weight"), nullptr);  // tied
  // Another architecture's preset has no post-norms.
  absl::StatusOr<SynthPlan> qwen3 =
      PlanSynthModel(*FindSynthPreset("qwen3-tiny"), TensorType::kF16);
  ASSERT_TRUE(qwen3.ok());
  EXPECT_EQ(FindIn(*qwen3, "blk.0.post_ffw_norm.weight"), nullptr);
}

TEST(SynthPlanTest, Phi3TinyHasFusedTensorsAndLongRopeFactors) {
  absl::StatusOr<SynthPreset> p = FindSynthPreset("phi3-tiny");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->HeadDim(), 32u);
  absl::StatusOr<SynthPlan> plan = PlanSynthModel(*p, TensorType::kQ4_K);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_qkv.weight")->dims, (std::vector<uint64_t>{256, 768}));
  // llama-quantize's Q4_K_M gives the fused attention Q5_K.
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_qkv.weight")->type, TensorType::kQ5_K);
  EXPECT_EQ(FindIn(*plan, "blk.0.ffn_up.weight")->dims, (std::vector<uint64_t>{256, 1536}));
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(FindIn(*plan, "blk.0.ffn_gate.weight"), nullptr);
  const SynthTensor* long_factors = FindIn(*plan, "rope_factors_long.weight");
  ASSERT_NE(long_factors, nullptr);
  EXPECT_EQ(long_factors->dims, (std::vector<uint64_t>{16}));
  EXPECT_EQ(long_factors->type, TensorType::kF32);
  EXPECT_GT(long_factors->mean - 2 * std::sqrt(3.0f) * long_factors->stddev, 0.0f);  // positive
  const SynthTensor* short_factors = FindIn(*plan, "rope_factors_short.weight");
  ASSERT_NE(short_factors, nullptr);
  EXPECT_GT(short_factors->mean - 2 * std::sqrt(3.0f) * short_factors->stddev, 0.0f);
}

TEST(SynthPlanTest, Qwen3TinyHasWideHeadsAndQkNorms) {
  absl::StatusOr<SynthPreset> p = FindSynthPreset("qwen3-tiny");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->HeadDim(), 64u);  // n_embd / n_head would be 32
  absl::StatusOr<SynthPlan> plan = PlanSynthModel(*p, TensorType::kF16);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_q.weight")->dims, (std::vector<uint64_t>{256, 512}));
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_k.weight")->dims, (std::vector<uint64_t>{256, 256}));
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_output.weight")->dims, (std::vector<uint64_t>{512, 256}));
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_q_norm.weight")->dims, (std::vector<uint64_t>{64}));
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_k_norm.weight")->dims, (std::vector<uint64_t>{64}));
  EXPECT_EQ(FindIn(*plan, "blk.0.attn_q.bias"), nullptr);
  EXPECT_EQ(FindIn(*plan, "output.weight"), nullptr);  // tied, as Qwen3-0.6B
  absl::StatusOr<SynthPreset> moe = FindSynthPreset("qwen3moe-tiny");
  ASSERT_TRUE(moe.ok());
  absl::StatusOr<SynthPlan> moe_plan = PlanSynthModel(*moe, TensorType::kQ8_0);
  ASSERT_TRUE(moe_plan.ok()) << moe_plan.status();
  EXPECT_EQ(FindIn(*moe_plan, "blk.2.ffn_gate_exps.weight")->dims,
            (std::vector<uint64_t>{256, 128, 16}));
  EXPECT_EQ(FindIn(*moe_plan, "blk.2.ffn_gate_inp_shexp.weight"), nullptr);
}

TEST(SynthPlanTest, MixtralBenchIsAtLeastTwoGigabytesOfQ8_0) {
  absl::StatusOr<SynthPreset> p = FindSynthPreset("mixtral-bench");
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<SynthPlan> plan = PlanSynthModel(*p, TensorType::kQ8_0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GE(plan->data_bytes(), 2000000000u);
  EXPECT_EQ(FindIn(*plan, "blk.7.ffn_down_exps.weight")->dims,
            (std::vector<uint64_t>{5632, 2048, 8}));
}

TEST(SynthVocabularyTest, ExactSizeUniquePiecesAndItTokenizes) {
  for (uint32_t n : {2048u, 32000u, 128256u}) {
    Vocabulary v = SynthVocabulary(n);
    ASSERT_EQ(v.pieces.size(), n);
    EXPECT_EQ(std::set<std::string>(v.pieces.begin(), v.pieces.end()).size(), n);
    EXPECT_EQ(v.pieces[3], "<0x00>");
    EXPECT_EQ(v.pieces[258], "<0xFF>");
    EXPECT_EQ(v.types[258], TokenType::kByte);
    EXPECT_EQ(v.types[1], TokenType::kControl);
    for (size_t i = 260; i < n; ++i) ASSERT_LT(v.scores[i], v.scores[i - 1]) << i;
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(SynthVocabulary(2048));
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string text = "Hello world, it is 42!";
  std::vector<int32_t> ids = (*tok)->Encode(text, /*add_special=*/true, /*parse_special=*/false);
  ASSERT_GT(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);
  // Words are pieces of the vocabulary, not byte fallbacks.
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_GE(ids[i], 259) << i;
  std::vector<int32_t> plain = (*tok)->Encode(text, false, false);
  EXPECT_EQ((*tok)->Decode(plain), text);
  // Non-ASCII text falls back to byte pieces and still round-trips.
  EXPECT_EQ((*tok)->Decode((*tok)->Encode("naïve €", false, false)), "naïve €");
}

class SynthTypeTest : public testing::TestWithParam<std::string> {};

TEST_P(SynthTypeTest, TinyModelLoadsAndGenerates) {
  SynthOptions options;
  options.preset = "tiny";
  options.type = *ParseSynthType(GetParam());
  options.seed = 7;
  options.threads = 2;
  const std::string path = TempPath("tiny_" + GetParam() + ".gguf");
  absl::StatusOr<SynthPlan> plan = PlanSynthModel(*FindSynthPreset("tiny"), options.type);
  ASSERT_TRUE(plan.ok());
  bool writable = true;
  for (const SynthTensor& t : plan->tensors) writable &= IsComputeSupported(t.type);
  absl::Status written = WriteSynthModel(options, path);
  if (!writable) {
    // K-quants before their kernels land: a clear refusal, no file.
    EXPECT_EQ(written.code(), absl::StatusCode::kUnimplemented) << written;
    EXPECT_FALSE(std::ifstream(path).good());
    return;
  }
  ASSERT_TRUE(written.ok()) << written;

  // The file's table is the plan; the metadata is llama.cpp's.
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->alignment(), 32u);
  EXPECT_EQ((*file)->Find("general.alignment"), nullptr);
  EXPECT_EQ(*(*file)->GetString("general.architecture"), "llama");
  EXPECT_EQ(*(*file)->GetUint("general.file_type"), LlamaFileType(options.type));
  EXPECT_EQ(*(*file)->GetUint("general.quantization_version"), 2u);
  EXPECT_EQ(*(*file)->GetString("tokenizer.ggml.model"), "llama");
  ASSERT_EQ((*file)->tensors().size(), plan->tensors.size());
  for (size_t i = 0; i < plan->tensors.size(); ++i) {
    const GgufTensorInfo& t = (*file)->tensors()[i];
    EXPECT_EQ(t.name, plan->tensors[i].name);
    EXPECT_EQ(t.dims, plan->tensors[i].dims);
    EXPECT_EQ(t.type, plan->tensors[i].type);
  }
  // Weights are spread like a trained net's: mean ~0, stddev ~0.02; norms 1.
  const GgufTensorInfo* q = (*file)->FindTensor("blk.1.attn_q.weight");
  std::vector<float> row(256 * 256);
  DequantizeRow(q->type, q->data, row.data(), static_cast<int64_t>(row.size()));
  double sum = 0, sq = 0;
  for (float x : row) sum += x, sq += double{x} * x;
  const double mean = sum / row.size(), sd = std::sqrt(sq / row.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.001);
  EXPECT_NEAR(sd, 0.02, 0.002);
  const float* norm =
      reinterpret_cast<const float*>((*file)->FindTensor("output_norm.weight")->data);
  EXPECT_EQ(norm[0], 1.0f);
  EXPECT_EQ(norm[255], 1.0f);

  ModelOptions mo;
  mo.context_size = 64;
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(path, mo);
  ASSERT_TRUE(model.ok()) << model.status();
  const Model& m = **model;
  EXPECT_EQ(m.config().n_layer, 4u);
  EXPECT_EQ(m.config().n_head_kv, 4u);
  EXPECT_EQ(m.config().n_ctx_train, 512u);
  EXPECT_EQ(m.tokenizer().n_vocab(), 2048);
  ThreadPool pool(2);
  // Logits over a real prompt are finite and not all equal.
  const std::vector<int32_t> prompt = m.tokenizer().Encode("Once upon a time", true, false);
  StageEngine engine(m.config(), m.weights(), &pool);
  KvCache cache = engine.NewCache(64);
  std::vector<float> logits;
  ASSERT_TRUE(
      engine.Forward(cache, StageInput{prompt, {}}, LogitsMode::kLastPosition, &logits).ok());
  ASSERT_EQ(logits.size(), 2048u);
  float lo = logits[0], hi = logits[0];
  for (float x : logits) {
    ASSERT_TRUE(std::isfinite(x));
    lo = std::min(lo, x), hi = std::max(hi, x);
  }
  EXPECT_GT(hi, lo);
  LocalGenerator generator(m, &pool);
  GenerateOptions go;
  go.max_tokens = 6;
  go.ignore_eos = true;
  go.sampling.temperature = 0;
  absl::StatusOr<std::vector<int32_t>> ids = generator.Generate(prompt, go);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->size(), 6u);
  for (int32_t id : *ids) EXPECT_TRUE(m.tokenizer().IsValid(id)) << id;
  ::unlink(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SynthTypeTest,
                         testing::Values("f32", "f16", "q8_0", "q4_0", "q2_k", "q3_k", "q4_k",
                                         "q5_k", "q6_k"));

TEST(SynthDeterminismTest, SameSeedSameBytesOtherSeedOtherBytes) {
  SynthOptions options;
  options.preset = "tiny";
  options.type = TensorType::kQ4_0;
  options.seed = 11;
  options.threads = 1;
  const std::string a = TempPath("a.gguf"), b = TempPath("b.gguf"), c = TempPath("c.gguf");
  ASSERT_TRUE(WriteSynthModel(options, a).ok());
  options.threads = 2;  // the thread count does not change the bytes
  ASSERT_TRUE(WriteSynthModel(options, b).ok());
  options.seed = 12;
  ASSERT_TRUE(WriteSynthModel(options, c).ok());
  const std::string ba = ReadAll(a), bb = ReadAll(b), bc = ReadAll(c);
  EXPECT_GT(ba.size(), 1u << 20);
  EXPECT_TRUE(ba == bb);
  ASSERT_EQ(ba.size(), bc.size());  // same layout...
  EXPECT_FALSE(ba == bc);           // ...other weights
  for (const std::string& p : {a, b, c}) ::unlink(p.c_str());
}

TEST(SynthWriteTest, ProgressReachesTheTotal) {
  SynthOptions options;
  options.type = TensorType::kF16;
  uint64_t last = 0, total = 0;
  int calls = 0;
  const std::string path = TempPath("progress.gguf");
  ASSERT_TRUE(WriteSynthModel(options, path, [&](uint64_t done, uint64_t all) {
                EXPECT_GE(done, last);
                last = done, total = all, ++calls;
              }).ok());
  EXPECT_GT(calls, 1);
  EXPECT_EQ(last, total);
  EXPECT_EQ(total, PlanSynthModel(*FindSynthPreset("tiny"), TensorType::kF16)->data_bytes());
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace ringlm
