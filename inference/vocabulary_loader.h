// Reads a tokenizer vocabulary from GGUF metadata (tokenizer.ggml.*).
#ifndef RINGLM_INFERENCE_VOCABULARY_LOADER_H_
#define RINGLM_INFERENCE_VOCABULARY_LOADER_H_

#include "absl/status/statusor.h"
#include "gguf/gguf_file.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {

// Fills a Vocabulary for tokenizer.ggml.model "llama" or "gpt2", applying
// llama.cpp's defaults for absent keys:
// - "llama": bos 1, eos 2, unk 0 (vocabularies of more than 2 pieces),
//   add_bos true, add_space_prefix true.
// - "gpt2": bos = eos = 11 (vocabularies of more than 11 pieces, as llama.cpp),
//   no unk, add_bos per BpeDefaultAddBos(tokenizer.ggml.pre) (true for the
//   llama3 family), add_space_prefix false. tokenizer.ggml.merges is required.
// Both read eot_token_id / eom_token_id when present.
// Errors: NotFound for a missing required key (tokens, model; merges for
// "gpt2"); InvalidArgument when lengths disagree, special ids fall outside the
// vocabulary, or a merge is malformed or names an unknown piece; Unimplemented
// for another tokenizer model or an unsupported tokenizer.ggml.pre.
absl::StatusOr<Vocabulary> LoadVocabulary(const GgufFile& file);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_VOCABULARY_LOADER_H_
