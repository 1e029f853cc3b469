// Log-probabilities of the model's next-token distribution, as OpenAI's
// `logprobs` / `top_logprobs` report them: log-softmax of the raw logits, before
// penalties, temperature or any filter, so they describe the model itself.
#ifndef RINGLM_INFERENCE_SAMPLING_LOGPROBS_H_
#define RINGLM_INFERENCE_SAMPLING_LOGPROBS_H_

#include <cstdint>
#include <span>
#include <vector>

namespace ringlm {

// OpenAI caps top_logprobs at 20 on chat and logprobs at 5 on completions.
inline constexpr int32_t kMaxTopLogprobs = 20;

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
  bool operator==(const TokenLogprob&) const = default;
};

// The sampled token's log-probability and the `top` most likely tokens.
struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // best first; ties by lower id
  bool operator==(const TokenLogprobs&) const = default;
};

// log_softmax(logits)[chosen] and the min(top_n, vocab) best entries, computed
// in double with the max subtracted (stable for any finite logits). NaN logits
// count as -inf. Pure; O(vocab) time plus O(vocab) scratch for a top_n > 0.
// Preconditions: logits non-empty, 0 <= chosen < logits.size(),
// 0 <= top_n <= kMaxTopLogprobs.
TokenLogprobs ComputeLogprobs(std::span<const float> logits, int32_t chosen, int32_t top_n);

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_SAMPLING_LOGPROBS_H_
