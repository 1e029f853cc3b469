#include "api/prefix_cache.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using Tokens = std::vector<int32_t>;

// Records on_evict calls (thread-safe).
struct EvictLog {
  absl::Mutex mu;
  std::vector<std::string> ids ABSL_GUARDED_BY(mu);

  std::function<void(const std::string&)> Callback() {
    return [this](const std::string& id) {
      absl::MutexLock lock(&mu);
      ids.push_back(id);
    };
  }
  std::vector<std::string> Take() {
    absl::MutexLock lock(&mu);
    return std::exchange(ids, {});
  }
};

// The session whose KV a request reuses: its own, or the one it forks.
std::string Source(const PrefixReuse& r) {
  return r.fork_from.empty() ? r.session_id : r.fork_from;
}

// Begins and ends a request recording `seq`; returns its session id.
std::string Put(PrefixCache& cache, const Tokens& seq) {
  PrefixCache::Lease lease = cache.Begin(seq);
  std::string id = lease.reuse().session_id;
  cache.End(lease, seq);
  return id;
}

// Records each of `seqs` in a session of its own (all begun before any
// ends, so none continues another); later ones are more recently used.
std::vector<std::string> PutAll(PrefixCache& cache, const std::vector<Tokens>& seqs) {
  std::vector<PrefixCache::Lease> leases;
  std::vector<std::string> ids;
  for (const Tokens& seq : seqs) {
    leases.push_back(cache.Begin(seq));
    ids.push_back(leases.back().reuse().session_id);
  }
  for (size_t i = 0; i < seqs.size(); ++i) cache.End(leases[i], seqs[i]);
  return ids;
}

TEST(PrefixCacheTest, EmptyCacheGivesFreshSession) {
  EvictLog log;
  PrefixCache cache({}, log.Callback());
  PrefixCache::Lease lease = cache.Begin(Tokens{1, 2, 3});
  EXPECT_THAT(lease.reuse().session_id, StartsWith("s-"));
  EXPECT_GT(lease.reuse().session_id.size(), 2u);
  EXPECT_EQ(lease.reuse().fork_from, "");
  EXPECT_EQ(lease.reuse().reuse_len, 0u);
  cache.End(lease, {1, 2, 3, 4});
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_THAT(log.Take(), IsEmpty());
}

TEST(PrefixCacheTest, LongestPrefixOnBranchingSequences) {
  PrefixCache cache({}, nullptr);
  auto ids = PutAll(cache, {{1, 2, 3, 4, 5}, {1, 2, 3, 9, 9, 9}, {1, 7}});
  const std::string a = ids[0], b = ids[1], c = ids[2];
  ASSERT_EQ(cache.size(), 3u);

  {
    PrefixCache::Lease l = cache.Begin(Tokens{1, 2, 3, 4, 5, 6, 7});
    EXPECT_EQ(Source(l.reuse()), a);
    EXPECT_EQ(l.reuse().fork_from, "");
    EXPECT_EQ(l.reuse().reuse_len, 5u);
    cache.End(l, {1, 2, 3, 4, 5, 6, 7, 8});
  }
  {
    PrefixCache::Lease l = cache.Begin(Tokens{1, 2, 3, 9, 9, 0});
    EXPECT_EQ(Source(l.reuse()), b);
    EXPECT_EQ(l.reuse().reuse_len, 5u);
    cache.End(l, {1, 2, 3, 9, 9, 9});
  }
  {
    PrefixCache::Lease l = cache.Begin(Tokens{1, 7, 7});
    EXPECT_EQ(Source(l.reuse()), c);
    EXPECT_EQ(l.reuse().reuse_len, 2u);
    cache.End(l, {1, 7});
  }
  {  // shares only token 1 with everything: the most recently used wins
    PrefixCache::Lease l = cache.Begin(Tokens{1, 5});
    EXPECT_EQ(Source(l.reuse()), c);
    EXPECT_EQ(l.reuse().reuse_len, 1u);
    cache.End(l, {1, 7});
  }
  {  // no common prefix at all
    PrefixCache::Lease l = cache.Begin(Tokens{8, 1, 2});
    EXPECT_NE(Source(l.reuse()), a);
    EXPECT_NE(Source(l.reuse()), b);
    EXPECT_NE(Source(l.reuse()), c);
    EXPECT_EQ(l.reuse().reuse_len, 0u);
    cache.Abandon(l);
  }
}

