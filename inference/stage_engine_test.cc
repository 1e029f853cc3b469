// Properties of the forward pass on the bundled model: split stages equal the
// whole model, incremental prefill equals one prefill, truncate and fork
// leave exactly the positions they promise.
#include "inference/stage_engine.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "inference/model.h"

namespace ringlm {
namespace {

const std::string kModelDir = std::string(RINGLM_SHARED_DIR) + "/models/";

std::unique_ptr<Model> LoadModel(const std::string& file, std::optional<LayerRange> layers) {
  ModelOptions options;
  options.layers = layers;
  options.context_size = 256;
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Load(kModelDir + file, options);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * std::max(1.0f, std::fabs(b[i]))) << "at index " << i;
  }
}

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376};

class StageEngineTest : public testing::TestWithParam<std::string> {};

TEST_P(StageEngineTest, EverySplitPointMatchesTheWholeModel) {
  ThreadPool pool(2);
  std::unique_ptr<Model> whole = LoadModel(GetParam(), std::nullopt);
  ASSERT_NE(whole, nullptr);
  StageEngine engine(whole->config(), whole->weights(), &pool);
  KvCache cache = engine.NewCache(256);
  std::vector<float> expected;
  ASSERT_TRUE(engine.Forward(cache, {kPrompt, {}}, LogitsMode::kAllPositions, &expected).ok());

  const uint32_t n_layer = whole->config().n_layer;
  for (uint32_t k = 1; k < n_layer; ++k) {
    SCOPED_TRACE("split at layer " + std::to_string(k));
    std::unique_ptr<Model> head = LoadModel(GetParam(), LayerRange{0, k});
    std::unique_ptr<Model> tail = LoadModel(GetParam(), LayerRange{k, n_layer});
    ASSERT_NE(head, nullptr);
    ASSERT_NE(tail, nullptr);
    EXPECT_FALSE(head->weights().is_last());
    EXPECT_FALSE(tail->weights().is_first());
    StageEngine first(head->config(), head->weights(), &pool);
    StageEngine second(tail->config(), tail->weights(), &pool);
    KvCache c1 = first.NewCache(256);
    KvCache c2 = second.NewCache(256);
    std::vector<float> hidden, logits;
    ASSERT_TRUE(first.Forward(c1, {kPrompt, {}}, LogitsMode::kAllPositions, &hidden).ok());
    ASSERT_EQ(hidden.size(), kPrompt.size() * whole->config().n_embd);
    ASSERT_TRUE(second.Forward(c2, {kPrompt, hidden}, LogitsMode::kAllPositions, &logits).ok());
    ExpectClose(logits, expected, 1e-5f);
  }
}

TEST_P(StageEngineTest, PrefillThenAppendEqualsOnePrefill) {
  ThreadPool pool(2);
  std::unique_ptr<Model> m = LoadModel(GetParam(), std::nullopt);
  ASSERT_NE(m, nullptr);
  StageEngine engine(m->config(), m->weights(), &pool);
  KvCache whole = engine.NewCache(256);
  std::vector<float> all;
  ASSERT_TRUE(engine.Forward(whole, {kPrompt, {}}, LogitsMode::kAllPositions, &all).ok());

  const size_t split = 6;
  const std::vector<int32_t> a(kPrompt.begin(), kPrompt.begin() + split);
  const std::vector<int32_t> b(kPrompt.begin() + split, kPrompt.end());
  KvCache cache = engine.NewCache(256);
  std::vector<float> out_a, out_b;
  ASSERT_TRUE(engine.Forward(cache, {a, {}}, LogitsMode::kAllPositions, &out_a).ok());
  ASSERT_TRUE(engine.Forward(cache, {b, {}}, LogitsMode::kAllPositions, &out_b).ok());
  const size_t vocab = m->config().n_vocab;
  std::vector<float> expected_b(all.begin() + split * vocab, all.end());
  ExpectClose(out_b, expected_b, 1e-5f);
  EXPECT_EQ(cache.tokens(), kPrompt);
}

