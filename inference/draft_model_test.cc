#include "inference/draft_model.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "inference/generator.h"

namespace ringlm {
namespace {

std::string SharedModel(const std::string& file) {
  return std::string(RINGLM_SHARED_DIR) + "/models/" + file;
}

class DraftModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Model>> m = Model::Load(SharedModel("stories260K-f32.gguf"), {});
    ASSERT_TRUE(m.ok()) << m.status();
    target_ = *std::move(m);
  }

  // The target's own greedy continuation of `prompt`.
  std::vector<int32_t> Greedy(const std::vector<int32_t>& prompt, int n) {
    LocalGenerator generator(*target_, &pool_);
    GenerateOptions options;
    options.max_tokens = n;
    options.ignore_eos = true;
    options.sampling.temperature = 0;
    absl::StatusOr<std::vector<int32_t>> ids = generator.Generate(prompt, options);
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? *ids : std::vector<int32_t>{};
  }

  ThreadPool pool_{1};
  std::unique_ptr<Model> target_;
};

// The target as its own draft model guesses exactly its greedy tokens, from
// a fresh cache and from one that held an older, partly different history.
TEST_F(DraftModelTest, GuessesTheGreedyContinuationAndReusesWhatItHolds) {
  absl::StatusOr<std::unique_ptr<DraftModel>> draft =
      DraftModel::Load(SharedModel("stories260K-q8_0.gguf"), target_->tokenizer(), 256, &pool_);
  ASSERT_TRUE(draft.ok()) << draft.status();
  absl::StatusOr<std::unique_ptr<DraftModel>> same =
      DraftModel::Load(SharedModel("stories260K-f32.gguf"), target_->tokenizer(), 256, &pool_);
  ASSERT_TRUE(same.ok()) << same.status();
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  const std::vector<int32_t> reply = Greedy(prompt, 24);
  absl::StatusOr<std::vector<int32_t>> guess = (*same)->Draft("r", prompt, 8);
  ASSERT_TRUE(guess.ok()) << guess.status();
  EXPECT_EQ(*guess, std::vector<int32_t>(reply.begin(), reply.begin() + 8));
  // The history moves on by 5 of those tokens and one other: the cache
  // keeps the common prefix and the guesses follow the new history.
  std::vector<int32_t> history = prompt;
  history.insert(history.end(), reply.begin(), reply.begin() + 10);
  guess = (*same)->Draft("r", history, 4);
  ASSERT_TRUE(guess.ok()) << guess.status();
  EXPECT_EQ(*guess, std::vector<int32_t>(reply.begin() + 10, reply.begin() + 14));
  EXPECT_EQ((*same)->sessions(), 1u);
  // A quantized copy drafts too (not necessarily the same guesses).
  guess = (*draft)->Draft("r", prompt, 8);
  ASSERT_TRUE(guess.ok()) << guess.status();
  EXPECT_EQ(guess->size(), 8u);
}

TEST_F(DraftModelTest, KeepsAtMostItsSessions) {
  absl::StatusOr<std::unique_ptr<DraftModel>> draft =
      DraftModel::Load(SharedModel("stories260K-f32.gguf"), target_->tokenizer(), 128, &pool_, 2);
  ASSERT_TRUE(draft.ok()) << draft.status();
  for (const char* key : {"a", "b", "c"}) {
    ASSERT_TRUE((*draft)->Draft(key, std::vector<int32_t>{1, 403}, 2).ok());
  }
  EXPECT_EQ((*draft)->sessions(), 2u);
  (*draft)->Forget("c");
  EXPECT_EQ((*draft)->sessions(), 1u);
}

TEST_F(DraftModelTest, AnotherVocabularyIsRefused) {
  Vocabulary other = target_->tokenizer().vocabulary();
  other.pieces[300] = "something else";
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Create(other);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  absl::Status s = CheckSameVocabulary(target_->tokenizer(), **tokenizer);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("token 300"), std::string::npos) << s;
  EXPECT_TRUE(CheckSameVocabulary(target_->tokenizer(), target_->tokenizer()).ok());
  // Loading a draft model checks it against the target's.
  absl::StatusOr<std::unique_ptr<DraftModel>> draft =
      DraftModel::Load(SharedModel("stories260K-f32.gguf"), **tokenizer, 128, &pool_);
  EXPECT_EQ(draft.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringlm
