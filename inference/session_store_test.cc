#include "inference/session_store.h"

#include "gtest/gtest.h"
#include "inference/token_digest.h"

namespace ringlm {
namespace {

using std::chrono::seconds;

struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  SessionStore::Clock fn() {
    return [this] { return now; };
  }
};

// One layer of 8 f16 K and V values: 32 bytes per position, 512 per block of
// 16 positions.
KvCache Make() { return KvCache(1, 8, 1024); }

// The digest of n tokens as Fill writes them.
std::string Digest(uint32_t n) { return TokenDigest(std::vector<int32_t>(n, 3)); }

void Fill(SessionStore::Lease& lease, uint32_t n) {
  ASSERT_TRUE(lease.cache().Reserve(n).ok());
  std::vector<int32_t> tokens(n, 3);
  lease.cache().Commit(tokens.data(), n);
}

TEST(SessionStoreTest, LeasesAreExclusive) {
  SessionStore store({});
  auto a = store.Acquire("a", Make);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(store.Acquire("a", Make).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.Drop("a").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.Fork("a", "b", 0, Digest(0)).code(), absl::StatusCode::kUnavailable);
}

TEST(SessionStoreTest, SessionsSurviveBetweenLeases) {
  SessionStore store({});
  {
    auto a = store.Acquire("a", Make);
    ASSERT_TRUE(a.ok());
    Fill(*a, 5);
  }
  auto again = store.AcquireExisting("a");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cache().n_positions(), 5u);
  EXPECT_EQ(store.AcquireExisting("zz").status().code(), absl::StatusCode::kNotFound);
}

