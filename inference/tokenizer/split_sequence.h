// Internal to inference/tokenizer: pre-tokenizers that chain several Split
// regexes, as Hugging Face's Sequence of Split(behavior "Isolated") and
// llama.cpp's unicode_regex_split with several regexes do. Each regex runs
// over every piece the previous one left, and every match and every stretch
// between two matches becomes a piece of its own (Mistral's tekken uses a
// single regex the same way). The regexes are hand-coded
// over code points (no regex engine), like the single-regex splitters in
// bpe_pre_tokenizer.cc.

#ifndef RINGLM_INFERENCE_TOKENIZER_SPLIT_SEQUENCE_H_
#define RINGLM_INFERENCE_TOKENIZER_SPLIT_SEQUENCE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringlm::tokenizer_internal {

// Lengths (in code points; they sum to cpts.size(), none is 0) of DeepSeek
// V3's pre-tokens (tokenizer.ggml.pre "deepseek-v3"). The regexes, in order:
//  1. \p{N}{1,3}
//  2. [一-龥぀-ゟ゠-ヿ]+
//  3. [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|
//     [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|
//     \s*[\r\n]+|\s+(?!\S)|\s+
// Categories are Unicode general categories and \s is White_Space, as in
// Hugging Face tokenizers; llama.cpp c392e50 differs on one character: its
// \p{S} misses ASCII '~' (Sm). A pure function: thread-safe.
std::vector<size_t> SplitDeepseekV3(const std::vector<uint32_t>& cpts);

// The same for DeepSeek LLM and V2 / V2-Lite ("deepseek-llm"). The regexes
// (llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM), in order:
//  1. [\r\n]
//  2. \s?[A-Za-zµÀ-ÖØ-öø-ƺ...𞤀-𞥃]+  (cased letters of some scripts)
//  3. \s?[!-/:-~！-／：-～‘-‟　-。]+  (its :-~ takes in the ASCII letters)
//  4. \s+$
//  5. [一-龥ࠀ-一가-퟿]+
//  6. \p{N}+
// Each regex also runs over the matches of the ones before, so "héllo"
// (one piece after 2) splits as "h", "é", "llo" at 3. \s is White_Space,
// as in Hugging Face tokenizers. llama.cpp c392e50 runs 2, 3 and 5 through
// std::wregex on text whose non-ASCII whitespace it has replaced by U+000B,
// so there U+3000 never matches 3's class and no whitespace matches 5's
// (U+0800..U+4E00 holds U+2000..U+200A, U+3000 and others); ringlm follows
// the regexes. A pure function: thread-safe.
std::vector<size_t> SplitDeepseekLlm(const std::vector<uint32_t>& cpts);

// The same for Mistral's tekken ("tekken": Mistral Nemo, Mistral Small 3.x,
// Devstral). One regex, as a Split of its own:
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|
//   \p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with the leftmost-first match of a backtracking engine (Oniguruma, which
// Hugging Face tokenizers uses): "HelloWorld" is "Hello", "World";
// "HTTPServer" stays whole; "\u0301HTTP" is "\u0301", "HTTP".
// \s is White_Space, as in Hugging Face tokenizers. llama.cpp (00ad355)
// runs an ASCII-only stand-in instead: "upper" is a letter other than a-z,
// "lower" a letter other than A-Z, and marks are in neither; so there
// "ΑθήναΚαι" stays one piece and a combining mark leaves its word (read
// from its regex, not run). ringlm follows the regex, as Hugging Face does.
// Each letter costs one more table lookup (its case), a few times over when
// a run is backtracked. A pure function: thread-safe.
std::vector<size_t> SplitTekken(const std::vector<uint32_t>& cpts);

}  // namespace ringlm::tokenizer_internal

#endif  // RINGLM_INFERENCE_TOKENIZER_SPLIT_SEQUENCE_H_
