// The session map as a radix tree (compressed trie) over token ids.
//
// Every recorded session's token sequence ends at a node of the tree; edges
// carry runs of tokens, so a node exists only where sequences branch or end.
// A prompt's longest common prefix with any recorded sequence is a single
// walk from the root; it may stop inside an edge or at an inner node, and the
// sessions "through" that point are exactly those ending in the subtree below
// it.
//
// Cost: Begin is O(prompt length) for the walk plus O(subtree) to pick the
// most recently used session below the match point; the subtree has at most
// 2 * sessions nodes, and sessions are bounded by max_sessions (64 by
// default), so no per-node recency index is kept. End is O(sequence length +
// log sessions) plus evictions.
#include "api/prefix_cache.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>
#include <utility>

#include "security/crypto.h"

namespace ringlm {
namespace {

struct Session;

// A point in the tree: the tokens on the edge from `parent` lead here.
// Owned by its parent's `children`; the root has an empty edge.
struct Node {
  std::vector<int32_t> edge;  // [edge length], never empty except at the root
  Node* parent = nullptr;
  std::unordered_map<int32_t, std::unique_ptr<Node>> children;  // keyed by edge[0]
  std::vector<Session*> ends;  // sessions whose sequence ends exactly here
};

// What the cache knows of one session. Busy sessions are leased to a request;
// only idle ones may be evicted.
struct Session {
  std::string id;
  Node* node = nullptr;  // where its recorded sequence ends; null = nothing recorded
  uint64_t tokens = 0;   // length of the recorded sequence
  // How much of it was the prompt of the request that recorded it; the rest
  // is that request's reply.
  uint64_t prompt_tokens = 0;
  uint64_t last_used = 0;
  bool busy = false;
};

size_t CommonPrefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

struct PrefixCache::Impl {
  Impl(PrefixCacheOptions opts, std::function<void(const std::string&)> evict)
      : options(opts), on_evict(std::move(evict)) {}

  const PrefixCacheOptions options;
  const std::function<void(const std::string&)> on_evict;

  mutable absl::Mutex mu;
  Node root ABSL_GUARDED_BY(mu);
  std::unordered_map<std::string, std::unique_ptr<Session>> sessions ABSL_GUARDED_BY(mu);
  // Idle sessions with a recorded sequence, by last_used (unique ticks): the
  // eviction order.
  std::map<uint64_t, Session*> idle_lru ABSL_GUARDED_BY(mu);
  uint64_t total_tokens ABSL_GUARDED_BY(mu) = 0;
  uint64_t tick ABSL_GUARDED_BY(mu) = 0;
  // "s-" + 128 bits from the CSPRNG (a session id is a capability on every
  // stage), unused by any tracked session.
  std::string NewId() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (;;) {
      std::string id = RandomId("s-");
      if (!sessions.contains(id)) return id;
    }
  }

  // The deepest point any recorded sequence shares with `prompt`: returns
  // the node at or just below it (whose subtree holds the sessions passing
  // through it) and its depth in tokens.
  std::pair<Node*, size_t> Match(std::span<const int32_t> prompt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Node* n = &root;
    size_t depth = 0;
    while (depth < prompt.size()) {
      auto it = n->children.find(prompt[depth]);
      if (it == n->children.end()) break;
      Node* child = it->second.get();
      size_t k = CommonPrefix(child->edge, prompt.subspan(depth));
      depth += k;
      n = child;
      if (k < child->edge.size()) break;  // stopped inside the edge
    }
    return {n, depth};
  }

  // The most recently used session ending in the subtree under `top`.
  static Session* MostRecentBelow(Node* top) {
    Session* best = nullptr;
    std::vector<Node*> stack = {top};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (Session* s : n->ends) {
        if (best == nullptr || s->last_used > best->last_used) best = s;
      }
      for (auto& [token, child] : n->children) stack.push_back(child.get());
    }
    return best;
  }

