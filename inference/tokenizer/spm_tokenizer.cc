#include "inference/tokenizer/spm_tokenizer.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ringlm::tokenizer_internal {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁"

// Length of the UTF-8 sequence a lead byte announces, from its high nibble
// (llama.cpp's unicode_len_utf8). Continuation and invalid bytes count as 1;
// the sequence is NOT validated, so "\xC3" followed by 'A' is one 2-byte symbol
// exactly as in llama.cpp.
size_t Utf8SequenceLength(char lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[static_cast<uint8_t>(lead) >> 4];
}

// Value of a hex digit already validated by VocabIndex::Build.
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// llama_escape_whitespace: every ' ' becomes U+2581.
std::string EscapeWhitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (char c : text) {
    if (c == ' ') {
      out.append(kSpaceMarker);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// A run of input bytes in the doubly linked list of the merge loop. A symbol
// merged into its left neighbour keeps n == 0.
struct Symbol {
  int prev;
  int next;
  size_t offset;
  size_t n;
};

// A candidate merge of two adjacent symbols whose concatenation is a piece.
struct Bigram {
  int left;
  int right;
  float score;
  size_t size;  // bytes of the concatenation; detects stale entries
};

// Max-heap order: highest score first, ties to the leftmost pair
// (llm_bigram_spm::comparator).
struct BigramLess {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

}  // namespace

SpmTokenizer::SpmTokenizer(std::unique_ptr<const VocabIndex> index) : Tokenizer(std::move(index)) {}

std::vector<int32_t> SpmTokenizer::Encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  const Vocabulary& vocab = index().vocab();
  std::vector<int32_t> out;
  out.reserve(text.size() / 2 + 2);

  // Like SentencePiece, the first raw fragment and each one after a special
  // token get a leading space.
  bool previous_is_special = true;
  if (add_special && vocab.add_bos) out.push_back(vocab.bos_id);  // Create checked bos_id

  for (const Fragment& fragment : PartitionSpecialTokens(text, index(), parse_special)) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      previous_is_special = true;
      continue;
    }
    std::string raw;
    if (vocab.add_space_prefix && previous_is_special) raw.push_back(' ');
    raw.append(fragment.text);
    EncodeFragment(EscapeWhitespace(raw), out);
    previous_is_special = false;
  }

  if (add_special && vocab.add_eos) out.push_back(vocab.eos_id);  // Create checked eos_id
  return out;
}

// Hot loop of prompt processing: O(n log n) in the fragment's length.
void SpmTokenizer::EncodeFragment(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  const VocabIndex& vocab = index();

  // Start from (unvalidated) UTF-8 characters.
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t n = std::min(Utf8SequenceLength(text[offset]), text.size() - offset);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back(Symbol{.prev = index - 1,
                             .next = offset + n == text.size() ? -1 : index + 1,
                             .offset = offset,
                             .n = n});
    offset += n;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
  auto try_add_bigram = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view pair =
        text.substr(symbols[left].offset, symbols[left].n + symbols[right].n);
    const int32_t id = vocab.Find(pair);
    if (id < 0) return;
    queue.push(Bigram{.left = left, .right = right, .score = vocab.score(id), .size = pair.size()});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add_bigram(i - 1, i);

  // Repeatedly merge the best adjacent pair.
  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Skip pairs invalidated by an earlier merge.
    if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add_bigram(left.prev, bigram.left);
    try_add_bigram(bigram.left, left.next);
  }

  // Emit the surviving symbols. A merged symbol is always a piece, so only an
  // unmerged character can be missing from the vocabulary; llama.cpp's
  // "resegment via recorded merges" step therefore never applies and is
  // omitted. Missing characters fall back to one byte token per byte.
  for (int i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].offset, symbols[i].n);
    if (const int32_t id = vocab.Find(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char byte : piece) out.push_back(vocab.ByteToken(static_cast<uint8_t>(byte)));
  }
}

std::string SpmTokenizer::TokenToPiece(int32_t id) const {
  const VocabIndex& vocab = index();
  if (!vocab.IsValid(id)) return {};
  const std::string& text = vocab.text(id);
  switch (vocab.type(id)) {
    case TokenType::kNormal: {
      std::string out;
      out.reserve(text.size());
      for (size_t i = 0; i < text.size();) {
        if (text.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
          out.push_back(' ');
          i += kSpaceMarker.size();
        } else {
          out.push_back(text[i++]);
        }
      }
      return out;
    }
    case TokenType::kUserDefined:
      return text;  // verbatim, U+2581 included (as llama.cpp)
    case TokenType::kByte: {
      // Create checked the "<0xNN>" shape.
      return std::string(1, static_cast<char>(HexValue(text[3]) * 16 + HexValue(text[4])));
    }
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUnused:
    case TokenType::kUndefined:
      return {};
  }
  return {};
}

}  // namespace ringlm::tokenizer_internal
