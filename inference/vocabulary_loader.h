// Reads a tokenizer vocabulary from GGUF metadata (tokenizer.ggml.*).
#ifndef RINGLM_INFERENCE_VOCABULARY_LOADER_H_
#define RINGLM_INFERENCE_VOCABULARY_LOADER_H_

#include "absl/status/statusor.h"
#include "inference/gguf/gguf_file.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {

// NotFound for a missing required key; InvalidArgument when lengths disagree
// or special ids fall outside the vocabulary; Unimplemented for a tokenizer
// model other than "llama".
absl::StatusOr<Vocabulary> LoadVocabulary(const GgufFile& file);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_VOCABULARY_LOADER_H_
