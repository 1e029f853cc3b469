#include "inference/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
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
#include "inference/tokenizer/symbol_merge.h"
#include "inference/tokenizer/unicode.h"

namespace ringlm::tokenizer_internal {
namespace {

// Splits a merge like llama.cpp: at the first ' ' after position 0.
bool SplitMerge(std::string_view merge, std::string_view& left, std::string_view& right) {
  const size_t pos = merge.find(' ', 1);
  if (pos == std::string_view::npos) return false;
  left = merge.substr(0, pos);
  right = merge.substr(pos + 1);
  return !right.empty();
}

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

std::vector<int32_t> BpeTokenizer::EncodeFragments(std::string_view text,
                                                   std::span<const Fragment> fragments,
                                                   RunPosition position) const {
  // No dummy prefix here (as llama.cpp's BPE session): `continues` changes nothing.
  const Vocabulary& vocab = index().vocab();
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (position.add_bos && vocab.add_bos) out.push_back(vocab.bos_id);  // Create checked bos_id
  for (const Fragment& fragment : fragments) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
    } else {
      EncodeFragment(fragment.text, out);
    }
  }
  if (position.add_eos && vocab.add_eos) out.push_back(vocab.eos_id);  // Create checked eos_id
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

// Merges the lowest-ranked adjacent pair first (llm_tokenizer_bpe).
void BpeTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const std::vector<std::string_view> pieces = MergeSymbols(
      word, [&](std::string_view left, std::string_view right) -> std::optional<double> {
        const int32_t rank = Rank(left, right);
        if (rank < 0) return std::nullopt;
        return rank;
      });

  // A symbol missing from the vocabulary falls back to its single bytes, and
  // bytes that are not pieces either are dropped, exactly as in llama.cpp.
  for (const std::string_view piece : pieces) {
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
