// The head's prompt-prefix session map: which cached token sequence a new
// prompt can continue from. A radix tree over token ids.
#ifndef RINGLM_API_PREFIX_CACHE_H_
#define RINGLM_API_PREFIX_CACHE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "api/generation_backend.h"

namespace ringlm {

struct PrefixCacheOptions {
  bool enabled = true;            // --no-prefix-cache turns it off
  uint32_t max_sessions = 64;     // --max-sessions
  uint64_t max_tokens = 1 << 20;  // tokens recorded over all sessions
};

// Decides, for each request, which session it runs in and how much of its
// prompt is reused, and records what each session holds once the request
// ends. Least recently used sessions are evicted past the bounds; `on_evict`
// (e.g. GenerationBackend::DropSession) hears of each. An eviction only
// causes a later miss, never a wrong answer: stages check every reuse by
// digest. Thread-safe.
class PrefixCache {
 public:
  PrefixCache(PrefixCacheOptions options, std::function<void(const std::string&)> on_evict);
  ~PrefixCache();

  // A request's claim on a session, from Begin to End. Movable.
  class Lease;

  // Picks the recorded sequence with the longest common prefix with
  // `prompt`. The request continues its session in place only when that
  // session is idle and the match covers the whole prompt it last ran (the
  // same conversation, continued: at most its last reply is rewritten).
  // Otherwise (busy, or another conversation sharing only a prefix) the
  // request forks it into a new session and leaves it whole. reuse_len is
  // at most prompt.size() - 1 (at least one token is always computed). With
  // no match (or the cache disabled), a new session with reuse_len 0.
  Lease Begin(std::span<const int32_t> prompt);

  // What the stages now hold for the lease's session: the prompt and the
  // generated tokens whose KV was written (all but the last sampled one).
  // After a failed request call Abandon instead: the session is forgotten.
  void End(Lease& lease, std::vector<int32_t> kv_tokens);
  void Abandon(Lease& lease);

  size_t size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class PrefixCache::Lease {
 public:
  Lease(Lease&&) noexcept;
  Lease& operator=(Lease&&) noexcept;
  ~Lease();  // an un-ended lease is abandoned
  const PrefixReuse& reuse() const { return reuse_; }

 private:
  friend class PrefixCache;
  Lease(PrefixCache* cache, PrefixReuse reuse, size_t prompt_len)
      : cache_(cache), reuse_(std::move(reuse)), prompt_len_(prompt_len) {}
  PrefixCache* cache_ = nullptr;
  PrefixReuse reuse_;
  size_t prompt_len_ = 0;  // of the request, for End
};

}  // namespace ringlm

#endif  // RINGLM_API_PREFIX_CACHE_H_