TEST(PrefixCacheTest, MatchEndingMidEdgeAndAtInnerNode) {
  {  // one sequence, one edge: the match stops inside it
    PrefixCache cache({}, nullptr);
    std::string a = Put(cache, {10, 11, 12, 13, 14, 15});
    PrefixCache::Lease l = cache.Begin(Tokens{10, 11, 12, 99});
    EXPECT_EQ(Source(l.reuse()), a);
    EXPECT_EQ(l.reuse().reuse_len, 3u);
    cache.End(l, {10, 11, 12, 99});
  }
  PrefixCache cache({}, nullptr);
  // Branching at depth 3 makes an inner node there; b is more recent.
  auto ids = PutAll(cache, {{10, 11, 12, 13, 14, 15}, {10, 11, 12, 20, 21}});
  const std::string a = ids[0], b = ids[1];
  {  // stops at the inner node: both pass through it, b is more recent
    PrefixCache::Lease l = cache.Begin(Tokens{10, 11, 12, 30});
    EXPECT_EQ(Source(l.reuse()), b);
    EXPECT_EQ(l.reuse().reuse_len, 3u);
    cache.End(l, {10, 11, 12, 20, 21});
  }
  std::string a2;
  {  // stops inside the edge below the inner node, on a's branch
    PrefixCache::Lease l = cache.Begin(Tokens{10, 11, 12, 13, 14, 0});
    EXPECT_EQ(Source(l.reuse()), a);
    EXPECT_EQ(l.reuse().reuse_len, 5u);
    a2 = l.reuse().session_id;  // a fork: the match ends inside a's prompt
    cache.End(l, {10, 11, 12, 13, 14, 15});
  }
  {  // a prompt ending at the inner node reuses all but its last token
    PrefixCache::Lease l = cache.Begin(Tokens{10, 11, 12});
    EXPECT_EQ(Source(l.reuse()), a2);  // the most recent through it
    EXPECT_EQ(l.reuse().reuse_len, 2u);
    cache.End(l, {10, 11, 12, 13, 14, 15});
  }
  // a and b, and the three forks of them (none was truncated).
  EXPECT_EQ(cache.size(), 5u);
}

TEST(PrefixCacheTest, ExactResendReusesAllButLastToken) {
  PrefixCache cache({}, nullptr);
  std::string a = Put(cache, {1, 2, 3, 4});
  PrefixCache::Lease l = cache.Begin(Tokens{1, 2, 3, 4});
  EXPECT_EQ(Source(l.reuse()), a);
  EXPECT_EQ(l.reuse().reuse_len, 3u);
  cache.End(l, {1, 2, 3, 4, 5});

  // A one-token prompt can reuse nothing.
  PrefixCache::Lease one = cache.Begin(Tokens{1});
  EXPECT_NE(one.reuse().session_id, a);
  EXPECT_EQ(one.reuse().reuse_len, 0u);
  EXPECT_EQ(one.reuse().fork_from, "");
  cache.Abandon(one);

  PrefixCache::Lease empty = cache.Begin(Tokens{});
  EXPECT_EQ(empty.reuse().reuse_len, 0u);
  cache.Abandon(empty);
}