  // The node at exactly `seq`, splitting an edge or adding a leaf as needed.
  Node* Insert(std::span<const int32_t> seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Node* n = &root;
    size_t depth = 0;
    while (depth < seq.size()) {
      auto rest = seq.subspan(depth);
      auto it = n->children.find(rest[0]);
      if (it == n->children.end()) {
        auto leaf = std::make_unique<Node>();
        leaf->edge.assign(rest.begin(), rest.end());
        leaf->parent = n;
        Node* out = leaf.get();
        n->children.emplace(rest[0], std::move(leaf));
        return out;
      }
      Node* child = it->second.get();
      size_t k = CommonPrefix(child->edge, rest);
      if (k < child->edge.size()) {
        // Split: parent -> mid (edge[0, k)) -> child (edge[k, end)).
        auto mid = std::make_unique<Node>();
        mid->edge.assign(child->edge.begin(), child->edge.begin() + k);
        mid->parent = n;
        std::unique_ptr<Node> tail = std::move(it->second);
        tail->edge.erase(tail->edge.begin(), tail->edge.begin() + k);
        tail->parent = mid.get();
        mid->children.emplace(tail->edge[0], std::move(tail));
        child = mid.get();
        it->second = std::move(mid);
      }
      n = child;
      depth += k;
    }
    return n;
  }

  // Removes nodes left with no purpose: leaves that end no sequence, and
  // inner nodes with one child that end no sequence (merged into the child).
  void Prune(Node* n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    while (n != &root && n->ends.empty()) {
      Node* parent = n->parent;
      auto slot = parent->children.find(n->edge[0]);
      if (n->children.empty()) {
        parent->children.erase(slot);  // destroys n
        n = parent;
        continue;
      }
      if (n->children.size() == 1) {
        std::unique_ptr<Node> only = std::move(n->children.begin()->second);
        only->edge.insert(only->edge.begin(), n->edge.begin(), n->edge.end());
        only->parent = parent;
        slot->second = std::move(only);  // destroys n
      }
      return;
    }
  }

  // Records `seq` as what session `s` holds (replacing any earlier record).
  void Record(Session* s, std::span<const int32_t> seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Unrecord(s);
    if (seq.empty()) return;
    s->node = Insert(seq);
    s->node->ends.push_back(s);
    s->tokens = seq.size();
    total_tokens += s->tokens;
  }

  void Unrecord(Session* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (s->node == nullptr) return;
    auto& ends = s->node->ends;
    ends.erase(std::find(ends.begin(), ends.end(), s));
    Prune(s->node);
    s->node = nullptr;
    total_tokens -= s->tokens;
    s->tokens = 0;
  }

  // Forgets session `id` entirely (tree, LRU, map).
  void Forget(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = sessions.find(id);
    if (it == sessions.end()) return;
    Session* s = it->second.get();
    Unrecord(s);
    if (!s->busy) idle_lru.erase(s->last_used);
    sessions.erase(it);
  }

  // Evicts least recently used idle sessions until within bounds; returns
  // their ids for on_evict (called outside the lock).
  std::vector<std::string> EnforceBounds() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::vector<std::string> evicted;
    while (!idle_lru.empty() &&
           (sessions.size() > options.max_sessions || total_tokens > options.max_tokens)) {
      std::string id = idle_lru.begin()->second->id;
      Forget(id);
      evicted.push_back(std::move(id));
    }
    return evicted;
  }
};

PrefixCache::PrefixCache(PrefixCacheOptions options,
                         std::function<void(const std::string&)> on_evict)
    : impl_(std::make_unique<Impl>(options, std::move(on_evict))) {}

PrefixCache::~PrefixCache() = default;