TEST(SessionStoreTest, EvictsLeastRecentlyUsedIdleSessionsOverBudget) {
  FakeClock clock;
  SessionStoreOptions options;
  options.budget_bytes = 5000;  // two 2 KiB sessions fit, three do not
  SessionStore store(options, clock.fn());
  for (const char* id : {"a", "b", "c"}) {
    clock.now += seconds(1);
    auto lease = store.Acquire(id, Make);
    ASSERT_TRUE(lease.ok());
    Fill(*lease, 64);
  }
  SessionStoreStats stats = store.Stats();
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_LE(stats.used_bytes, options.budget_bytes);
  EXPECT_EQ(store.AcquireExisting("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store.AcquireExisting("b").ok());
}

// Forks of one prefix share its blocks: the budget counts them once, and the
// stats tell the blocks alive from the bytes the sessions would take apart.
TEST(SessionStoreTest, ForksShareThePrefixAndTheBudgetCountsItOnce) {
  FakeClock clock;
  SessionStoreOptions options;
  options.budget_bytes = 8 * 512;
  SessionStore store(options, clock.fn());
  {
    auto a = store.Acquire("a", Make);
    ASSERT_TRUE(a.ok());
    Fill(*a, 64);  // 4 blocks
  }
  for (const char* id : {"b", "c", "d"}) {
    clock.now += seconds(1);
    ASSERT_TRUE(store.Fork("a", id, 56, Digest(56)).ok());  // 3 shared + 1 copied
  }
  SessionStoreStats stats = store.Stats();
  EXPECT_EQ(stats.blocks, 7u);
  EXPECT_EQ(stats.used_bytes, 7u * 512);
  EXPECT_EQ(stats.logical_bytes, 16u * 512);
  EXPECT_EQ(stats.shared_blocks, 3u);
  EXPECT_EQ(stats.evictions, 0u);
  // Two more forks pass the budget: the least recently used idle sessions
  // go, but the prefix blocks stay while a fork still refers to them.
  for (const char* id : {"e", "f"}) {
    clock.now += seconds(1);
    ASSERT_TRUE(store.Fork("d", id, 56, Digest(56)).ok());
  }
  stats = store.Stats();
  EXPECT_LE(stats.used_bytes, options.budget_bytes);
  EXPECT_EQ(stats.evictions, 1u);  // "a": it freed its last block
  EXPECT_EQ(stats.evicted_blocks, 1u);
  EXPECT_EQ(store.AcquireExisting("a").status().code(), absl::StatusCode::kNotFound);
  auto f = store.AcquireExisting("f");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->cache().tokens(), std::vector<int32_t>(56, 3));
}

// A lease that swaps in a fresh cache keeps it counted against the budget.
TEST(SessionStoreTest, AReplacedCacheIsStillCounted) {
  SessionStore store({});
  auto a = store.Acquire("a", Make);
  ASSERT_TRUE(a.ok());
  a->Replace(KvCache(2, 8, 1024, 2));
  Fill(*a, 16);
  EXPECT_EQ(store.Stats().used_bytes, 1024u);
}

TEST(SessionStoreTest, BusySessionsAreNeverEvicted) {
  SessionStoreOptions options;
  options.budget_bytes = 100;
  options.max_sessions = 1;
  SessionStore store(options);
  auto a = store.Acquire("a", Make);
  ASSERT_TRUE(a.ok());
  Fill(*a, 10);
  EXPECT_EQ(store.Acquire("b", Make).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(a->cache().n_positions(), 10u);
}

TEST(SessionStoreTest, ForkCopiesAPrefixAndLeavesTheSourceAlone) {
  SessionStore store({});
  {
    auto a = store.Acquire("a", Make);
    ASSERT_TRUE(a.ok());
    Fill(*a, 6);
  }
  ASSERT_TRUE(store.Fork("a", "b", 4, Digest(4)).ok());
  EXPECT_EQ(store.Fork("a", "c", 7, Digest(7)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Fork("missing", "c", 0, Digest(0)).code(), absl::StatusCode::kNotFound);
  auto b = store.AcquireExisting("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->cache().n_positions(), 4u);
  auto a = store.AcquireExisting("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->cache().n_positions(), 6u);
}

TEST(SessionStoreTest, ForkWithAWrongDigestChangesNothing) {
  SessionStore store({});
  {
    auto a = store.Acquire("a", Make);
    ASSERT_TRUE(a.ok());
    Fill(*a, 6);
  }
  const std::vector<int32_t> other = {3, 3, 3, 4};
  EXPECT_EQ(store.Fork("a", "b", 4, TokenDigest(other)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.AcquireExisting("b").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.Stats().sessions.size(), 1u);
}

TEST(SessionStoreTest, DropIdleWithPrefixDropsOnlyThatNamespace) {
  SessionStore store({});
  for (const char* id : {"a/1", "a/2", "ab/1", "b/1"}) ASSERT_TRUE(store.Acquire(id, Make).ok());
  auto busy = store.Acquire("a/3", Make);
  ASSERT_TRUE(busy.ok());
  EXPECT_EQ(store.DropIdleWithPrefix("a/"), 2u);
  EXPECT_EQ(store.Stats().sessions.size(), 3u);  // ab/1, b/1 and the busy a/3
  EXPECT_TRUE(store.AcquireExisting("ab/1").ok());
}

TEST(SessionStoreTest, DropIdleIfDropsThePickedIdleSessionsOnly) {
  SessionStore store({});
  auto layers_from = [](uint32_t first) { return [first] { return KvCache(2, 8, 1024, first); }; };
  ASSERT_TRUE(store.Acquire("old", layers_from(0)).ok());
  ASSERT_TRUE(store.Acquire("new", layers_from(2)).ok());
  auto busy = store.Acquire("old-busy", layers_from(0));
  ASSERT_TRUE(busy.ok());
  store.DropIdleIf([](const KvCache& c) { return !c.Holds(2, 4); });
  EXPECT_FALSE(store.AcquireExisting("old").ok());
  EXPECT_TRUE(store.AcquireExisting("new").ok());
  EXPECT_EQ(store.Stats().sessions.size(), 2u);  // new and the busy one
}

TEST(SessionStoreTest, DropAndStats) {
  SessionStore store({});
  {
    auto a = store.Acquire("a", Make);
    ASSERT_TRUE(a.ok());
    Fill(*a, 3);
  }
  SessionStoreStats stats = store.Stats();
  ASSERT_EQ(stats.sessions.size(), 1u);
  EXPECT_EQ(stats.sessions[0].n_positions, 3u);
  EXPECT_EQ(*store.Drop("a"), true);
  EXPECT_EQ(*store.Drop("a"), false);
  EXPECT_EQ(store.Stats().used_bytes, 0u);
}

// The tokens i * 10 + (i >= from ? shift : 0), i < n: sequences that agree
// on their first `from` positions.
std::vector<int32_t> Sequence(uint32_t n, uint32_t from = 0, int32_t shift = 0) {
  std::vector<int32_t> t(n);
  for (uint32_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>(i * 10) + (i >= from ? shift : 0);
  return t;
}

void FillWith(SessionStore& store, const std::string& id, const std::vector<int32_t>& tokens) {
  auto lease = store.Acquire(id, Make);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(lease->cache().Reserve(tokens.size()).ok());
  lease->cache().Commit(tokens.data(), tokens.size());
}

// Candidate prefixes of `prompt` at `lengths`, with the digests they point to.
struct Claims {
  Claims(const std::vector<int32_t>& prompt, std::vector<uint32_t> lengths) {
    for (uint32_t n : lengths) {
      digests.push_back(TokenDigest(std::span<const int32_t>(prompt.data(), n)));
    }
    for (size_t i = 0; i < lengths.size(); ++i) claims.push_back({lengths[i], digests[i]});
  }
  std::vector<std::string> digests;
  std::vector<SessionStore::PrefixClaim> claims;
};

TEST(SessionStoreTest, ForkLongestHeldTakesTheLongestPrefixAnyIdleSessionHolds) {
  SessionStore store({});
  FillWith(store, "other-head/a", Sequence(40, 20, 1));  // agrees on 20 positions
  FillWith(store, "other-head/b", Sequence(30));         // all 30 agree
  FillWith(store, "unrelated", Sequence(50, 0, 7));      // none
  const std::vector<int32_t> prompt = Sequence(64);
  Claims c(prompt, {16, 32, 48, 63});
  auto adopted = store.ForkLongestHeld("me/new", c.claims, [](const KvCache&) { return true; });
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(*adopted, 16u);  // b holds 30: 16 is the longest claim inside it
  auto lease = store.AcquireExisting("me/new");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->cache().tokens(), Sequence(16));

  // A longer holder wins, and a session `accept` refuses is never read.
  FillWith(store, "other-head/c", Sequence(60));
  Claims more(prompt, {16, 32, 48});
  auto longer = store.ForkLongestHeld("me/2", more.claims, [](const KvCache&) { return true; });
  ASSERT_TRUE(longer.ok());
  EXPECT_EQ(*longer, 48u);
  auto refused = store.ForkLongestHeld("me/3", more.claims, [](const KvCache&) { return false; });
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(*refused, 0u);
  EXPECT_EQ(store.AcquireExisting("me/3").status().code(), absl::StatusCode::kNotFound);
}

TEST(SessionStoreTest, ForkLongestHeldSkipsBusySessionsAndNeverTakesAWrongPrefix) {
  SessionStore store({});
  FillWith(store, "held", Sequence(40));
  const std::vector<int32_t> prompt = Sequence(64);
  Claims c(prompt, {16, 32});
  {
    auto busy = store.AcquireExisting("held");
    ASSERT_TRUE(busy.ok());
    auto adopted = store.ForkLongestHeld("me", c.claims, [](const KvCache&) { return true; });
    ASSERT_TRUE(adopted.ok());
    EXPECT_EQ(*adopted, 0u);
  }
  // The same lengths with another prompt's digests: nothing matches.
  Claims wrong(Sequence(64, 3, 1), {16, 32});
  auto none = store.ForkLongestHeld("me", wrong.claims, [](const KvCache&) { return true; });
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0u);
  // Lengths past what a session holds are not claimed from it.
  Claims past(prompt, {41, 50});
  auto too_long = store.ForkLongestHeld("me", past.claims, [](const KvCache&) { return true; });
  ASSERT_TRUE(too_long.ok());
  EXPECT_EQ(*too_long, 0u);
}

}  // namespace
}  // namespace ringlm
