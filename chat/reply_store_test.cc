#include "chat/reply_store.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/tokenizer/llama2c_vocab_for_test.h"

namespace ringlm {
namespace {

using ::testing::ElementsAreArray;
using ::testing::Optional;

class ExactReplyIdsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = testing::Tok512Tokenizer();
    ASSERT_NE(tokenizer_, nullptr);
  }
  static inline const Tokenizer* tokenizer_ = nullptr;
};

TEST_F(ExactReplyIdsTest, TheIdsBeforeTheEndOfGenerationSpellTheContent) {
  // The dummy-prefix space makes the ids spell " Once ...", as a reply to
  // "Assistant:" does.
  std::vector<int32_t> ids = tokenizer_->Encode("Once upon a time.", false, false);
  ASSERT_GT(ids.size(), 2u);
  std::vector<int32_t> sampled = ids;
  sampled.push_back(tokenizer_->eos_id());
  EXPECT_THAT(ExactReplyIds(*tokenizer_, sampled, " Once upon a time."),
              Optional(ElementsAreArray(ids)));
  // Cut at a token boundary (a stop string, say): the ids before the cut.
  std::string first_two = tokenizer_->TokenToPiece(ids[0]) + tokenizer_->TokenToPiece(ids[1]);
  EXPECT_THAT(ExactReplyIds(*tokenizer_, sampled, first_two),
              Optional(ElementsAreArray(ids.begin(), ids.begin() + 2)));
}

TEST_F(ExactReplyIdsTest, TextThatNoPrefixSpellsIsNotRecorded) {
  const std::vector<int32_t> ids = tokenizer_->Encode("Once upon a time.", false, false);
  // Cut inside a token, changed, trimmed, longer than the reply, empty.
  EXPECT_EQ(ExactReplyIds(*tokenizer_, ids, " Onc"), std::nullopt);
  EXPECT_EQ(ExactReplyIds(*tokenizer_, ids, " Once upon a dime."), std::nullopt);
  EXPECT_EQ(ExactReplyIds(*tokenizer_, ids, "Once upon a time."), std::nullopt);
  EXPECT_EQ(ExactReplyIds(*tokenizer_, ids, " Once upon a time. The end"), std::nullopt);
  EXPECT_EQ(ExactReplyIds(*tokenizer_, ids, ""), std::nullopt);
  // A control token (empty piece) inside would be an id the text does not show.
  std::vector<int32_t> hidden = {ids[0], tokenizer_->bos_id()};
  hidden.insert(hidden.end(), ids.begin() + 1, ids.end());
  EXPECT_EQ(ExactReplyIds(*tokenizer_, hidden, " Once upon a time."), std::nullopt);
}

TEST(ReplyStoreTest, FindsWhatWasRecordedAndReplacesOnReRecord) {
  ReplyStore store;
  EXPECT_EQ(store.Find("a"), std::nullopt);
  store.Record("a", {1, 2});
  EXPECT_THAT(store.Find("a"), Optional(ElementsAreArray({1, 2})));
  store.Record("a", {3});
  EXPECT_THAT(store.Find("a"), Optional(ElementsAreArray({3})));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.bytes(), 1u + sizeof(int32_t));
  // Empty entries are not kept.
  store.Record("", {1});
  store.Record("b", {});
  EXPECT_EQ(store.size(), 1u);
}

TEST(ReplyStoreTest, EntryBoundEvictsTheLeastRecentlyUsed) {
  ReplyStore store(ReplyStoreOptions{.max_entries = 2, .max_bytes = 1 << 20});
  store.Record("a", {1});
  store.Record("b", {2});
  ASSERT_NE(store.Find("a"), std::nullopt);  // "b" is now the least recently used
  store.Record("c", {3});
  EXPECT_EQ(store.size(), 2u);
  EXPECT_NE(store.Find("a"), std::nullopt);
  EXPECT_EQ(store.Find("b"), std::nullopt);
  EXPECT_NE(store.Find("c"), std::nullopt);
}

TEST(ReplyStoreTest, ByteBoundEvictsTheLeastRecentlyUsedAndRefusesWhatCannotFit) {
  // Each entry: 4 content bytes + 2 ids = 12 bytes; three fit in 36.
  ReplyStore store(ReplyStoreOptions{.max_entries = 100, .max_bytes = 36});
  store.Record("aaaa", {1, 1});
  store.Record("bbbb", {2, 2});
  store.Record("cccc", {3, 3});
  EXPECT_EQ(store.bytes(), 36u);
  ASSERT_NE(store.Find("aaaa"), std::nullopt);
  store.Record("dddd", {4, 4});
  EXPECT_EQ(store.bytes(), 36u);
  EXPECT_EQ(store.Find("bbbb"), std::nullopt);
  EXPECT_NE(store.Find("aaaa"), std::nullopt);
  // Larger than the whole bound: not kept, and nothing evicted for it.
  store.Record(std::string(40, 'x'), {1});
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.Find(std::string(40, 'x')), std::nullopt);
  // A larger replacement evicts others to fit.
  store.Record("aaaa", {1, 1, 1, 1, 1});  // 24 bytes
  EXPECT_LE(store.bytes(), 36u);
  EXPECT_THAT(store.Find("aaaa"), Optional(ElementsAreArray({1, 1, 1, 1, 1})));
  EXPECT_EQ(store.size(), 1u + (store.bytes() - 24u) / 12u);
}

}  // namespace
}  // namespace ringlm
