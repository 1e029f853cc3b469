#include "inference/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "inference/tokenizer/unicode.h"

namespace ringlm::tokenizer_internal {
namespace {

// Length of the UTF-8 sequence a lead byte announces (llama.cpp's
// unicode_len_utf8). Byte-level words are always valid UTF-8.
size_t Utf8SequenceLength(char lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[static_cast<uint8_t>(lead) >> 4];
}

// Splits a merge like llama.cpp: at the first ' ' after position 0.
bool SplitMerge(std::string_view merge, std::string_view& left, std::string_view& right) {
  const size_t pos = merge.find(' ', 1);
  if (pos == std::string_view::npos) return false;
  left = merge.substr(0, pos);
  right = merge.substr(pos + 1);
  return !right.empty();
}

// A run of word bytes in the merge loop's linked list; n == 0 once merged away.
struct Symbol {
  int prev;
  int next;
  size_t offset;
  size_t n;
};

struct Bigram {
  int left;
  int right;
  int32_t rank;
  size_t size;  // bytes of the concatenation; detects stale entries
};

// Min-heap order: lowest rank first, ties to the leftmost pair
// (llm_bigram_bpe::comparator).
struct BigramGreater {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> BpeTokenizer::Create(Vocabulary vocab) {
  absl::StatusOr<PreTokenizerConfig> config = PreTokenizerConfigFor(vocab.pre);
  if (!config.ok()) return config.status();
  if (vocab.merges.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError("too many merges");
  }
  if (absl::Status s = CheckBpeMerges(vocab.pieces, vocab.merges); !s.ok()) return s;
  absl::flat_hash_map<std::string, int32_t> ranks;
  ranks.reserve(vocab.merges.size());
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    ranks.try_emplace(vocab.merges[i], static_cast<int32_t>(i));
  }
  absl::StatusOr<std::unique_ptr<const VocabIndex>> index = VocabIndex::Build(std::move(vocab));
  if (!index.ok()) return index.status();
  return std::unique_ptr<Tokenizer>(
      new BpeTokenizer(*std::move(index), *std::move(config), std::move(ranks)));
}

BpeTokenizer::BpeTokenizer(std::unique_ptr<const VocabIndex> index, PreTokenizerConfig config,
                           absl::flat_hash_map<std::string, int32_t> ranks)
    : Tokenizer(std::move(index), config.clean_spaces), config_(config), ranks_(std::move(ranks)) {}

std::vector<int32_t> BpeTokenizer::Encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  const Vocabulary& vocab = index().vocab();
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && vocab.add_bos) out.push_back(vocab.bos_id);  // Create checked bos_id
  for (const Fragment& fragment : PartitionSpecialTokens(text, index(), parse_special)) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
    } else {
      EncodeFragment(fragment.text, out);
    }
  }
  if (add_special && vocab.add_eos) out.push_back(vocab.eos_id);  // Create checked eos_id
  return out;
}

void BpeTokenizer::EncodeFragment(std::string_view text, std::vector<int32_t>& out) const {
  for (const std::string& word : PreTokenize(text, config_.kind)) {
    if (config_.ignore_merges) {
      if (const int32_t id = index().Find(word); id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    EncodeWord(word, out);
  }
}

int32_t BpeTokenizer::Rank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + 1 + right.size());
  key.append(left).push_back(' ');
  key.append(right);
  auto it = ranks_.find(key);
  return it == ranks_.end() ? -1 : it->second;
}

// Hot loop of prompt processing: O(n log n) in the word's length.
void BpeTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  std::vector<Symbol> symbols;
  symbols.reserve(word.size() / 2 + 1);
  for (size_t offset = 0; offset < word.size();) {
    const size_t n = std::min(Utf8SequenceLength(word[offset]), word.size() - offset);
    const int i = static_cast<int>(symbols.size());
    symbols.push_back(Symbol{
        .prev = i - 1, .next = offset + n == word.size() ? -1 : i + 1, .offset = offset, .n = n});
    offset += n;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramGreater> queue;
  auto try_add_bigram = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const int32_t rank = Rank(word.substr(l.offset, l.n), word.substr(r.offset, r.n));
    if (rank < 0) return;
    queue.push(Bigram{.left = left, .right = right, .rank = rank, .size = l.n + r.n});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add_bigram(i - 1, i);

  // Repeatedly merge the lowest-ranked adjacent pair.
  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Stale: a side was merged away or grew. (Symbols only grow rightwards and
    // stay adjacent, so the size check equals llama.cpp's text comparison.)
    if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add_bigram(left.prev, bigram.left);
    try_add_bigram(bigram.left, left.next);
  }

  // A symbol missing from the vocabulary falls back to its single bytes, and
  // bytes that are not pieces either are dropped, exactly as in llama.cpp.
  for (int i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = word.substr(symbols[i].offset, symbols[i].n);
    if (const int32_t id = index().Find(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (const char byte : piece) {
      if (const int32_t id = index().Find(std::string_view(&byte, 1)); id >= 0) out.push_back(id);
    }
  }
}

std::string BpeTokenizer::TokenToPiece(int32_t id) const {
  const VocabIndex& vocab = index();
  if (!vocab.IsValid(id)) return {};
  const std::string& text = vocab.text(id);
  switch (vocab.type(id)) {
    case TokenType::kNormal: {
      // llama_decode_text: each code point back to the byte it stands for.
      std::string out;
      out.reserve(text.size());
      for (const uint32_t cpt : DecodeUtf8Lenient(text)) {
        const int byte = CodepointToByte(cpt);
        if (byte >= 0) {
          out.push_back(static_cast<char>(byte));
          continue;
        }
        std::string utf8;
        AppendUtf8(cpt, utf8);
        absl::StrAppend(&out, "[UNK_BYTE_0x");
        for (const char c : utf8) absl::StrAppendFormat(&out, "%02x", static_cast<uint8_t>(c));
        absl::StrAppend(&out, text, "]");
      }
      return out;
    }
    case TokenType::kUserDefined:
      return text;
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kByte:
    case TokenType::kUnused:
    case TokenType::kUndefined:
      return {};
  }
  return {};
}

}  // namespace ringlm::tokenizer_internal

namespace ringlm {

absl::Status CheckBpeMerges(std::span<const std::string> pieces,
                            std::span<const std::string> merges) {
  // This abseil's absl::string_view is its own type, not std::string_view.
  absl::flat_hash_set<absl::string_view> known;
  known.reserve(pieces.size());
  for (const std::string& piece : pieces) known.insert(piece);
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string_view left, right;
    if (!tokenizer_internal::SplitMerge(merges[i], left, right)) {
      return absl::InvalidArgumentError(absl::StrCat("merge ", i, " \"",
                                                     absl::CHexEscape(merges[i]),
                                                     "\" is not two pieces separated by a space"));
    }
    for (std::string_view side : {left, right}) {
      if (!known.contains(absl::string_view(side.data(), side.size()))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "merge ", i, " \"", absl::CHexEscape(merges[i]), "\" names \"",
            absl::CHexEscape(std::string(side)), "\", which is not a piece of the vocabulary"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ringlm