TEST_P(StageEngineTest, TruncateThenAppendEqualsAFreshRun) {
  ThreadPool pool(1);
  std::unique_ptr<Model> m = LoadModel(GetParam(), std::nullopt);
  ASSERT_NE(m, nullptr);
  StageEngine engine(m->config(), m->weights(), &pool);
  const std::vector<int32_t> other = {1, 403, 407, 261, 299, 300, 301};
  KvCache cache = engine.NewCache(256);
  std::vector<float> logits, fresh_logits;
  ASSERT_TRUE(engine.Forward(cache, {kPrompt, {}}, LogitsMode::kLastPosition, &logits).ok());
  cache.Truncate(4);  // keeps <s> Once upon a
  EXPECT_EQ(cache.n_positions(), 4u);
  const std::vector<int32_t> rest(other.begin() + 4, other.end());
  ASSERT_TRUE(engine.Forward(cache, {rest, {}}, LogitsMode::kLastPosition, &logits).ok());

  KvCache fresh = engine.NewCache(256);
  ASSERT_TRUE(engine.Forward(fresh, {other, {}}, LogitsMode::kLastPosition, &fresh_logits).ok());
  ExpectClose(logits, fresh_logits, 1e-5f);
  EXPECT_EQ(cache.tokens(), other);
}

TEST_P(StageEngineTest, ForkLeavesTheOriginalUntouched) {
  ThreadPool pool(2);
  std::unique_ptr<Model> m = LoadModel(GetParam(), std::nullopt);
  ASSERT_NE(m, nullptr);
  StageEngine engine(m->config(), m->weights(), &pool);
  KvCache original = engine.NewCache(256);
  std::vector<float> logits;
  ASSERT_TRUE(engine.Forward(original, {kPrompt, {}}, LogitsMode::kLastPosition, &logits).ok());

  KvCache fork = original.Fork(5);
  EXPECT_EQ(fork.n_positions(), 5u);
  const std::vector<int32_t> branch = {299, 300, 301, 302};
  ASSERT_TRUE(engine.Forward(fork, {branch, {}}, LogitsMode::kLastPosition, &logits).ok());
  EXPECT_EQ(original.n_positions(), kPrompt.size());
  EXPECT_EQ(original.tokens(), kPrompt);

  // The original continues exactly as an untouched cache would.
  KvCache control = engine.NewCache(256);
  std::vector<float> control_logits, original_logits;
  ASSERT_TRUE(engine.Forward(control, {kPrompt, {}}, LogitsMode::kLastPosition, &logits).ok());
  const std::vector<int32_t> next = {432};
  ASSERT_TRUE(engine.Forward(control, {next, {}}, LogitsMode::kLastPosition, &control_logits).ok());
  ASSERT_TRUE(
      engine.Forward(original, {next, {}}, LogitsMode::kLastPosition, &original_logits).ok());
  EXPECT_EQ(original_logits, control_logits);
}

