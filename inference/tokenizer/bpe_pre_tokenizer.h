// Internal to inference/tokenizer: the pre-tokenizer of byte-level BPE
// vocabularies, i.e. llama.cpp's unicode_regex_split for the regexes that
// tokenizer.ggml.pre selects, hand-coded over code points (no regex engine).

#ifndef RINGLM_INFERENCE_TOKENIZER_BPE_PRE_TOKENIZER_H_
#define RINGLM_INFERENCE_TOKENIZER_BPE_PRE_TOKENIZER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ringlm::tokenizer_internal {

// The split rules implemented; the regexes are llama.cpp's (llm_tokenizer_bpe).
enum class PreTokenizerKind {
  // "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|
  //  \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
  kLlama3,
  // The same with \p{N} (single digits) instead of \p{N}{1,3}.
  kQwen2,
  // "'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
  kGpt2,
  // DeepSeek V3's three regexes, one after the other (split_sequence.h).
  kDeepseekV3,
  // DeepSeek LLM / V2's six regexes, one after the other (split_sequence.h).
  kDeepseekLlm,
  // Mistral's tekken: letter runs split by case, single digits, '/' after
  // punctuation runs (split_sequence.h).
  kTekken,
};

// What tokenizer.ggml.pre implies, as in llama_vocab::impl::load.
struct PreTokenizerConfig {
  PreTokenizerKind kind = PreTokenizerKind::kGpt2;
  // A pre-token that is itself a vocabulary piece is emitted without merging.
  bool ignore_merges = false;
  // Detokenizing removes spaces before punctuation and some contractions.
  bool clean_spaces = true;
  // Default of add_bos when tokenizer.ggml.add_bos_token is absent.
  bool default_add_bos = false;
};

// Config for a tokenizer.ggml.pre value. Supported (llama.cpp names):
// llama3, llama-v3, llama-bpe, falcon3 (kLlama3); qwen2, deepseek-r1-qwen,
// stablelm2, megrez (kQwen2); gpt-2, phi-2, mpt, olmo, jais, jina-es, jina-de,
// jina-v2-es, jina-v2-de, gigachat (kGpt2); deepseek-v3 (kDeepseekV3);
// deepseek-llm (kDeepseekLlm); tekken (kTekken).
// Unimplemented for other names llama.cpp may know (including "" and
// "default").
absl::StatusOr<PreTokenizerConfig> PreTokenizerConfigFor(std::string_view pre);

// Splits `text` (arbitrary bytes) into pre-tokens and returns each in
// byte-level form: every byte of its UTF-8 replaced by the UTF-8 of
// ByteToCodepoint(byte). Invalid UTF-8 is first decoded leniently (each bad
// byte becomes U+FFFD, as llama.cpp does), so invalid bytes do not survive.
std::vector<std::string> PreTokenize(std::string_view text, PreTokenizerKind kind);

}  // namespace ringlm::tokenizer_internal

#endif  // RINGLM_INFERENCE_TOKENIZER_BPE_PRE_TOKENIZER_H_
