// Internal to inference/tokenizer: the "gpt2" (byte-level BPE) tokenizer.
// Users create it through Tokenizer::Create.

#ifndef RINGLM_INFERENCE_TOKENIZER_BPE_TOKENIZER_H_
#define RINGLM_INFERENCE_TOKENIZER_BPE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "inference/tokenizer/bpe_pre_tokenizer.h"
#include "inference/tokenizer/tokenizer.h"
#include "inference/tokenizer/vocab_index.h"

namespace ringlm::tokenizer_internal {

// llama.cpp's LLAMA_VOCAB_TYPE_BPE: tokenizer_st_partition for special
// tokens, unicode_regex_split for pre-tokens, llm_tokenizer_bpe_session for
// the merges, token_to_piece / llama_decode_text for output.
// Same contract as Tokenizer (immutable, thread-safe).
class BpeTokenizer final : public Tokenizer {
 public:
  // Validates `vocab` (model "gpt2") and its merges and pre-tokenizer.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(Vocabulary vocab);

  std::string TokenToPiece(int32_t id) const override;

 private:
  std::vector<int32_t> EncodeFragments(std::string_view text, std::span<const Fragment> fragments,
                                       RunPosition position) const override;

  BpeTokenizer(std::unique_ptr<const VocabIndex> index, PreTokenizerConfig config,
               absl::flat_hash_map<std::string, int32_t> ranks);

  // Appends the tokens of one raw-text fragment.
  void EncodeFragment(std::string_view text, std::vector<int32_t>& out) const;
  // Appends the tokens of one byte-level pre-token.
  void EncodeWord(std::string_view word, std::vector<int32_t>& out) const;
  // Rank of merging `left` and `right`, or -1.
  int32_t Rank(std::string_view left, std::string_view right) const;

  const PreTokenizerConfig config_;
  // "left right" -> rank (index in Vocabulary::merges; the first wins on duplicates).
  const absl::flat_hash_map<std::string, int32_t> ranks_;
};

}  // namespace ringlm::tokenizer_internal

#endif  // RINGLM_INFERENCE_TOKENIZER_BPE_TOKENIZER_H_
