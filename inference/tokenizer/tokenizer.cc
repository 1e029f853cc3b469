#include "inference/tokenizer/tokenizer.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "inference/tokenizer/spm_tokenizer.h"
#include "inference/tokenizer/vocab_index.h"

namespace ringlm {

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(Vocabulary vocab) {
  if (vocab.model != "llama") {
    // Other tokenizer.ggml.model values llama.cpp (b4748) knows.
    for (std::string_view known : {"gpt2", "bert", "t5", "rwkv", "no_vocab", "none"}) {
      if (vocab.model == known) {
        return absl::UnimplementedError(absl::StrCat("tokenizer model \"", vocab.model,
                                                     "\" is not implemented (only \"llama\")"));
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown tokenizer model \"", absl::CHexEscape(vocab.model), "\""));
  }
  absl::StatusOr<std::unique_ptr<const tokenizer_internal::VocabIndex>> index =
      tokenizer_internal::VocabIndex::Build(std::move(vocab));
  if (!index.ok()) return index.status();
  return std::make_unique<tokenizer_internal::SpmTokenizer>(*std::move(index));
}

Tokenizer::Tokenizer(std::unique_ptr<const tokenizer_internal::VocabIndex> index)
    : index_(std::move(index)) {}

Tokenizer::~Tokenizer() = default;

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string out;
  bool strip_leading_space = index_->vocab().add_space_prefix;
  for (const int32_t id : ids) {
    std::string piece = TokenToPiece(id);
    // llama.cpp strips at most one ' ' and only from the first token's piece,
    // even when that piece is empty (a BOS).
    if (strip_leading_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_leading_space = false;
    out += piece;
  }
  return out;
}

int32_t Tokenizer::n_vocab() const { return index_->n_tokens(); }
int32_t Tokenizer::bos_id() const { return index_->vocab().bos_id; }
int32_t Tokenizer::eos_id() const { return index_->vocab().eos_id; }
bool Tokenizer::IsEndOfGeneration(int32_t id) const { return index_->IsEndOfGeneration(id); }
bool Tokenizer::IsValid(int32_t id) const { return index_->IsValid(id); }
const Vocabulary& Tokenizer::vocabulary() const { return index_->vocab(); }

}  // namespace ringlm