TEST_P(StageEngineTest, RejectsBadInputAndLeavesTheCacheUnchanged) {
  std::unique_ptr<Model> m = LoadModel(GetParam(), std::nullopt);
  ASSERT_NE(m, nullptr);
  std::unique_ptr<Model> tail = LoadModel(GetParam(), LayerRange{2, m->config().n_layer});
  ASSERT_NE(tail, nullptr);
  StageEngine engine(m->config(), m->weights(), nullptr);
  StageEngine tail_engine(tail->config(), tail->weights(), nullptr);
  KvCache cache = engine.NewCache(8);
  std::vector<float> out;
  const std::vector<int32_t> bad_id = {1, 512};
  EXPECT_EQ(engine.Forward(cache, {bad_id, {}}, LogitsMode::kLastPosition, &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.Forward(cache, {{}, {}}, LogitsMode::kLastPosition, &out).code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<int32_t> too_long(9, 5);
  EXPECT_EQ(engine.Forward(cache, {too_long, {}}, LogitsMode::kLastPosition, &out).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cache.n_positions(), 0u);

  KvCache tail_cache = tail_engine.NewCache(8);
  const std::vector<int32_t> two = {1, 5};
  const std::vector<float> wrong_shape(3, 0.0f);
  EXPECT_EQ(
      tail_engine.Forward(tail_cache, {two, wrong_shape}, LogitsMode::kLastPosition, &out).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tail_engine.Forward(tail_cache, {two, {}}, LogitsMode::kLastPosition, &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tail_cache.n_positions(), 0u);
}

// Batching across sessions changes nothing: each session's output and KV
// are bit-identical to its solo run, on a first stage (hidden states out)
// and a last stage (logits), for prefill chunks and decode steps mixed.
TEST_P(StageEngineTest, BatchedSessionsAreBitIdenticalToSoloRuns) {
  ThreadPool pool(2);
  const uint32_t n_layer = LoadModel(GetParam(), std::nullopt)->config().n_layer;
  std::unique_ptr<Model> head = LoadModel(GetParam(), LayerRange{0, 2});
  std::unique_ptr<Model> tail = LoadModel(GetParam(), LayerRange{2, n_layer});
  ASSERT_NE(head, nullptr);
  ASSERT_NE(tail, nullptr);
  StageEngine first(head->config(), head->weights(), &pool);
  StageEngine last(tail->config(), tail->weights(), &pool);
  // Per session: tokens already in its cache, then the new ones.
  const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> sessions = {
      {{}, kPrompt},                                // a fresh prefill
      {{1, 403, 407}, {261}},                       // a decode step
      {kPrompt, {300, 270}},                        // a short chunk after a long past
      {{1}, {403, 407, 261, 378, 432, 383, 286}}};  // a chunk after one token
  for (LogitsMode mode : {LogitsMode::kLastPosition, LogitsMode::kAllPositions}) {
    std::vector<KvCache> solo1, solo2, batch1, batch2;
    std::vector<std::vector<float>> solo_hidden(sessions.size()), solo_out(sessions.size());
    std::vector<std::vector<float>> batch_hidden(sessions.size()), batch_out(sessions.size());
    std::vector<StageBatchItem> items1, items2;
    for (size_t i = 0; i < sessions.size(); ++i) {
      const auto& [past, fresh] = sessions[i];
      for (auto* caches : {&solo1, &batch1}) caches->push_back(first.NewCache(256));
      for (auto* caches : {&solo2, &batch2}) caches->push_back(last.NewCache(256));
      if (!past.empty()) {
        std::vector<float> h, l;
        for (KvCache* c1 : {&solo1[i], &batch1[i]}) {
          ASSERT_TRUE(first.Forward(*c1, {past, {}}, LogitsMode::kLastPosition, &h).ok());
        }
        for (KvCache* c2 : {&solo2[i], &batch2[i]}) {
          ASSERT_TRUE(last.Forward(*c2, {past, h}, LogitsMode::kLastPosition, &l).ok());
        }
      }
      ASSERT_TRUE(first.Forward(solo1[i], {fresh, {}}, mode, &solo_hidden[i]).ok());
      ASSERT_TRUE(last.Forward(solo2[i], {fresh, solo_hidden[i]}, mode, &solo_out[i]).ok());
    }
    for (size_t i = 0; i < sessions.size(); ++i) {
      items1.push_back({&batch1[i], {sessions[i].second, {}}, &batch_hidden[i]});
    }
    ASSERT_TRUE(first.ForwardBatch(items1, mode).ok());
    for (size_t i = 0; i < sessions.size(); ++i) {
      items2.push_back({&batch2[i], {sessions[i].second, batch_hidden[i]}, &batch_out[i]});
    }
    ASSERT_TRUE(last.ForwardBatch(items2, mode).ok());
    for (size_t i = 0; i < sessions.size(); ++i) {
      SCOPED_TRACE("session " + std::to_string(i));
      EXPECT_EQ(batch_hidden[i], solo_hidden[i]);  // bit for bit
      EXPECT_EQ(batch_out[i], solo_out[i]);
      EXPECT_EQ(batch2[i].tokens(), solo2[i].tokens());
      const uint32_t n = solo2[i].n_positions();
      for (uint32_t l = 0; l < solo2[i].n_layers(); ++l) {
        const size_t count = size_t{n} * head->config().n_embd_kv();
        EXPECT_TRUE(
            std::equal(solo2[i].key(l, 0), solo2[i].key(l, 0) + count, batch2[i].key(l, 0)));
        EXPECT_TRUE(
            std::equal(solo2[i].value(l, 0), solo2[i].value(l, 0) + count, batch2[i].value(l, 0)));
      }
    }
  }
}

TEST_P(StageEngineTest, ABatchWithABadItemChangesNoCache) {
  ThreadPool pool(1);
  std::unique_ptr<Model> m = LoadModel(GetParam(), std::nullopt);
  StageEngine engine(m->config(), m->weights(), &pool);
  KvCache a = engine.NewCache(256);
  KvCache b = engine.NewCache(256);
  std::vector<float> out_a, out_b;
  const std::vector<int32_t> bad = {1, -5};
  std::vector<StageBatchItem> items = {{&a, {kPrompt, {}}, &out_a}, {&b, {bad, {}}, &out_b}};
  EXPECT_EQ(engine.ForwardBatch(items, LogitsMode::kLastPosition).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.n_positions(), 0u);
  items[1] = {&a, {kPrompt, {}}, &out_b};  // the same session twice
  EXPECT_EQ(engine.ForwardBatch(items, LogitsMode::kLastPosition).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.n_positions(), 0u);
}

INSTANTIATE_TEST_SUITE_P(BundledModels, StageEngineTest,
                         testing::Values("stories260K-f32.gguf", "stories260K-q8_0.gguf"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param.find("q8_0") != std::string::npos ? "Q8_0" : "F32";
                         });

}  // namespace
}  // namespace ringlm
