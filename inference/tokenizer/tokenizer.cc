#include "inference/tokenizer/tokenizer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "inference/tokenizer/bpe_pre_tokenizer.h"
#include "inference/tokenizer/bpe_tokenizer.h"
#include "inference/tokenizer/spm_tokenizer.h"
#include "inference/tokenizer/vocab_index.h"

namespace ringlm {
namespace {

// llama.cpp's llama_vocab::impl::detokenize clean_spaces passes, ported
// in place index for index (including its quirks) so the output is identical.
void CleanSpaces(std::string& text) {
  // First pass: " ?", " !", " .", " ," lose the space.
  int64_t total = static_cast<int64_t>(text.size());
  const int64_t total1 = total;
  total = total ? 1 : 0;
  for (int64_t i = 1; i < total1; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  }
  // Second pass: a lone apostrophe between spaces, " ' ", becomes "'".
  const int64_t total2 = total;
  total = total ? 1 : 0;
  for (int64_t i = 1; i < total2; ++i) {
    const char x = text[i];
    if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;           // remove the previous space
      text[++i] = '\0';  // skip the next space
    }
    text[total++] = x;
  }
  // Third pass: " 's", " 'm", " 're", " 've" lose the space (" 't", " 'd",
  // " 'll" keep it, as in llama.cpp).
  const int64_t total3 = total;
  total = total ? 1 : 0;
  for (int64_t i = 1; i < total3; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (i + 2 < total3 && x1 != 't' && x1 != 'd') {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    text[total++] = x;
  }
  text.resize(static_cast<size_t>(total));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(Vocabulary vocab) {
  if (vocab.model != "llama" && vocab.model != "gpt2") {
    // Other tokenizer.ggml.model values llama.cpp (b4748) knows.
    for (std::string_view known : {"bert", "t5", "rwkv", "no_vocab", "none"}) {
      if (vocab.model == known) {
        return absl::UnimplementedError(absl::StrCat(
            "tokenizer model \"", vocab.model, "\" is not implemented (only \"llama\", \"gpt2\")"));
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown tokenizer model \"", absl::CHexEscape(vocab.model), "\""));
  }
  if (vocab.model == "gpt2") return tokenizer_internal::BpeTokenizer::Create(std::move(vocab));
  absl::StatusOr<std::unique_ptr<const tokenizer_internal::VocabIndex>> index =
      tokenizer_internal::VocabIndex::Build(std::move(vocab));
  if (!index.ok()) return index.status();
  return std::make_unique<tokenizer_internal::SpmTokenizer>(*std::move(index));
}

Tokenizer::Tokenizer(std::unique_ptr<const tokenizer_internal::VocabIndex> index, bool clean_spaces)
    : index_(std::move(index)), clean_spaces_(clean_spaces) {}

Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  return EncodeFragments(text,
                         tokenizer_internal::PartitionSpecialTokens(text, *index_, parse_special),
                         {.add_bos = add_special, .add_eos = add_special});
}

std::vector<int32_t> Tokenizer::EncodeSegments(std::span<const PromptSegment> segments,
                                               bool add_special) const {
  std::vector<int32_t> out;
  size_t run_begin = 0;
  for (size_t i = 0; i <= segments.size(); ++i) {
    const bool end = i == segments.size();
    if (!end && segments[i].ids.empty()) continue;
    const std::vector<int32_t> run = EncodeRun(segments.subspan(run_begin, i - run_begin),
                                               {.add_bos = add_special && run_begin == 0,
                                                .add_eos = add_special && end,
                                                .continues = run_begin > 0});
    out.insert(out.end(), run.begin(), run.end());
    if (end) break;
    out.insert(out.end(), segments[i].ids.begin(), segments[i].ids.end());
    run_begin = i + 1;
  }
  return out;
}

std::vector<int32_t> Tokenizer::EncodeRun(std::span<const PromptSegment> segments,
                                          RunPosition position) const {
  std::string joined;
  size_t size = 0;
  for (const PromptSegment& segment : segments) size += segment.text.size();
  joined.reserve(size);
  // Content spans, adjacent ones merged, so the ranges stay sorted and disjoint.
  std::vector<tokenizer_internal::TextRange> plain;
  for (const PromptSegment& segment : segments) {
    if (segment.text.empty()) continue;
    const size_t begin = joined.size();
    joined += segment.text;
    if (segment.is_control) continue;
    if (!plain.empty() && plain.back().end == begin) {
      plain.back().end = joined.size();
    } else {
      plain.push_back({begin, joined.size()});
    }
  }
  return EncodeFragments(
      joined,
      tokenizer_internal::PartitionSpecialTokens(joined, *index_, /*parse_special=*/true, plain),
      position);
}

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
  if (clean_spaces_) CleanSpaces(out);
  return out;
}

int32_t Tokenizer::n_vocab() const { return index_->n_tokens(); }
int32_t Tokenizer::bos_id() const { return index_->vocab().bos_id; }
int32_t Tokenizer::eos_id() const { return index_->vocab().eos_id; }
bool Tokenizer::IsEndOfGeneration(int32_t id) const { return index_->IsEndOfGeneration(id); }
bool Tokenizer::IsValid(int32_t id) const { return index_->IsValid(id); }
const Vocabulary& Tokenizer::vocabulary() const { return index_->vocab(); }

absl::StatusOr<bool> BpeDefaultAddBos(std::string_view pre) {
  absl::StatusOr<tokenizer_internal::PreTokenizerConfig> config =
      tokenizer_internal::PreTokenizerConfigFor(pre);
  if (!config.ok()) return config.status();
  return config->default_add_bos;
}

}  // namespace ringlm
