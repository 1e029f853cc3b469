// Internal to inference/synth: the model-specific halves of
// ConvertHfTokenizer (hf_tokenizer_model.cc), over parsed JSON.
#ifndef RINGLM_INFERENCE_TOKENIZER_HF_TOKENIZER_INTERNAL_H_
#define RINGLM_INFERENCE_TOKENIZER_HF_TOKENIZER_INTERNAL_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inference/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace ringlm::synth_internal {

// Which ringlm tokenizer a tokenizer.json maps onto.
enum class HfModelKind {
  kByteLevelBpe,      // "gpt2"
  kSentencePieceBpe,  // "llama"
};

// Decides from model.type, byte_fallback, normalizer, pre_tokenizer and
// decoder (see ConvertHfTokenizer's rules 2 and 3). `file` names
// tokenizer.json in messages. Unimplemented for anything else.
absl::StatusOr<HfModelKind> ClassifyModel(const nlohmann::json& root, const std::string& file);

// model.merges in rank order, each as (left, right). Accepts "a b" strings
// (split at the first ' ' after position 0) and ["a", "b"] pairs.
// InvalidArgument naming the first malformed merge by index.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseMerges(
    const nlohmann::json& merges, const std::string& file);

// tokenizer.ggml.pre for a byte-level BPE pre_tokenizer, from its Split
// regexes in order (a ByteLevel with use_regex counts as GPT-2's regex):
// Llama 3's alone -> "llama-bpe", Qwen 2's -> "qwen2", GPT-2's -> "gpt-2",
// Mistral's tekken regex -> "tekken"; DeepSeek V3's three (\p{N}{1,3}, the
// CJK/kana run, the word regex) -> "deepseek-v3". Unimplemented naming
// `file` and quoting the start of the first Split regex that is in none of
// these, or of every regex when each is known but the sequence is not;
// Unimplemented for a ByteLevel with add_prefix_space and for a Split
// behavior other than "Isolated".
absl::StatusOr<std::string> ByteLevelPreName(const nlohmann::json& root, const std::string& file);

// SentencePiece-style: whether the normalizer / pre_tokenizer prepend "▁".
bool SentencePieceAddsSpacePrefix(const nlohmann::json& root);

// Scores for the SPM tokenizer: -(r + 1) for the piece that merge rank r
// (the first one making it) creates, 0 for other pieces. Precondition:
// `vocab.pieces` is complete. InvalidArgument when a merge names a piece, or
// makes one, that is not in `vocab.pieces`.
absl::StatusOr<std::vector<float>> ScoresFromMerges(
    const std::vector<std::string>& pieces,
    const std::vector<std::pair<std::string, std::string>>& merges, const std::string& file);

// The text of a JSON string, or "" (the JSON is untrusted: no exceptions).
std::string StringOr(const nlohmann::json& j, const char* key, std::string fallback = "");

}  // namespace ringlm::synth_internal

#endif  // RINGLM_INFERENCE_TOKENIZER_HF_TOKENIZER_INTERNAL_H_
