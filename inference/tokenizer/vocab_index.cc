#include "inference/tokenizer/vocab_index.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <list>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace ringlm::tokenizer_internal {
namespace {

// Texts llama.cpp (b4748, llama_vocab::impl::load) forces to control type and
// treats as end of generation: the EOG list, EOT/EOM candidates and the FIM
// pad/repo/file-separator tokens.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>",    "<|im_end|>", "<|end|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>",   "<｜end▁of▁sentence｜>",
    "<|fim_pad|>",   "<fim-pad>",  "<PAD>",   "<|fim_repo|>",
    "<|repo_name|>", "<fim-repo>", "<REPO>",  "<|file_sep|>",
};

// Texts llama.cpp forces to control type without making them EOG (FIM prefix,
// suffix and middle tokens).
constexpr std::string_view kControlOnlyTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<PRE>",
    "<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>",  "<SUF>",
    "<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>",   "<MID>",
};

bool IsHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// llama.cpp reads a byte token's value as strtol(text.substr(3, 2), 16); we
// accept only texts of exactly that shape.
bool IsBytePiece(std::string_view text) {
  return text.size() == 6 && text.substr(0, 3) == "<0x" && IsHexDigit(text[3]) &&
         IsHexDigit(text[4]) && text[5] == '>';
}

absl::Status CheckSpecialId(std::string_view name, int32_t id, int32_t n_tokens) {
  if (id < -1 || id >= n_tokens) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "vocabulary %s_id %d is out of range (-1 for none, or 0..%d)", name, id, n_tokens - 1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<const VocabIndex>> VocabIndex::Build(Vocabulary vocab) {
  const size_t n = vocab.pieces.size();
  if (n == 0) return absl::InvalidArgumentError("vocabulary has no pieces");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("vocabulary has ", n, " pieces; at most ",
                                                   std::numeric_limits<int32_t>::max(),
                                                   " are supported"));
  }
  const auto n_tokens = static_cast<int32_t>(n);
  if (vocab.scores.empty()) vocab.scores.assign(n, 0.0f);
  if (vocab.types.empty()) vocab.types.assign(n, TokenType::kNormal);
  if (vocab.scores.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary has ", n, " pieces but ", vocab.scores.size(), " scores"));
  }
  if (vocab.types.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary has ", n, " pieces but ", vocab.types.size(), " token types"));
  }
  for (const auto& [name, id] : {std::pair{"bos", vocab.bos_id}, std::pair{"eos", vocab.eos_id},
                                 std::pair{"unk", vocab.unk_id}, std::pair{"pad", vocab.pad_id},
                                 std::pair{"eot", vocab.eot_id}, std::pair{"eom", vocab.eom_id}}) {
    if (absl::Status s = CheckSpecialId(name, id, n_tokens); !s.ok()) return s;
  }
  if (vocab.add_bos && vocab.bos_id < 0) {
    return absl::InvalidArgumentError("vocabulary sets add_bos but has no bos_id");
  }
  if (vocab.add_eos && vocab.eos_id < 0) {
    return absl::InvalidArgumentError("vocabulary sets add_eos but has no eos_id");
  }

  std::unique_ptr<VocabIndex> index(new VocabIndex());
  index->piece_to_id_.reserve(n);
  for (int32_t id = 0; id < n_tokens; ++id) {
    std::string& piece = vocab.pieces[id];
    // llama.cpp renames empty pieces so that every piece has a unique text.
    if (piece.empty()) piece = absl::StrCat("[EMPTY_", id, "]");
    if (std::isnan(vocab.scores[id])) {
      return absl::InvalidArgumentError(absl::StrCat("vocabulary score of token ", id, " is NaN"));
    }
    const auto type = static_cast<int32_t>(vocab.types[id]);
    if (type < static_cast<int32_t>(TokenType::kUndefined) ||
        type > static_cast<int32_t>(TokenType::kByte)) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", id, " has invalid token type ", type, " (valid: 0..6)"));
    }
    if (vocab.types[id] == TokenType::kByte && !IsBytePiece(piece)) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", id, " has byte type but its piece \"", absl::CHexEscape(piece),
                       "\" is not of the form <0xNN>"));
    }
    auto [it, inserted] = index->piece_to_id_.try_emplace(piece, id);
    if (!inserted) {
      // llama.cpp asserts id_to_token.size() == token_to_id.size().
      return absl::InvalidArgumentError(absl::StrCat("tokens ", it->second, " and ", id,
                                                     " have the same piece \"",
                                                     absl::CHexEscape(piece), "\""));
    }
  }

  // Byte fallback table (llama_vocab::byte_to_token, plus unk as a last resort
  // where llama.cpp would throw). Only SentencePiece vocabularies use it; a
  // byte-level ("gpt2") vocabulary spells every byte as a code point instead.
  const bool needs_byte_fallback = vocab.model != "gpt2";
  if (!needs_byte_fallback)
    std::fill(std::begin(index->byte_tokens_), std::end(index->byte_tokens_), -1);
  for (int b = 0; needs_byte_fallback && b < 256; ++b) {
    int32_t id = index->Find(absl::StrFormat("<0x%02X>", b));
    if (id < 0) id = index->Find(std::string(1, static_cast<char>(b)));
    if (id < 0) id = vocab.unk_id;
    if (id < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "vocabulary has no token for byte 0x%02X (neither \"<0x%02X>\" nor the raw byte) and "
          "no unk_id to fall back to",
          b, b));
    }
    index->byte_tokens_[b] = id;
  }

  // Effective types: llama.cpp overrides control-looking tokens to control.
  index->types_ = vocab.types;
  for (const int32_t id : {vocab.eos_id, vocab.eot_id, vocab.eom_id}) {
    if (id >= 0) index->eog_.insert(id);
  }
  for (std::string_view text : kEndOfGenerationTexts) {
    if (int32_t id = index->Find(text); id >= 0) {
      index->types_[id] = TokenType::kControl;
      index->eog_.insert(id);
    }
  }
  for (std::string_view text : kControlOnlyTexts) {
    if (int32_t id = index->Find(text); id >= 0) index->types_[id] = TokenType::kControl;
  }

  // Special-token cache: control, user-defined and unknown, longest first.
  for (int32_t id = 0; id < n_tokens; ++id) {
    const TokenType t = index->types_[id];
    if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) {
      index->special_tokens_.push_back(id);
    }
  }
  std::stable_sort(
      index->special_tokens_.begin(), index->special_tokens_.end(),
      [&vocab](int32_t a, int32_t b) { return vocab.pieces[a].size() > vocab.pieces[b].size(); });

  index->vocab_ = std::move(vocab);
  return std::unique_ptr<const VocabIndex>(std::move(index));
}

