// Internal to inference/tokenizer: the validated vocabulary with the lookup
// tables every tokenizer model shares (text -> id, effective token types,
// special-token partitioning order, end-of-generation set, byte fallback).

#ifndef RINGLM_INFERENCE_TOKENIZER_VOCAB_INDEX_H_
#define RINGLM_INFERENCE_TOKENIZER_VOCAB_INDEX_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm::tokenizer_internal {

// Validated vocabulary plus derived tables, mirroring llama_vocab::impl::load.
//
// Contract: built once by `Build`, immutable afterwards (thread-safe reads).
// All id arguments must satisfy 0 <= id < n_tokens() unless stated otherwise.
class VocabIndex {
 public:
  // Validates `vocab` (see Tokenizer::Create) and builds the tables.
  static absl::StatusOr<std::unique_ptr<const VocabIndex>> Build(Vocabulary vocab);

  const Vocabulary& vocab() const { return vocab_; }
  int32_t n_tokens() const { return static_cast<int32_t>(vocab_.pieces.size()); }
  bool IsValid(int32_t id) const { return id >= 0 && id < n_tokens(); }

  // Id of the piece with exactly this text, or -1 (llama.cpp text_to_token).
  int32_t Find(std::string_view text) const;
  const std::string& text(int32_t id) const { return vocab_.pieces[id]; }
  float score(int32_t id) const { return vocab_.scores[id]; }
  // Type after llama.cpp's overrides (control-looking texts become kControl).
  TokenType type(int32_t id) const { return types_[id]; }

  // Tokens matched in raw text before tokenizing (control, user-defined and
  // unknown types), longest text first, ties by ascending id.
  std::span<const int32_t> special_tokens() const { return special_tokens_; }

  bool IsEndOfGeneration(int32_t id) const { return eog_.contains(id); }

  // Token for one raw byte: "<0xNN>" (upper-case hex), else the one-byte
  // piece, else unk (Build guarantees one of these exists). "llama" only: -1
  // for every byte of a "gpt2" vocabulary.
  int32_t ByteToken(uint8_t byte) const { return byte_tokens_[byte]; }

 private:
  VocabIndex() = default;

  Vocabulary vocab_;
  std::vector<TokenType> types_;
  absl::flat_hash_map<std::string, int32_t> piece_to_id_;
  std::vector<int32_t> special_tokens_;
  absl::flat_hash_set<int32_t> eog_;
  int32_t byte_tokens_[256] = {};
};

// A piece of the input after special-token partitioning: either a special
// token id, or a run of raw text (a view into the caller's string).
struct Fragment {
  int32_t token = -1;     // >= 0 for a special token
  std::string_view text;  // raw text when token < 0; never empty then
};

// A byte range [begin, end) of a text.
struct TextRange {
  size_t begin = 0;
  size_t end = 0;
};

// Splits `text` at occurrences of special-token texts, like llama.cpp's
// tokenizer_st_partition: tokens in special_tokens() order, each splitting
// every remaining raw fragment at all its non-overlapping left-to-right
// occurrences. Control and unknown tokens are skipped unless parse_special.
// Returns no fragments for empty text.
//
// `plain_ranges` (sorted, disjoint, within `text`) are spans where control
// and unknown tokens are never matched, as if parse_special were false there:
// an occurrence that overlaps one by a single byte stays raw text, and the
// search goes on from the next byte. User-defined tokens are matched
// everywhere (as llama.cpp does without parse_special). Cost: O(number of
// special tokens x text size), as before; each rejected occurrence adds a
// binary search over the ranges.
std::vector<Fragment> PartitionSpecialTokens(std::string_view text, const VocabIndex& index,
                                             bool parse_special,
                                             std::span<const TextRange> plain_ranges = {});

}  // namespace ringlm::tokenizer_internal

#endif  // RINGLM_INFERENCE_TOKENIZER_VOCAB_INDEX_H_
