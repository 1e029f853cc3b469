#include "inference/kv_cache.h"

#include "gtest/gtest.h"

namespace ringlm {
namespace {

TEST(KvCacheTest, ReserveAllocatesBlocksUpToTheContextSize) {
  KvCache cache(2, 8, 100);
  EXPECT_EQ(cache.bytes_per_token(), 2u * 8 * 2 * 2);
  ASSERT_TRUE(cache.Reserve(70).ok());
  EXPECT_EQ(cache.n_blocks(), 5u);  // 70 positions in blocks of 16
  EXPECT_EQ(cache.allocated_bytes(), 80 * cache.bytes_per_token());
  EXPECT_EQ(cache.ledger()->bytes(), cache.allocated_bytes());
  std::vector<int32_t> tokens(70, 7);
  cache.Commit(tokens.data(), 70);
  EXPECT_EQ(cache.n_positions(), 70u);
  EXPECT_EQ(cache.Reserve(31).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(cache.Reserve(30).ok());
  EXPECT_EQ(cache.n_blocks(), 7u);
}

// Fills positions [held, held + n) with key = pos + 1000 * layer + 1 and
// value = its negation's bits, and commits token ids pos.
void Write(KvCache& cache, uint32_t n) {
  ASSERT_TRUE(cache.Reserve(n).ok());
  std::vector<int32_t> tokens;
  for (uint32_t pos = cache.n_positions(); tokens.size() < n; ++pos) {
    for (uint32_t l = 0; l < cache.n_layers(); ++l) {
      for (int i = 0; i < 2; ++i) {
        cache.key(l, pos)[i] = static_cast<uint16_t>(pos + 1000 * l + 1);
        cache.value(l, pos)[i] = static_cast<uint16_t>(~(pos + 1000 * l + 1));
      }
    }
    tokens.push_back(static_cast<int32_t>(pos));
  }
  cache.Commit(tokens.data(), n);
}

void ExpectWritten(const KvCache& cache, uint32_t first, uint32_t end) {
  for (uint32_t pos = first; pos < end; ++pos) {
    for (uint32_t l = 0; l < cache.n_layers(); ++l) {
      ASSERT_EQ(cache.key(l, pos)[1], static_cast<uint16_t>(pos + 1000 * l + 1)) << pos;
      ASSERT_EQ(cache.value(l, pos)[1], static_cast<uint16_t>(~(pos + 1000 * l + 1))) << pos;
    }
  }
}

TEST(KvCacheTest, RowsOfABlockAreContiguous) {
  KvCache cache(2, 4, 64);
  Write(cache, 40);
  EXPECT_EQ(cache.key(1, 17), cache.key(1, 16) + 4);
  EXPECT_EQ(cache.value(0, 31), cache.value(0, 16) + 15 * 4);
  EXPECT_EQ(KvCache::RunLength(0, 40), 16u);
  EXPECT_EQ(KvCache::RunLength(17, 40), 15u);
  EXPECT_EQ(KvCache::RunLength(32, 40), 8u);
  ExpectWritten(cache, 0, 40);
}

TEST(KvCacheTest, ForkSharesWholeBlocksAndCopiesOnlyAPartialOne) {
  KvCache cache(2, 2, 256);
  Write(cache, 40);  // blocks 0, 1 whole; 2 partial
  EXPECT_EQ(cache.ledger()->blocks(), 3u);
  KvCache fork = cache.Fork(35);
  EXPECT_EQ(fork.n_positions(), 35u);
  EXPECT_EQ(fork.tokens(),
            std::vector<int32_t>(cache.tokens().begin(), cache.tokens().begin() + 35));
  EXPECT_EQ(fork.ledger(), cache.ledger());
  EXPECT_EQ(cache.ledger()->blocks(), 4u);  // one copied block
  EXPECT_EQ(fork.block_id(0), cache.block_id(0));
  EXPECT_EQ(fork.block_id(1), cache.block_id(1));
  EXPECT_NE(fork.block_id(2), cache.block_id(2));
  EXPECT_TRUE(cache.block_shared(1));
  EXPECT_FALSE(cache.block_shared(2));
  ExpectWritten(fork, 0, 35);
  KvCache at_boundary = cache.Fork(32);
  EXPECT_EQ(cache.ledger()->blocks(), 4u);  // nothing copied
  EXPECT_EQ(at_boundary.n_blocks(), 2u);
}

TEST(KvCacheTest, TheMarkOfRoundedInputsGoesWithForksUntilTheCacheIsEmpty) {
  KvCache cache(2, 2, 256);
  Write(cache, 20);
  EXPECT_FALSE(cache.rounded_inputs());
  EXPECT_FALSE(cache.Fork(10).rounded_inputs());
  cache.MarkRoundedInputs();
  EXPECT_TRUE(cache.Fork(10).rounded_inputs());
  EXPECT_FALSE(cache.Fork(0).rounded_inputs());
  cache.Truncate(5);
  EXPECT_TRUE(cache.rounded_inputs());
  cache.Truncate(0);
  EXPECT_FALSE(cache.rounded_inputs());
}

TEST(KvCacheTest, WritingIntoASharedBlockCopiesItFirst) {
  KvCache cache(1, 2, 256);
  Write(cache, 20);
  KvCache fork = cache.Fork(16);
  fork.Truncate(10);  // back inside the shared block 0
  ASSERT_TRUE(fork.Reserve(1).ok());
  EXPECT_NE(fork.block_id(0), cache.block_id(0));
  fork.key(0, 10)[1] = 7;
  EXPECT_EQ(cache.key(0, 10)[1], 11);  // the original is untouched
  ExpectWritten(fork, 0, 10);          // and the copy kept the rows below
  EXPECT_FALSE(cache.block_shared(0));
}

TEST(KvCacheTest, BlocksAreFreedWithTheirLastReference) {
  auto ledger = std::make_shared<KvBlockLedger>();
  {
    KvCache cache(1, 2, 256, 0, ledger);
    Write(cache, 48);
    KvCache fork = cache.Fork(48);
    EXPECT_EQ(ledger->blocks(), 3u);
    cache.Truncate(17);  // keeps blocks 0 and 1, which the fork also holds
    EXPECT_EQ(ledger->blocks(), 3u);
    fork.Truncate(0);
    EXPECT_EQ(ledger->blocks(), 2u);
    EXPECT_EQ(ledger->bytes(), 2 * cache.bytes_per_block());
  }
  EXPECT_EQ(ledger->blocks(), 0u);
  EXPECT_EQ(ledger->bytes(), 0u);
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

// DeepSeek's MLA: keys wider than values. Every row keeps its own width,
// rows of one block stay contiguous per kind, and a fork copies a partial
// block's keys and values whole.
TEST(KvCacheTest, KeysAndValuesOfTheirOwnWidths) {
  KvCache cache(2, KvWidths{12, 8}, 64);
  EXPECT_EQ(cache.bytes_per_token(), 2u * (12 + 8) * 2);
  ASSERT_TRUE(cache.Reserve(20).ok());
  EXPECT_EQ(cache.key(1, 5), cache.key(1, 4) + 12);
  EXPECT_EQ(cache.value(1, 5), cache.value(1, 4) + 8);
  EXPECT_EQ(cache.value(0, 0), cache.key(0, 0) + 16 * 12);  // values after the block's keys
  EXPECT_EQ(cache.key(1, 0), cache.value(0, 0) + 16 * 8);   // then the next layer
  std::vector<int32_t> tokens;
  for (uint32_t pos = 0; pos < 20; ++pos) {
    for (uint32_t l = 0; l < 2; ++l) {
      for (int i = 0; i < 12; ++i) cache.key(l, pos)[i] = static_cast<uint16_t>(pos * 100 + i);
      for (int i = 0; i < 8; ++i) cache.value(l, pos)[i] = static_cast<uint16_t>(~(pos * 100 + i));
    }
    tokens.push_back(static_cast<int32_t>(pos));
  }
  cache.Commit(tokens.data(), 20);
  const KvCache fork = cache.Fork(19);
  EXPECT_EQ(fork.widths().key, 12u);
  EXPECT_EQ(fork.widths().value, 8u);
  for (uint32_t pos = 0; pos < 19; ++pos) {
    for (uint32_t l = 0; l < 2; ++l) {
      for (int i = 0; i < 12; ++i) ASSERT_EQ(fork.key(l, pos)[i], pos * 100 + i) << pos;
      for (int i = 0; i < 8; ++i) {
        ASSERT_EQ(fork.value(l, pos)[i], static_cast<uint16_t>(~(pos * 100 + i))) << pos;
      }
    }
  }
}

}  // namespace
}  // namespace ringlm
