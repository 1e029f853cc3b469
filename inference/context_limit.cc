#include "inference/context_limit.h"

#include "absl/strings/str_cat.h"

namespace ringlm {

absl::Status CheckPromptFits(size_t prompt_tokens, uint32_t context_size) {
  if (prompt_tokens == 0) return absl::InvalidArgumentError("the prompt is empty");
  if (prompt_tokens >= context_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "This model's maximum context length is ", context_size, " tokens. However, your prompt ",
        "resulted in ", prompt_tokens, " tokens, leaving no room for a completion."));
  }
  return absl::OkStatus();
}

uint32_t MaxCompletionTokens(size_t prompt_tokens, uint32_t context_size) {
  return prompt_tokens >= context_size ? 0 : static_cast<uint32_t>(context_size - prompt_tokens);
}

}  // namespace ringlm
