#include "inference/session_store.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "inference/token_digest.h"

namespace ringlm {

SessionStore::SessionStore(const SessionStoreOptions& options, Clock clock)
    : options_(options),
      clock_(clock ? std::move(clock) : [] { return std::chrono::steady_clock::now(); }) {}

SessionStore::~SessionStore() = default;

absl::StatusOr<SessionStore::Lease> SessionStore::LeaseLocked(const std::string& id, Entry& e) {
  if (e.busy) {
    return absl::UnavailableError(absl::StrCat("session '", id, "' is busy with another step"));
  }
  e.busy = true;
  e.last_used = clock_();
  return Lease(this, id, e.cache.get());
}

absl::StatusOr<SessionStore::Lease> SessionStore::Acquire(const std::string& id,
                                                          const std::function<KvCache()>& make) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it != sessions_.end()) return LeaseLocked(id, it->second);
  if (sessions_.size() >= options_.max_sessions) {
    // Make room for one more by evicting the least recently used idle one.
    if (!EvictOneLocked()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("all ", options_.max_sessions, " sessions are busy"));
    }
  }
  Entry& e = sessions_[id];
  e.cache = std::make_unique<KvCache>(make());
  e.cache->UseLedger(ledger_);
  return LeaseLocked(id, e);
}

absl::StatusOr<SessionStore::Lease> SessionStore::AcquireExisting(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    return absl::NotFoundError(absl::StrCat("no session '", id, "' on this stage"));
  }
  return LeaseLocked(id, it->second);
}

absl::Status SessionStore::Fork(const std::string& from, const std::string& to, uint32_t n,
                                std::string_view expected_digest) {
  absl::MutexLock lock(&mu_);
  auto src = sessions_.find(from);
  if (src == sessions_.end()) {
    return absl::NotFoundError(absl::StrCat("no session '", from, "' on this stage"));
  }
  if (src->second.busy) {
    return absl::UnavailableError(absl::StrCat("session '", from, "' is busy"));
  }
  if (src->second.cache->n_positions() < n) {
    return absl::InvalidArgumentError(absl::StrCat("session '", from, "' holds ",
                                                   src->second.cache->n_positions(),
                                                   " positions, fewer than ", n));
  }
  // Checked before anything changes: a wrong claim leaves the store as it was.
  const std::vector<int32_t>& tokens = src->second.cache->tokens();
  if (TokenDigest(std::span<const int32_t>(tokens.data(), n)) != expected_digest) {
    return absl::FailedPreconditionError(
        absl::StrCat("the first ", n, " tokens of session '", from, "' differ from the claim"));
  }
  return ForkLocked(src->second, to, n);
}

absl::Status SessionStore::ForkLocked(const Entry& src, const std::string& to, uint32_t n) {
  if (auto dst = sessions_.find(to); dst != sessions_.end()) {
    if (dst->second.busy) return absl::UnavailableError(absl::StrCat("session '", to, "' is busy"));
    if (&dst->second == &src) return absl::InvalidArgumentError("a session cannot fork itself");
    EraseLocked(dst, /*evicted=*/false);
  }
  Entry e;
  e.cache = std::make_unique<KvCache>(src.cache->Fork(n));
  e.bytes = e.cache->allocated_bytes();
  e.last_used = clock_();
  sessions_.emplace(to, std::move(e));
  EvictLocked();
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> SessionStore::ForkLongestHeld(
    const std::string& to, std::span<const PrefixClaim> claims,
    const std::function<bool(const KvCache&)>& accept) {
  absl::MutexLock lock(&mu_);
  const Entry* best = nullptr;
  uint32_t best_n = 0;
  for (const auto& [id, e] : sessions_) {
    if (e.busy || id == to || !accept(*e.cache)) continue;
    const std::vector<int32_t>& tokens = e.cache->tokens();
    // A longer prefix includes a shorter one: the first mismatch ends the
    // walk, so a session of another conversation costs one short digest.
    TokenDigester digester;
    uint32_t fed = 0;
    for (const PrefixClaim& claim : claims) {
      if (claim.n > tokens.size() || claim.n < fed) break;
      digester.Add(std::span<const int32_t>(tokens.data() + fed, claim.n - fed));
      fed = claim.n;
      if (digester.Digest() != claim.digest) break;
      if (claim.n > best_n) {
        best = &e;
        best_n = claim.n;
      }
    }
  }
  if (best == nullptr) return 0u;
  RINGLM_RETURN_IF_ERROR(ForkLocked(*best, to, best_n));
  return best_n;
}

absl::StatusOr<bool> SessionStore::Drop(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return false;
  if (it->second.busy) return absl::UnavailableError(absl::StrCat("session '", id, "' is busy"));
  EraseLocked(it, /*evicted=*/false);
  return true;
}

void SessionStore::DropIdleIf(const std::function<bool(const KvCache&)>& drop) {
  absl::MutexLock lock(&mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second.busy || !drop(*it->second.cache)) {
      ++it;
      continue;
    }
    EraseLocked(it++, /*evicted=*/false);
  }
}

