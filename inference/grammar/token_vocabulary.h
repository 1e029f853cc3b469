// TokenVocabulary: every token id's byte string, arranged for fast masks.
#ifndef RINGLM_INFERENCE_GRAMMAR_TOKEN_VOCABULARY_H_
#define RINGLM_INFERENCE_GRAMMAR_TOKEN_VOCABULARY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ringlm::grammar {

// Built once per model from the byte string of each token id (index = id).
// An empty string marks a token the grammar never allows (control tokens,
// EOS: their handling is the caller's, see GrammarMatcher). The tokens form a
// byte trie stored in preorder, so a mask walks shared prefixes once and skips
// a whole subtree as soon as its prefix is rejected.
// Cost: ~16 bytes per trie node (a 128k byte-level BPE vocabulary has ~400k)
// plus the strings. Immutable after construction: thread-safe to share (hold
// it in a shared_ptr beside the model).
class TokenVocabulary {
 public:
  // One trie node: the edge byte into it, its depth (= prefix length), the
  // preorder index just past its subtree, and the ids whose bytes end here
  // (trie_tokens()[tokens_begin, tokens_end)). The tokens of a subtree are
  // contiguous: [tokens_begin of the node, tokens_begin of subtree_end).
  // plain_height: if every byte below this node is "plain" (printable ASCII
  // other than '"' and '\'), the subtree's height; else kNotPlain. Lets a
  // matcher inside a JSON string accept a whole subtree at once.
  struct TrieNode {
    uint32_t subtree_end;
    uint32_t tokens_begin;
    uint32_t tokens_end;
    uint16_t depth;
    uint16_t plain_height;
    uint8_t byte;
  };
  static constexpr uint16_t kNotPlain = UINT16_MAX;

  static bool IsPlainByte(uint8_t b) { return b >= 0x20 && b < 0x7f && b != '"' && b != '\\'; }

  // Tokens longer than 65535 bytes are treated as never allowed.
  explicit TokenVocabulary(std::vector<std::string> token_bytes);

  size_t size() const { return token_bytes_.size(); }
  const std::string& token_bytes(int32_t id) const { return token_bytes_[id]; }

  // Preorder trie without the root (depth-1 nodes first in byte order).
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }
  // Start of the token range of the subtree rooted at preorder index `node`.
  uint32_t SubtreeTokensEnd(uint32_t node) const {
    const uint32_t end = trie_[node].subtree_end;
    return end < trie_.size() ? trie_[end].tokens_begin
                              : static_cast<uint32_t>(trie_tokens_.size());
  }

 private:
  std::vector<std::string> token_bytes_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
};

}  // namespace ringlm::grammar

#endif  // RINGLM_INFERENCE_GRAMMAR_TOKEN_VOCABULARY_H_
