// The head's memory of replies it generated: a reply's content text, exactly
// as the client received it, and the token ids the model generated for it.
// When a later chat request carries that text back as an assistant message,
// the prompt uses those ids (see reply_splice.h) instead of re-tokenizing the
// text, which often gives other ids: so the prompt continues the sequence the
// stages hold KV for, through the end of the reply. The rule and its limits:
// docs/reply-ids.md.
#ifndef RINGLM_CHAT_REPLY_STORE_H_
#define RINGLM_CHAT_REPLY_STORE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {

struct ReplyStoreOptions {
  size_t max_entries = 4096;            // replies remembered
  size_t max_bytes = size_t{32} << 20;  // content bytes + 4 per id, summed
};

// The ids of `sampled` (every token a generation sampled, in order) that
// spell exactly `content`: the shortest prefix whose TokenToPiece texts,
// concatenated, equal `content` byte for byte. Every id in it must have a
// non-empty piece, so that no control token (an end-of-turn, say) hides
// inside. nullopt when `content` is empty or no prefix spells it: a stop
// string or tool call that cut the text inside a token, a character the
// streaming decoder replaced, trimmed text.
std::optional<std::vector<int32_t>> ExactReplyIds(const Tokenizer& tokenizer,
                                                  std::span<const int32_t> sampled,
                                                  std::string_view content);

// content -> ids, least recently used evicted past either bound. A content
// recorded again replaces its ids (the latest generation is the likeliest to
// be in the prefix cache). Independent of the prefix cache: recorded and used
// with --no-prefix-cache too, so a request gets the same prompt ids either
// way. Thread-safe; Find returns a copy, never a reference into the map.
class ReplyStore {
 public:
  explicit ReplyStore(ReplyStoreOptions options = {});
  ReplyStore(const ReplyStore&) = delete;
  ReplyStore& operator=(const ReplyStore&) = delete;

  // Precondition: `ids` spell `content` (ExactReplyIds). An entry larger than
  // max_bytes on its own, or an empty one, is not kept.
  void Record(std::string content, std::vector<int32_t> ids);
  // The ids recorded for `content` (marking it used), or nullopt.
  std::optional<std::vector<int32_t>> Find(std::string_view content);

  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::string content;
    std::vector<int32_t> ids;
    size_t bytes() const { return content.size() + ids.size() * sizeof(int32_t); }
  };
  void EvictOverBounds() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ReplyStoreOptions options_;
  mutable absl::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // most recently used first
  // Keys view the content of their own list node (list nodes never move).
  absl::flat_hash_map<std::string_view, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringlm

#endif  // RINGLM_CHAT_REPLY_STORE_H_
