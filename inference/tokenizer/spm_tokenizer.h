// Internal to inference/tokenizer: the "llama" (SentencePiece BPE with byte
// fallback) tokenizer. Users create it through Tokenizer::Create.

#ifndef RINGLM_INFERENCE_TOKENIZER_SPM_TOKENIZER_H_
#define RINGLM_INFERENCE_TOKENIZER_SPM_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "inference/tokenizer/tokenizer.h"
#include "inference/tokenizer/vocab_index.h"

namespace ringlm::tokenizer_internal {

// llama.cpp's LLAMA_VOCAB_TYPE_SPM: llm_tokenizer_spm_session for raw text,
// tokenize_impl for BOS/EOS and the space prefix, token_to_piece for output.
// Same contract as Tokenizer (immutable, thread-safe).
class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(std::unique_ptr<const VocabIndex> index);

  std::string TokenToPiece(int32_t id) const override;

 private:
  std::vector<int32_t> EncodeFragments(std::string_view text, std::span<const Fragment> fragments,
                                       RunPosition position) const override;
  // Appends the tokens of one escaped raw-text fragment (spaces already U+2581).
  void EncodeFragment(std::string_view text, std::vector<int32_t>& out) const;
};

}  // namespace ringlm::tokenizer_internal

#endif  // RINGLM_INFERENCE_TOKENIZER_SPM_TOKENIZER_H_
