// The KV caches a stage keeps between steps, by session id, under a memory
// budget with least-recently-used eviction.
#ifndef RINGLM_INFERENCE_SESSION_STORE_H_
#define RINGLM_INFERENCE_SESSION_STORE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "inference/kv_cache.h"

namespace ringlm {

struct SessionStoreOptions {
  // Bytes of KV cache all idle sessions may keep together. A session in use
  // may take more for the length of its step; eviction catches up after.
  uint64_t budget_bytes = uint64_t{1} << 30;
  // Sessions kept at most, busy ones included.
  uint32_t max_sessions = 256;
};

struct SessionInfo {
  std::string id;
  uint32_t n_positions = 0;
  uint64_t bytes = 0;
  std::chrono::steady_clock::duration idle{};
  bool busy = false;
};

struct SessionStoreStats {
  uint64_t budget_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t evictions = 0;
  std::vector<SessionInfo> sessions;  // most recently used first
};

// Owns every session's KvCache. A caller gets exclusive use of one session
// through a Lease; while leased a session is never evicted, dropped or
// forked from. Eviction only ever removes idle sessions, so it can cause a
// cache miss, never a wrong answer. Thread-safe.
class SessionStore {
 public:
  class Lease;
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  explicit SessionStore(const SessionStoreOptions& options, Clock clock = nullptr);
  ~SessionStore();

  // Leases session `id`, creating it with `make` when absent. Unavailable
  // when the session is busy with another step; ResourceExhausted when
  // max_sessions are all busy.
  absl::StatusOr<Lease> Acquire(const std::string& id, const std::function<KvCache()>& make);
  // Leases an existing session; NotFound when absent (evicted or never made).
  absl::StatusOr<Lease> AcquireExisting(const std::string& id);
  // Copies the first `n` positions of idle session `from` into a new session
  // `to` (replacing any idle `to`). NotFound / Unavailable as above;
  // InvalidArgument when `from` holds fewer than n positions;
  // FailedPrecondition when the TokenDigest of its first n tokens is not
  // `expected_digest`. Every check runs before anything changes.
  absl::Status Fork(const std::string& from, const std::string& to, uint32_t n,
                    std::string_view expected_digest);
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
  // Evicts idle sessions, least recently used first, while over budget.
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts the least recently used idle session; false when all are busy.
  bool EvictOneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Lease> LeaseLocked(const std::string& id, Entry& e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SessionStoreOptions options_;
  const Clock clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> sessions_ ABSL_GUARDED_BY(mu_);
  uint64_t used_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // sum of idle entries' bytes
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
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