int32_t VocabIndex::Find(std::string_view text) const {
  // This abseil's absl::string_view is its own type, not std::string_view.
  auto it = piece_to_id_.find(absl::string_view(text.data(), text.size()));
  return it == piece_to_id_.end() ? -1 : it->second;
}

namespace {

// Whether [begin, end) overlaps one of `ranges` (sorted and disjoint).
bool Overlaps(std::span<const TextRange> ranges, size_t begin, size_t end) {
  // The first range that ends after `begin`; it overlaps if it starts before `end`.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                             [](size_t pos, const TextRange& r) { return pos < r.end; });
  return it != ranges.end() && it->begin < end;
}

}  // namespace

std::vector<Fragment> PartitionSpecialTokens(std::string_view text, const VocabIndex& index,
                                             bool parse_special,
                                             std::span<const TextRange> plain_ranges) {
  std::list<Fragment> fragments;
  if (text.empty()) return {};
  fragments.push_back(Fragment{.token = -1, .text = text});
  for (const int32_t id : index.special_tokens()) {
    const TokenType type = index.type(id);
    const bool control = type == TokenType::kControl || type == TokenType::kUnknown;
    if (!parse_special && control) {
      continue;  // user-defined tokens are matched even without parse_special
    }
    const bool check_ranges = control && !plain_ranges.empty();
    const std::string_view special = index.text(id);
    for (auto it = fragments.begin(); it != fragments.end(); ++it) {
      if (it->token >= 0) continue;
      // Split this raw fragment at every occurrence, left to right.
      std::string_view rest = it->text;
      bool split = false;
      size_t from = 0;
      for (size_t match = rest.find(special); match != std::string_view::npos;
           match = rest.find(special, from)) {
        const size_t begin = static_cast<size_t>(rest.data() - text.data()) + match;
        if (check_ranges && Overlaps(plain_ranges, begin, begin + special.size())) {
          from = match + 1;  // plain text here; look further on
          continue;
        }
        if (match > 0) fragments.insert(it, Fragment{.token = -1, .text = rest.substr(0, match)});
        fragments.insert(it, Fragment{.token = id, .text = {}});
        rest.remove_prefix(match + special.size());
        from = 0;
        split = true;
      }
      if (!split) continue;
      if (rest.empty()) {
        it = std::prev(fragments.erase(it));
      } else {
        it->text = rest;
      }
    }
  }
  return std::vector<Fragment>(fragments.begin(), fragments.end());
}

}  // namespace ringlm::tokenizer_internal
