#include "chat/reply_store.h"

#include <utility>

namespace ringlm {

std::optional<std::vector<int32_t>> ExactReplyIds(const Tokenizer& tokenizer,
                                                  std::span<const int32_t> sampled,
                                                  std::string_view content) {
  if (content.empty()) return std::nullopt;
  size_t matched = 0;  // bytes of `content` spelled so far
  for (size_t i = 0; i < sampled.size(); ++i) {
    const std::string piece = tokenizer.TokenToPiece(sampled[i]);
    if (piece.empty() || content.substr(matched, piece.size()) != piece) return std::nullopt;
    matched += piece.size();
    if (matched == content.size()) {
      return std::vector<int32_t>(sampled.begin(), sampled.begin() + static_cast<ptrdiff_t>(i + 1));
    }
  }
  return std::nullopt;
}

ReplyStore::ReplyStore(ReplyStoreOptions options) : options_(options) {}

void ReplyStore::Record(std::string content, std::vector<int32_t> ids) {
  Entry entry{std::move(content), std::move(ids)};
  if (entry.content.empty() || entry.ids.empty() || entry.bytes() > options_.max_bytes ||
      options_.max_entries == 0) {
    return;
  }
  absl::MutexLock lock(&mu_);
  if (auto it = index_.find(entry.content); it != index_.end()) {
    const std::list<Entry>::iterator old = it->second;
    index_.erase(it);  // before its key's storage goes
    bytes_ -= old->bytes();
    lru_.erase(old);
  }
  bytes_ += entry.bytes();
  lru_.push_front(std::move(entry));
  index_.emplace(lru_.front().content, lru_.begin());
  EvictOverBounds();
}

std::optional<std::vector<int32_t>> ReplyStore::Find(std::string_view content) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(content);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);  // iterators and views stay valid
  return it->second->ids;
}

void ReplyStore::EvictOverBounds() {
  while (!lru_.empty() && (lru_.size() > options_.max_entries || bytes_ > options_.max_bytes)) {
    bytes_ -= lru_.back().bytes();
    index_.erase(lru_.back().content);
    lru_.pop_back();
  }
}

size_t ReplyStore::size() const {
  absl::MutexLock lock(&mu_);
  return lru_.size();
}

size_t ReplyStore::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace ringlm
