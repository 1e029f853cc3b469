// The merge loop that SentencePiece BPE and byte-level BPE share. Internal to
// inference/tokenizer.
#ifndef RINGLM_INFERENCE_TOKENIZER_SYMBOL_MERGE_H_
#define RINGLM_INFERENCE_TOKENIZER_SYMBOL_MERGE_H_

#include <algorithm>
#include <cstddef>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

namespace ringlm::tokenizer_internal {

// Length of the UTF-8 sequence a lead byte announces, from its high nibble
// (llama.cpp's unicode_len_utf8). Continuation and invalid bytes count as 1;
// the sequence is NOT validated, so "\xC3" followed by 'A' is one 2-byte
// symbol, exactly as in llama.cpp.
inline size_t Utf8SequenceLength(char lead) {
  static constexpr unsigned char kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[static_cast<unsigned char>(lead) >> 4];
}

// Splits `text` into (unvalidated) UTF-8 characters, then repeatedly merges
// the adjacent pair with the smallest key, ties to the leftmost pair, until
// no adjacent pair has a key. `key(left, right)` returns nullopt for a pair
// that may not merge; `left` and `right` are adjacent views into `text`.
// Returns the surviving pieces, in order. O(n log n) in the text's length:
// the hot loop of tokenization.
template <typename KeyFn>
std::vector<std::string_view> MergeSymbols(std::string_view text, const KeyFn& key) {
  // A run of text in the doubly linked list; n == 0 once merged away.
  struct Symbol {
    int prev;
    int next;
    size_t offset;
    size_t n;
  };
  struct Bigram {
    int left;
    int right;
    double key;
    size_t size;  // bytes of the concatenation; detects stale entries
  };
  // Min-heap: smallest key first, ties to the leftmost pair.
  struct Greater {
    bool operator()(const Bigram& l, const Bigram& r) const {
      return l.key > r.key || (l.key == r.key && l.left > r.left);
    }
  };

  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t n = std::min(Utf8SequenceLength(text[offset]), text.size() - offset);
    const int i = static_cast<int>(symbols.size());
    symbols.push_back(Symbol{
        .prev = i - 1, .next = offset + n == text.size() ? -1 : i + 1, .offset = offset, .n = n});
    offset += n;
  }
  std::priority_queue<Bigram, std::vector<Bigram>, Greater> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const std::optional<double> k = key(text.substr(l.offset, l.n), text.substr(r.offset, r.n));
    if (k.has_value()) queue.push(Bigram{left, right, *k, l.n + r.n});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Stale: a side was merged away or grew. (Symbols only grow rightwards
    // and stay adjacent, so the size check equals llama.cpp's text check.)
    if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  std::vector<std::string_view> pieces;
  if (symbols.empty()) return pieces;
  for (int i = 0; i != -1; i = symbols[i].next) {
    pieces.push_back(text.substr(symbols[i].offset, symbols[i].n));
  }
  return pieces;
}

}  // namespace ringlm::tokenizer_internal

#endif  // RINGLM_INFERENCE_TOKENIZER_SYMBOL_MERGE_H_
