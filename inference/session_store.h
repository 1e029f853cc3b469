// The KV caches a stage keeps between steps, by session id, under a memory
// budget with least-recently-used eviction.
#ifndef RINGLM_INFERENCE_SESSION_STORE_H_
#define RINGLM_INFERENCE_SESSION_STORE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "inference/kv_cache.h"

namespace ringlm {

struct SessionStoreOptions {
  // Bytes of KV blocks all sessions may hold together, a block shared by
  // several sessions counted once. Sessions in use may pass it for the
  // length of their step; eviction of idle ones catches up after.
  uint64_t budget_bytes = uint64_t{1} << 30;
  // Sessions kept at most, busy ones included.
  uint32_t max_sessions = 256;
};

struct SessionInfo {
  std::string id;
  uint32_t n_positions = 0;
  uint64_t bytes = 0;  // of the blocks it refers to, shared ones included
  std::chrono::steady_clock::duration idle{};
  bool busy = false;
};

struct SessionStoreStats {
  uint64_t budget_bytes = 0;
  uint64_t used_bytes = 0;            // KV blocks alive, each once
  uint64_t logical_bytes = 0;         // the sessions' bytes as if nothing were shared
  uint64_t blocks = 0;                // KV blocks alive
  uint64_t shared_blocks = 0;         // of them, held by an idle session and another one
  uint64_t evictions = 0;             // sessions evicted
  uint64_t evicted_blocks = 0;        // blocks those evictions freed
  std::vector<SessionInfo> sessions;  // most recently used first
};

// Owns every session's KvCache. A caller gets exclusive use of one session
// through a Lease; while leased a session is never evicted, dropped or
// forked from. A fork shares the KV blocks of the prefix it keeps (see
// KvCache), and the byte budget counts every block once. Past the budget,
// idle sessions are evicted least recently used first until the blocks
// alive fit; a block is freed with the last session that refers to it, so a
// prefix recent sessions share stays. An eviction can cause a cache miss,
// never a wrong answer. Thread-safe.
class SessionStore {
 public:
  class Lease;
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  explicit SessionStore(const SessionStoreOptions& options, Clock clock = nullptr);
  ~SessionStore();

  // Leases session `id`, creating it with `make` (an empty cache; the store
  // counts its blocks from then on) when absent. Unavailable
  // when the session is busy with another step; ResourceExhausted when
  // max_sessions are all busy.
  absl::StatusOr<Lease> Acquire(const std::string& id, const std::function<KvCache()>& make);
  // Leases an existing session; NotFound when absent (evicted or never made).
  absl::StatusOr<Lease> AcquireExisting(const std::string& id);
  // Makes a new session `to` (replacing any idle `to`) of the first `n`
  // positions of idle session `from`, sharing its whole blocks. NotFound / Unavailable as above;
  // InvalidArgument when `from` holds fewer than n positions;
  // FailedPrecondition when the TokenDigest of its first n tokens is not
  // `expected_digest`. Every check runs before anything changes.
  absl::Status Fork(const std::string& from, const std::string& to, uint32_t n,
                    std::string_view expected_digest);
  // One candidate prefix of a prompt: its length and TokenDigest.
  struct PrefixClaim {
    uint32_t n = 0;
    std::string_view digest;
  };
  // Forks into a new session `to` (replacing any idle `to`) the longest of
  // `claims` (n strictly ascending) that an idle session which `accept`
  // takes holds exactly, from whichever such session holds it; a prefix of
  // any session, whatever its id. Returns the length forked, 0 when no
  // session holds even the shortest (then nothing changes). Unavailable
  // when `to` is busy. Costs a digest pass over the matching prefix of each
  // idle session, under the store's lock.
  absl::StatusOr<uint32_t> ForkLongestHeld(const std::string& to,
                                           std::span<const PrefixClaim> claims,
                                           const std::function<bool(const KvCache&)>& accept);
  // Removes an idle session. Returns false when absent; Unavailable if busy.
  absl::StatusOr<bool> Drop(const std::string& id);
  // Removes every idle session whose cache `drop` picks.
  void DropIdleIf(const std::function<bool(const KvCache&)>& drop);
  // Removes every idle session whose id starts with `prefix`; returns how many.
  size_t DropIdleWithPrefix(std::string_view prefix);

  SessionStoreStats Stats() const;

 private:
  struct Entry {
    std::unique_ptr<KvCache> cache;
    bool busy = false;
    std::chrono::steady_clock::time_point last_used;
    uint64_t bytes = 0;  // allocated bytes when last released
  };
  void Release(const std::string& id);
  // Evicts idle sessions while the blocks alive pass the budget.
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts the least recently used idle session; false when all are busy.
  bool EvictOneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Erases an idle session, counting it as evicted when `evicted`.
  void EraseLocked(std::map<std::string, Entry>::iterator it, bool evicted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Lease> LeaseLocked(const std::string& id, Entry& e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes `to` the first n positions of idle `src`, whose digest is checked.
  absl::Status ForkLocked(const Entry& src, const std::string& to, uint32_t n)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SessionStoreOptions options_;
  const Clock clock_;
  mutable absl::Mutex mu_;
  const std::shared_ptr<KvBlockLedger> ledger_ = std::make_shared<KvBlockLedger>();
  std::map<std::string, Entry> sessions_ ABSL_GUARDED_BY(mu_);
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evicted_blocks_ ABSL_GUARDED_BY(mu_) = 0;
};

// Exclusive use of one session's cache; releasing it (destruction) makes the
// session idle again and lets the store enforce its budget. Movable only.
class SessionStore::Lease {
 public:
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&&) = delete;
  Lease(const Lease&) = delete;
  ~Lease();
  KvCache& cache() { return *cache_; }
  // Replaces the session's cache with `fresh` (empty), counted like it.
  void Replace(KvCache fresh);
  const std::string& id() const { return id_; }

 private:
  friend class SessionStore;
  Lease(SessionStore* store, std::string id, KvCache* cache)
      : store_(store), id_(std::move(id)), cache_(cache) {}
  SessionStore* store_;
  std::string id_;
  KvCache* cache_;
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_SESSION_STORE_H_
