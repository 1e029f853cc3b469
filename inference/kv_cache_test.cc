#include "inference/kv_cache.h"

#include "gtest/gtest.h"

namespace ringlm {
namespace {

TEST(KvCacheTest, ReserveGrowsUpToTheContextSize) {
  KvCache cache(2, 8, 100);
  EXPECT_EQ(cache.bytes_per_token(), 2u * 8 * 2 * 2);
  ASSERT_TRUE(cache.Reserve(70).ok());
  EXPECT_GE(cache.allocated_bytes(), 70 * cache.bytes_per_token());
  EXPECT_LE(cache.allocated_bytes(), 100 * cache.bytes_per_token());
  std::vector<int32_t> tokens(70, 7);
  cache.Commit(tokens.data(), 70);
  EXPECT_EQ(cache.n_positions(), 70u);
  EXPECT_EQ(cache.Reserve(31).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(cache.Reserve(30).ok());
}

TEST(KvCacheTest, CloneCopiesOnlyThePrefix) {
  KvCache cache(1, 2, 16);
  ASSERT_TRUE(cache.Reserve(3).ok());
  for (uint32_t pos = 0; pos < 3; ++pos) {
    cache.key(0, pos)[0] = static_cast<uint16_t>(pos + 10);
    cache.value(0, pos)[1] = static_cast<uint16_t>(pos + 20);
  }
  const int32_t tokens[] = {4, 5, 6};
  cache.Commit(tokens, 3);
  KvCache copy = cache.Clone(2);
  EXPECT_EQ(copy.n_positions(), 2u);
  EXPECT_EQ(copy.tokens(), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(copy.key(0, 1)[0], 11);
  EXPECT_EQ(copy.value(0, 1)[1], 21);
  copy.key(0, 0)[0] = 99;
  EXPECT_EQ(cache.key(0, 0)[0], 10);
}

TEST(KvCacheTest, TruncateForgetsLaterPositions) {
  KvCache cache(1, 2, 16);
  ASSERT_TRUE(cache.Reserve(3).ok());
  const int32_t tokens[] = {4, 5, 6};
  cache.Commit(tokens, 3);
  cache.Truncate(1);
  EXPECT_EQ(cache.tokens(), (std::vector<int32_t>{4}));
  cache.Truncate(5);  // longer than held: no change
  EXPECT_EQ(cache.n_positions(), 1u);
}

}  // namespace
}  // namespace ringlm
