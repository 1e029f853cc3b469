// Hugging Face tokenizers (tokenizer.json + tokenizer_config.json) converted
// to the GGUF tokenizer metadata llama.cpp's convert_hf_to_gguf.py would
// write, so a synthetic model can carry a real vocabulary.
#ifndef RINGLM_INFERENCE_TOKENIZER_HF_TOKENIZER_H_
#define RINGLM_INFERENCE_TOKENIZER_HF_TOKENIZER_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {

// A vocabulary ready to be written as tokenizer.ggml.* plus the chat template.
struct SynthTokenizer {
  Vocabulary vocab;           // pieces, merges, scores, types, special ids
  std::string chat_template;  // tokenizer.chat_template; empty: not written
  std::string name;           // where it came from (the directory), for messages
};

// Converts a Hugging Face tokenizer. The rules, in order:
//  1. Pieces: model.vocab (piece -> id), then the added tokens of
//     tokenizer.json's added_tokens and tokenizer_config.json's
//     added_tokens_decoder (tokenizer.json wins where both name an id), which
//     replace the model piece at their id verbatim. n_vocab is the highest id
//     + 1; holes become "[PAD<id>]" of type UNUSED (as llama.cpp).
//  2. model.type "BPE" with a ByteLevel pre-tokenizer or decoder ->
//     tokenizer.ggml.model "gpt2": merges as "left right" (tokenizer.json may
//     hold "a b" strings or ["a","b"] pairs), tokenizer.ggml.pre from the
//     Split regex (Llama 3's -> "llama-bpe", Qwen 2's -> "qwen2", Mistral's
//     tekken -> "tekken", GPT-2's, or a ByteLevel pre-tokenizer with
//     use_regex -> "gpt-2") or from DeepSeek
//     V3's sequence of three Split regexes (-> "deepseek-v3"). Types: added
//     tokens that are special, or look special to llama.cpp ("<|...|>",
//     "<｜...｜>", "<unused...>", "<mask>", "<pad>", ...), CONTROL; other
//     added tokens USER_DEFINED; the rest NORMAL.
//  3. model.type "BPE" with byte_fallback and SentencePiece-style "▁" spaces
//     (a Replace " " -> "▁" normalizer or a Metaspace pre-tokenizer) ->
//     "llama" (SPM). Scores: a piece made by merge rank r scores -(r + 1), so
//     the SPM tokenizer's best-score-first merging follows the merge order;
//     other pieces score 0, added-only tokens -1000. add_space_prefix: a
//     Prepend "▁" normalizer or a Metaspace prepend_scheme other than
//     "never". Types: "<0xNN>" BYTE, unk UNKNOWN, then added tokens as in 2.
//  4. Special ids from tokenizer_config.json's bos/eos/unk/pad_token (a
//     string or {"content": ...}), unk falling back to model.unk_token and
//     bos to the post_processor's leading special token; add_bos/add_eos from
//     add_bos_token/add_eos_token, else whether the post_processor's
//     TemplateProcessing puts bos first / eos last. eot is the first of
//     "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
//     "<|endoftext|>", "<EOT>", "<｜end▁of▁sentence｜>" present, eom
//     "<|eom_id|>"; both are made CONTROL (as llama.cpp's loader does).
//  5. chat_template: tokenizer_config.json's string, or from a list of
//     {"name", "template"} the one named "default".
// Errors: InvalidArgument naming `name` and the problem for malformed JSON,
// ids that are negative or too large (2^24 and up), an id used twice,
// duplicate pieces, merges naming unknown pieces, a special token that is not
// in the vocabulary; Unimplemented for a model type, normalizer or
// pre-tokenizer that ringlm's tokenizers do not implement (the message names
// `name` and quotes the start of an unknown Split regex).
absl::StatusOr<SynthTokenizer> ConvertHfTokenizer(std::string_view tokenizer_json,
                                                  std::string_view tokenizer_config_json,
                                                  std::string_view name);

// Reads `dir`/tokenizer.json and `dir`/tokenizer_config.json and converts
// them. NotFound naming the file when one is missing; otherwise the errors of
// ConvertHfTokenizer, with `dir` as the name.
absl::StatusOr<SynthTokenizer> LoadHfTokenizer(const std::string& dir);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_TOKENIZER_HF_TOKENIZER_H_