// Two chats in two tabs, alternating turns, sharing a system prompt: each
// turn continues its own chat through the end of its prompt, and neither
// truncates the other (a shorter match forks, leaving the other whole).
TEST(PrefixCacheTest, InterleavedChatsNeverTruncateEachOther) {
  PrefixCache cache({}, nullptr);
  const Tokens system = {1, 2, 3, 4};
  auto turn = [&](const Tokens& prompt, const Tokens& reply) {
    PrefixCache::Lease l = cache.Begin(prompt);
    PrefixReuse reuse = l.reuse();
    Tokens kv = prompt;
    kv.insert(kv.end(), reply.begin(), reply.end());
    cache.End(l, kv);
    return reuse;
  };
  Tokens a = system, b = system;
  a.insert(a.end(), {10, 11});
  b.insert(b.end(), {20, 21});
  turn(a, {12, 13});  // A1
  const PrefixReuse b1 = turn(b, {22, 23});
  EXPECT_EQ(b1.reuse_len, 4u);  // the system prompt, forked from A
  EXPECT_FALSE(b1.fork_from.empty());
  // A2 and B2: each prompt carries its chat's reply, re-tokenized (the last
  // reply token differs), and a new user turn.
  a.insert(a.end(), {12, 99, 14});
  b.insert(b.end(), {22, 98, 24});
  const PrefixReuse a2 = turn(a, {15});
  const PrefixReuse b2 = turn(b, {25});
  EXPECT_EQ(a2.reuse_len, 7u);  // all of A1's prompt and the reply up to where it differs
  EXPECT_EQ(a2.fork_from, "");  // its own session, in place
  EXPECT_EQ(b2.reuse_len, 7u);
  EXPECT_EQ(b2.fork_from, "");
  EXPECT_EQ(b2.session_id, b1.session_id);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(PrefixCacheTest, BusySessionIsForked) {
  PrefixCache cache({}, nullptr);
  std::string a = Put(cache, {1, 2, 3, 4, 5});
  PrefixCache::Lease first = cache.Begin(Tokens{1, 2, 3, 4, 5, 6});
  EXPECT_EQ(first.reuse().session_id, a);
  EXPECT_EQ(first.reuse().reuse_len, 5u);

  PrefixCache::Lease second = cache.Begin(Tokens{1, 2, 3, 4, 5, 7});
  EXPECT_NE(second.reuse().session_id, a);
  EXPECT_EQ(second.reuse().fork_from, a);
  EXPECT_EQ(second.reuse().reuse_len, 5u);
  EXPECT_EQ(cache.size(), 2u);

  cache.End(first, {1, 2, 3, 4, 5, 6, 100});
  cache.End(second, {1, 2, 3, 4, 5, 7, 200});
  EXPECT_EQ(cache.size(), 2u);

  // Both branches are now idle and continue in place.
  PrefixCache::Lease again = cache.Begin(Tokens{1, 2, 3, 4, 5, 7, 200, 1});
  EXPECT_EQ(again.reuse().session_id, second.reuse().session_id);
  EXPECT_EQ(again.reuse().fork_from, "");
  EXPECT_EQ(again.reuse().reuse_len, 7u);
  cache.End(again, {1, 2, 3, 4, 5, 7, 200, 1});
}

TEST(PrefixCacheTest, BusySessionOnlyOffersTheReusedPrefix) {
  // While continued in place, a session's KV past reuse_len is being
  // rewritten, so a concurrent fork may only reuse up to that point.
  PrefixCache cache({}, nullptr);
  PrefixCache::Lease turn1 = cache.Begin(Tokens{1, 2, 3});  // prompt 1 2 3, reply 4 5 6
  const std::string a = turn1.reuse().session_id;
  cache.End(turn1, {1, 2, 3, 4, 5, 6});
  PrefixCache::Lease first = cache.Begin(Tokens{1, 2, 3, 9});  // its whole prompt: in place
  EXPECT_EQ(first.reuse().session_id, a);
  EXPECT_EQ(first.reuse().fork_from, "");
  EXPECT_EQ(first.reuse().reuse_len, 3u);
  PrefixCache::Lease second = cache.Begin(Tokens{1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(second.reuse().fork_from, a);
  EXPECT_EQ(second.reuse().reuse_len, 3u);
  cache.End(first, {1, 2, 3, 9, 10});
  cache.End(second, {1, 2, 3, 4, 5, 6, 7});
}

TEST(PrefixCacheTest, EvictsLeastRecentlyUsedIdleSessions) {
  EvictLog log;
  PrefixCache cache({.max_sessions = 3}, log.Callback());
  std::string a = Put(cache, {1, 1});
  std::string b = Put(cache, {2, 2});
  std::string c = Put(cache, {3, 3});
  EXPECT_THAT(log.Take(), IsEmpty());

  // Using a makes b the least recently used.
  PrefixCache::Lease l = cache.Begin(Tokens{1, 1, 1});
  ASSERT_EQ(l.reuse().session_id, a);
  cache.End(l, {1, 1, 1});

  std::string d = Put(cache, {4, 4});
  EXPECT_THAT(log.Take(), ElementsAre(b));
  std::string e = Put(cache, {5, 5});
  EXPECT_THAT(log.Take(), ElementsAre(c));
  EXPECT_EQ(cache.size(), 3u);

  // Evicted sequences no longer match.
  PrefixCache::Lease gone = cache.Begin(Tokens{2, 2, 2});
  EXPECT_EQ(gone.reuse().reuse_len, 0u);
  cache.Abandon(gone);
  log.Take();
}

TEST(PrefixCacheTest, BusySessionsAreNeverEvicted) {
  EvictLog log;
  PrefixCache cache({.max_sessions = 1}, log.Callback());
  std::string a = Put(cache, {1, 2, 3});
  PrefixCache::Lease busy = cache.Begin(Tokens{1, 2, 3, 4});
  ASSERT_EQ(busy.reuse().session_id, a);
  std::string b = Put(cache, {7, 8});  // over the bound: only b is idle
  EXPECT_THAT(log.Take(), ElementsAre(b));
  cache.End(busy, {1, 2, 3, 4});
  EXPECT_THAT(log.Take(), IsEmpty());
  EXPECT_EQ(cache.size(), 1u);
}

TEST(PrefixCacheTest, MaxTokensBound) {
  EvictLog log;
  PrefixCache cache({.max_tokens = 10}, log.Callback());
  std::string a = Put(cache, {1, 2, 3, 4});
  std::string b = Put(cache, {5, 6, 7, 8});
  EXPECT_THAT(log.Take(), IsEmpty());
  std::string c = Put(cache, {9, 9, 9});  // 11 tokens: a goes
  EXPECT_THAT(log.Take(), ElementsAre(a));
  EXPECT_EQ(cache.size(), 2u);

  // Growing b past the bound evicts c, the least recently used.
  PrefixCache::Lease l = cache.Begin(Tokens{5, 6, 7, 8, 1});
  ASSERT_EQ(l.reuse().session_id, b);
  cache.End(l, {5, 6, 7, 8, 1, 2, 3, 4});  // 3 + 8 tokens
  EXPECT_THAT(log.Take(), ElementsAre(c));

  // A sequence larger than the whole budget is not kept either.
  std::string big = Put(cache, Tokens(11, 4));
  EXPECT_THAT(log.Take(), ElementsAre(b, big));
  EXPECT_EQ(cache.size(), 0u);
}

TEST(PrefixCacheTest, AbandonForgetsSession) {
  EvictLog log;
  PrefixCache cache({}, log.Callback());
  std::string a = Put(cache, {1, 2, 3});
  PrefixCache::Lease l = cache.Begin(Tokens{1, 2, 3, 4});
  ASSERT_EQ(l.reuse().session_id, a);
  cache.Abandon(l);
  EXPECT_THAT(log.Take(), ElementsAre(a));
  EXPECT_EQ(cache.size(), 0u);
  cache.Abandon(l);  // twice is harmless
  cache.End(l, {1, 2, 3});
  EXPECT_THAT(log.Take(), IsEmpty());
  EXPECT_EQ(cache.size(), 0u);

  PrefixCache::Lease fresh = cache.Begin(Tokens{1, 2, 3, 4});
  EXPECT_EQ(fresh.reuse().reuse_len, 0u);
  cache.End(fresh, {1, 2, 3, 4});
}

TEST(PrefixCacheTest, DestroyedLeaseIsAbandoned) {
  EvictLog log;
  PrefixCache cache({}, log.Callback());
  std::string id;
  {
    PrefixCache::Lease l = cache.Begin(Tokens{1, 2});
    id = l.reuse().session_id;
    PrefixCache::Lease moved = std::move(l);  // the moved-from lease owns nothing
  }
  EXPECT_THAT(log.Take(), ElementsAre(id));
  EXPECT_EQ(cache.size(), 0u);

  // Move-assigning over a live lease abandons the old one.
  PrefixCache::Lease x = cache.Begin(Tokens{3});
  PrefixCache::Lease y = cache.Begin(Tokens{4});
  std::string x_id = x.reuse().session_id;
  std::string y_id = y.reuse().session_id;
  x = std::move(y);
  EXPECT_THAT(log.Take(), ElementsAre(x_id));
  cache.End(x, {4, 5});
  EXPECT_THAT(log.Take(), IsEmpty());
  EXPECT_EQ(cache.size(), 1u);
}

TEST(PrefixCacheTest, DisabledNeverRecords) {
  EvictLog log;
  PrefixCache cache({.enabled = false}, log.Callback());
  std::set<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    PrefixCache::Lease l = cache.Begin(Tokens{1, 2, 3, 4});
    EXPECT_THAT(l.reuse().session_id, StartsWith("s-"));
    EXPECT_EQ(l.reuse().fork_from, "");
    EXPECT_EQ(l.reuse().reuse_len, 0u);
    ids.insert(l.reuse().session_id);
    cache.End(l, {1, 2, 3, 4, 5});
    EXPECT_THAT(log.Take(), ElementsAre(l.reuse().session_id));
  }
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(PrefixCacheTest, ConcurrentBeginEnd) {
  std::atomic<int> evictions = 0;
  PrefixCache cache({.max_sessions = 16, .max_tokens = 4096},
                    [&](const std::string&) { evictions++; });
  constexpr int kThreads = 8;
  constexpr int kRounds = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&cache, t] {
      std::mt19937 rng(t);
      for (int r = 0; r < kRounds; ++r) {
        Tokens prompt = {0, 1, 2};  // a shared "system prompt"
        int len = 1 + rng() % 20;
        for (int i = 0; i < len; ++i) prompt.push_back(rng() % 4);
        PrefixCache::Lease l = cache.Begin(prompt);
        ASSERT_LT(l.reuse().reuse_len, prompt.size());
        if (rng() % 10 == 0) {
          cache.Abandon(l);
          continue;
        }
        prompt.push_back(rng() % 4);
        cache.End(l, prompt);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(cache.size(), 16u);
  EXPECT_GT(evictions.load(), 0);
}

size_t Lcp(const Tokens& a, const Tokens& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

// Random Begin/End/Abandon against a brute-force model: a list of each
// session's recorded sequence, kept in step through on_evict.
TEST(PrefixCacheTest, MatchesBruteForceLcp) {
  std::map<std::string, Tokens> model;       // session -> recorded sequence
  std::map<std::string, size_t> prompt_len;  // session -> its prompt part
  std::set<std::string> busy;
  PrefixCache cache({.max_sessions = 12, .max_tokens = 120},
                    [&](const std::string& id) { model.erase(id); });
  std::mt19937 rng(1234);
  auto random_seq = [&](const Tokens& base) {
    Tokens s(base.begin(), base.begin() + (base.empty() ? 0 : rng() % (base.size() + 1)));
    int extra = rng() % 8;
    for (int i = 0; i < extra; ++i) s.push_back(rng() % 3);
    return s;
  };
  std::vector<std::pair<PrefixCache::Lease, Tokens>> open;
  for (int step = 0; step < 5000; ++step) {
    if (!open.empty() && (open.size() >= 3 || rng() % 2 == 0)) {
      size_t k = rng() % open.size();
      auto [lease, prompt] = std::move(open[k]);
      open.erase(open.begin() + k);
      busy.erase(lease.reuse().session_id);
      if (rng() % 8 == 0) {
        cache.Abandon(lease);
        ASSERT_FALSE(model.contains(lease.reuse().session_id));
        continue;
      }
      Tokens kv = prompt;
      for (int i = rng() % 4; i > 0; --i) kv.push_back(rng() % 3);
      model[lease.reuse().session_id] = kv;
      prompt_len[lease.reuse().session_id] = prompt.size();
      cache.End(lease, kv);
      ASSERT_EQ(cache.size(),
                model.size() + open.size() - std::count_if(open.begin(), open.end(), [&](auto& o) {
                  return model.contains(o.first.reuse().session_id);
                }));
      continue;
    }
    // A new prompt: often a variation of a recorded sequence.
    Tokens base;
    if (!model.empty()) {
      auto it = model.begin();
      std::advance(it, rng() % model.size());
      base = it->second;
    }
    Tokens prompt = random_seq(base);
    if (prompt.empty()) prompt.push_back(rng() % 3);

    size_t best = 0;
    for (auto& [id, seq] : model) best = std::max(best, Lcp(seq, prompt));
    size_t want = std::min(best, prompt.size() - 1);

    PrefixCache::Lease lease = cache.Begin(prompt);
    const PrefixReuse& r = lease.reuse();
    ASSERT_EQ(r.reuse_len, want) << "step " << step;
    if (want == 0) {
      EXPECT_EQ(r.fork_from, "");
      EXPECT_FALSE(model.contains(r.session_id));
    } else {
      const std::string& source = r.fork_from.empty() ? r.session_id : r.fork_from;
      ASSERT_TRUE(model.contains(source));
      EXPECT_EQ(Lcp(model[source], prompt), best);  // passes the deepest point
      // In place only for an idle session whose whole prompt is matched.
      EXPECT_EQ(!r.fork_from.empty(), busy.contains(source) || want < prompt_len[source]);
      if (r.fork_from.empty()) {
        // Continued in place: it now only holds the reused prefix.
        model[source] = Tokens(prompt.begin(), prompt.begin() + want);
        prompt_len[source] = want;
      }
    }
    busy.insert(r.session_id);
    open.emplace_back(std::move(lease), prompt);
  }
}

}  // namespace
}  // namespace ringlm