PrefixCache::Lease PrefixCache::Begin(std::span<const int32_t> prompt) {
  Impl& m = *impl_;
  absl::MutexLock lock(&m.mu);
  PrefixReuse reuse;
  if (!m.options.enabled) {
    reuse.session_id = m.NewId();
    return Lease(this, std::move(reuse), prompt.size());
  }
  const uint64_t now = ++m.tick;
  auto [node, lcp] = m.Match(prompt);
  const size_t reuse_len = prompt.empty() ? 0 : std::min(lcp, prompt.size() - 1);
  Session* source = reuse_len > 0 ? Impl::MostRecentBelow(node) : nullptr;

  if (source != nullptr && !source->busy && reuse_len >= source->prompt_tokens) {
    // The same conversation, continued: the match covers the whole prompt
    // the session last ran, so truncating it loses at most that request's
    // reply (which this prompt carries again). Continue in place. The stages
    // truncate its KV to reuse_len, so from now on it only reliably holds
    // that prefix: record just that, so a concurrent request never forks
    // from positions that are being overwritten.
    m.idle_lru.erase(source->last_used);
    source->busy = true;
    source->last_used = now;
    m.Record(source, prompt.first(reuse_len));
    source->prompt_tokens = reuse_len;
    reuse.session_id = source->id;
    reuse.reuse_len = static_cast<uint32_t>(reuse_len);
    return Lease(this, std::move(reuse), prompt.size());
  }

  auto fresh = std::make_unique<Session>();
  fresh->id = m.NewId();
  fresh->busy = true;
  fresh->last_used = now;
  reuse.session_id = fresh->id;
  if (source != nullptr) {
    // Busy, or another conversation that shares only a prefix (a system
    // prompt, an earlier turn): fork it, and leave it whole.
    reuse.fork_from = source->id;
    reuse.reuse_len = static_cast<uint32_t>(reuse_len);
  }
  m.sessions.emplace(fresh->id, std::move(fresh));
  return Lease(this, std::move(reuse), prompt.size());
}

void PrefixCache::End(Lease& lease, std::vector<int32_t> kv_tokens) {
  if (lease.cache_ != this) return;  // already ended, or another cache's
  lease.cache_ = nullptr;
  const std::string& id = lease.reuse_.session_id;
  Impl& m = *impl_;
  std::vector<std::string> evicted;
  {
    absl::MutexLock lock(&m.mu);
    if (m.options.enabled) {
      auto it = m.sessions.find(id);
      if (it == m.sessions.end()) {
        // Not tracked (cannot happen through the public API): track it anew.
        auto s = std::make_unique<Session>();
        s->id = id;
        it = m.sessions.emplace(id, std::move(s)).first;
      }
      Session* s = it->second.get();
      if (!s->busy) m.idle_lru.erase(s->last_used);
      m.Record(s, kv_tokens);
      s->prompt_tokens = std::min<uint64_t>(lease.prompt_len_, kv_tokens.size());
      s->busy = false;
      s->last_used = ++m.tick;
      if (s->node != nullptr) {
        m.idle_lru.emplace(s->last_used, s);
      } else {
        m.sessions.erase(it);  // nothing recorded: nothing worth keeping
        evicted.push_back(id);
      }
      auto more = m.EnforceBounds();
      evicted.insert(evicted.end(), more.begin(), more.end());
    } else {
      evicted.push_back(id);  // disabled: the stages free its KV now
    }
  }
  if (m.on_evict) {
    for (const std::string& e : evicted) m.on_evict(e);
  }
}

void PrefixCache::Abandon(Lease& lease) {
  if (lease.cache_ != this) return;
  lease.cache_ = nullptr;
  Impl& m = *impl_;
  {
    absl::MutexLock lock(&m.mu);
    m.Forget(lease.reuse_.session_id);
  }
  if (m.on_evict) m.on_evict(lease.reuse_.session_id);
}

size_t PrefixCache::size() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->sessions.size();
}

PrefixCache::Lease::Lease(Lease&& other) noexcept
    : cache_(std::exchange(other.cache_, nullptr)),
      reuse_(std::move(other.reuse_)),
      prompt_len_(other.prompt_len_) {}

PrefixCache::Lease& PrefixCache::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (cache_ != nullptr) cache_->Abandon(*this);
    cache_ = std::exchange(other.cache_, nullptr);
    reuse_ = std::move(other.reuse_);
    prompt_len_ = other.prompt_len_;
  }
  return *this;
}

PrefixCache::Lease::~Lease() {
  if (cache_ != nullptr) cache_->Abandon(*this);
}

}  // namespace ringlm
