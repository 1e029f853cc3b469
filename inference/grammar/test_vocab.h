// Test and benchmark helpers: vocabularies for grammar tests. Not linked into
// the library.
#ifndef RINGLM_INFERENCE_GRAMMAR_TEST_VOCAB_H_
#define RINGLM_INFERENCE_GRAMMAR_TEST_VOCAB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringlm::grammar::testing {

// Where the read-only HF tokenizer files live (tests/hf_vocab in the repo).
std::string HfTokenizerPath(const std::string& model);  // e.g. "llama3_2".

// Token bytes of a byte-level BPE tokenizer.json: model.vocab strings mapped
// back through GPT-2's bytes_to_unicode; added_tokens (and ids missing from
// the vocab) become "" (never allowed). NotFound if the file is missing.
absl::StatusOr<std::vector<std::string>> LoadByteLevelVocab(const std::string& path);

// All 256 single bytes (id = byte) plus one empty "EOS" token (id 256).
std::vector<std::string> ByteVocab();

}  // namespace ringlm::grammar::testing

#endif  // RINGLM_INFERENCE_GRAMMAR_TEST_VOCAB_H_
