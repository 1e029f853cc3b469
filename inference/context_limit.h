// The one rule for how much a request may hold of the model's context, for
// every frontend (the HTTP API, the gRPC Generate call) and the origin.
#ifndef RINGLM_INFERENCE_CONTEXT_LIMIT_H_
#define RINGLM_INFERENCE_CONTEXT_LIMIT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace ringlm {

// A prompt of `prompt_tokens` fits a context of `context_size` positions when
// 1 <= prompt_tokens < context_size: it leaves room for at least one
// completion token. OK, or InvalidArgument saying why (the empty prompt, or
// the OpenAI wording "This model's maximum context length is C tokens.
// However, your prompt resulted in N tokens, leaving no room for a
// completion.").
absl::Status CheckPromptFits(size_t prompt_tokens, uint32_t context_size);

// The most tokens a request whose prompt fits may generate: the rest of the
// context, context_size - prompt_tokens (0 when the prompt does not fit).
uint32_t MaxCompletionTokens(size_t prompt_tokens, uint32_t context_size);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_CONTEXT_LIMIT_H_
