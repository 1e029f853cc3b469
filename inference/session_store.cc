#include "inference/session_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
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
  used_bytes_ -= e.bytes;
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
  if (auto dst = sessions_.find(to); dst != sessions_.end()) {
    if (dst->second.busy) return absl::UnavailableError(absl::StrCat("session '", to, "' is busy"));
    used_bytes_ -= dst->second.bytes;
    sessions_.erase(dst);
  }
  Entry e;
  e.cache = std::make_unique<KvCache>(src->second.cache->Clone(n));
  e.bytes = e.cache->allocated_bytes();
  e.last_used = clock_();
  used_bytes_ += e.bytes;
  sessions_.emplace(to, std::move(e));
  EvictLocked();
  return absl::OkStatus();
}

absl::StatusOr<bool> SessionStore::Drop(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return false;
  if (it->second.busy) return absl::UnavailableError(absl::StrCat("session '", id, "' is busy"));
  used_bytes_ -= it->second.bytes;
  sessions_.erase(it);
  return true;
}

void SessionStore::DropIdleIf(const std::function<bool(const KvCache&)>& drop) {
  absl::MutexLock lock(&mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second.busy || !drop(*it->second.cache)) {
      ++it;
      continue;
    }
    used_bytes_ -= it->second.bytes;
    it = sessions_.erase(it);
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
    used_bytes_ -= it->second.bytes;
    it = sessions_.erase(it);
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
  used_bytes_ += e.bytes;
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
  used_bytes_ -= victim->second.bytes;
  sessions_.erase(victim);
  ++evictions_;
  return true;
}

void SessionStore::EvictLocked() {
  while (used_bytes_ > options_.budget_bytes && EvictOneLocked()) {
  }
}

SessionStoreStats SessionStore::Stats() const {
  absl::MutexLock lock(&mu_);
  SessionStoreStats s;
  s.budget_bytes = options_.budget_bytes;
  s.evictions = evictions_;
  const auto now = clock_();
  for (const auto& [id, e] : sessions_) {
    SessionInfo info;
    info.id = id;
    info.busy = e.busy;
    info.n_positions = e.busy ? 0 : e.cache->n_positions();
    info.bytes = e.busy ? 0 : e.bytes;
    info.idle = e.busy ? std::chrono::steady_clock::duration{} : now - e.last_used;
    s.used_bytes += info.bytes;
    s.sessions.push_back(info);
  }
  std::sort(s.sessions.begin(), s.sessions.end(),
            [](const SessionInfo& a, const SessionInfo& b) { return a.idle < b.idle; });
  return s;
}

SessionStore::Lease::Lease(Lease&& other) noexcept
    : store_(other.store_), id_(std::move(other.id_)), cache_(other.cache_) {
  other.store_ = nullptr;
}

SessionStore::Lease::~Lease() {
  if (store_ != nullptr) store_->Release(id_);
}

}  // namespace ringlm
