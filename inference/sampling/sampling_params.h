// Per-request sampling settings, as the OpenAI API names them.
#ifndef RINGLM_INFERENCE_SAMPLING_SAMPLING_PARAMS_H_
#define RINGLM_INFERENCE_SAMPLING_SAMPLING_PARAMS_H_

#include <cstdint>

#include "absl/status/status.h"

namespace ringlm {

// SamplingParams: what one request asks of the sampler. Plain data; the
// defaults match OpenAI's API, so a request that sets nothing samples from the
// full softmax at temperature 1 with no penalties. Validate() before use: the
// sampler assumes valid values.
struct SamplingParams {
  // Limits enforced by Validate(). OpenAI caps temperature at 2; we accept up
  // to 100 (llama.cpp accepts any), which keeps very flat sampling possible
  // without admitting values that only make sense as bugs.
  static constexpr float kMaxTemperature = 100.0f;
  static constexpr float kMaxAbsPenalty = 2.0f;  // OpenAI: [-2, 2]

  // 0 => greedy: exact argmax over the penalized logits, ties -> lowest id.
  float temperature = 1.0f;
  // Keep only the k highest logits; 0 = off.
  int32_t top_k = 0;
  // Nucleus: keep the smallest prefix (by probability, at temperature 1) whose
  // mass reaches top_p; 1 = off. Must be in (0, 1].
  float top_p = 1.0f;
  // Keep tokens whose probability is at least min_p times the top one's; 0 = off.
  float min_p = 0.0f;
  // Subtracted once from the logit of every token in the penalized history.
  float presence_penalty = 0.0f;
  // Subtracted count times, count = occurrences in the penalized history.
  float frequency_penalty = 0.0f;
  // Same seed + same logits + same history => same choices, on any machine.
  uint64_t seed = 0;

  // InvalidArgument naming the first field out of range (NaN is out of range):
  // temperature in [0, kMaxTemperature], top_k >= 0, top_p in (0, 1],
  // min_p in [0, 1], both penalties in [-kMaxAbsPenalty, kMaxAbsPenalty].
  absl::Status Validate() const;

  bool operator==(const SamplingParams&) const = default;
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_SAMPLING_SAMPLING_PARAMS_H_