size_t SessionStore::DropIdleWithPrefix(std::string_view prefix) {
  absl::MutexLock lock(&mu_);
  size_t dropped = 0;
  for (auto it = sessions_.lower_bound(std::string(prefix));
       it != sessions_.end() && std::string_view(it->first).substr(0, prefix.size()) == prefix;) {
    if (it->second.busy) {
      ++it;
      continue;
    }
    EraseLocked(it++, /*evicted=*/false);
    ++dropped;
  }
  return dropped;
}

void SessionStore::Release(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  Entry& e = it->second;
  e.busy = false;
  e.last_used = clock_();
  e.bytes = e.cache->allocated_bytes();
  EvictLocked();
}

bool SessionStore::EvictOneLocked() {
  auto victim = sessions_.end();
  for (auto i = sessions_.begin(); i != sessions_.end(); ++i) {
    if (!i->second.busy &&
        (victim == sessions_.end() || i->second.last_used < victim->second.last_used)) {
      victim = i;
    }
  }
  if (victim == sessions_.end()) return false;
  EraseLocked(victim, /*evicted=*/true);
  return true;
}

void SessionStore::EraseLocked(std::map<std::string, Entry>::iterator it, bool evicted) {
  const uint64_t blocks_before = ledger_->blocks();
  sessions_.erase(it);
  if (evicted) {
    ++evictions_;
    evicted_blocks_ += blocks_before - ledger_->blocks();
  }
}

void SessionStore::EvictLocked() {
  while (ledger_->bytes() > options_.budget_bytes && EvictOneLocked()) {
  }
}

SessionStoreStats SessionStore::Stats() const {
  absl::MutexLock lock(&mu_);
  SessionStoreStats s;
  s.budget_bytes = options_.budget_bytes;
  s.used_bytes = ledger_->bytes();
  s.blocks = ledger_->blocks();
  s.evictions = evictions_;
  s.evicted_blocks = evicted_blocks_;
  const auto now = clock_();
  // Only idle caches are read: a busy one belongs to its step's thread.
  absl::flat_hash_set<const void*> shared;
  for (const auto& [id, e] : sessions_) {
    SessionInfo info;
    info.id = id;
    info.busy = e.busy;
    info.n_positions = e.busy ? 0 : e.cache->n_positions();
    info.bytes = e.bytes;
    info.idle = e.busy ? std::chrono::steady_clock::duration{} : now - e.last_used;
    s.logical_bytes += info.bytes;
    s.sessions.push_back(info);
    if (e.busy) continue;
    for (size_t b = 0; b < e.cache->n_blocks(); ++b) {
      if (e.cache->block_shared(b)) shared.insert(e.cache->block_id(b));
    }
  }
  s.shared_blocks = shared.size();
  std::sort(s.sessions.begin(), s.sessions.end(),
            [](const SessionInfo& a, const SessionInfo& b) { return a.idle < b.idle; });
  return s;
}

SessionStore::Lease::Lease(Lease&& other) noexcept
    : store_(other.store_), id_(std::move(other.id_)), cache_(other.cache_) {
  other.store_ = nullptr;
}

void SessionStore::Lease::Replace(KvCache fresh) {
  fresh.UseLedger(cache_->ledger());
  *cache_ = std::move(fresh);
}

SessionStore::Lease::~Lease() {
  if (store_ != nullptr) store_->Release(id_);
}

}  // namespace ringlm
