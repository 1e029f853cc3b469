#include "inference/grammar/token_vocabulary.h"

#include <algorithm>
#include <numeric>

namespace ringlm::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes)
    : token_bytes_(std::move(token_bytes)) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < token_bytes_.size(); ++id) {
    const size_t len = token_bytes_[id].size();
    if (len > 0 && len <= UINT16_MAX) order.push_back(static_cast<int32_t>(id));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return token_bytes_[a] < token_bytes_[b]; });
  // Sorted strings give the trie in preorder: each token adds one node per
  // byte past its common prefix with the previous token.
  std::vector<uint32_t> path;  // path[k] = node at depth k + 1.
  const std::string* previous = nullptr;
  for (int32_t id : order) {
    const std::string& s = token_bytes_[id];
    size_t common = 0;
    if (previous != nullptr) {
      const size_t limit = std::min(previous->size(), s.size());
      while (common < limit && (*previous)[common] == s[common]) ++common;
    }
    while (path.size() > common) {
      trie_[path.back()].subtree_end = static_cast<uint32_t>(trie_.size());
      path.pop_back();
    }
    for (size_t k = common; k < s.size(); ++k) {
      path.push_back(static_cast<uint32_t>(trie_.size()));
      const uint32_t tokens = static_cast<uint32_t>(trie_tokens_.size());
      trie_.push_back(
          TrieNode{0, tokens, tokens, static_cast<uint16_t>(k + 1), 0, static_cast<uint8_t>(s[k])});
    }
    TrieNode& last = trie_[path.back()];
    if (last.tokens_begin == last.tokens_end) last.tokens_begin = trie_tokens_.size();
    trie_tokens_.push_back(id);
    last.tokens_end = static_cast<uint32_t>(trie_tokens_.size());
    previous = &s;
  }
  for (uint32_t node : path) trie_[node].subtree_end = static_cast<uint32_t>(trie_.size());
  // Heights of all-plain subtrees, children before parents.
  for (size_t i = trie_.size(); i-- > 0;) {
    uint32_t height = 0;
    for (size_t c = i + 1; c < trie_[i].subtree_end; c = trie_[c].subtree_end) {
      if (!IsPlainByte(trie_[c].byte) || trie_[c].plain_height == kNotPlain) {
        height = kNotPlain;
        break;
      }
      height = std::max<uint32_t>(height, trie_[c].plain_height + 1u);
    }
    trie_[i].plain_height = static_cast<uint16_t>(std::min<uint32_t>(height, kNotPlain));
  }
}

}  // namespace ringlm::grammar
