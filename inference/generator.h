// Token generation with the whole model in one process.
#ifndef RINGLM_INFERENCE_GENERATOR_H_
#define RINGLM_INFERENCE_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "inference/model.h"
#include "inference/sampling/sampler.h"
#include "inference/stage_engine.h"

namespace ringlm {

struct GenerateOptions {
  int32_t max_tokens = 64;
  bool ignore_eos = false;  // keep going past end-of-generation tokens
  SamplingParams sampling;
};

// Called with each generated token; returning false stops generation.
using TokenCallback = std::function<bool(int32_t token)>;

// Runs prompt prefill and the decode loop on a model that holds every layer.
// Uses one KV cache per call, so concurrent calls are independent. The model
// and pool must outlive it.
class LocalGenerator {
 public:
  // Precondition: `model` holds all layers.
  LocalGenerator(const Model& model, ThreadPool* pool);

  // Returns the generated ids (the prompt not included). Stops at
  // max_tokens, when the context is full, at an end-of-generation token
  // (which is included), or when `on_token` returns false.
  // ResourceExhausted when the prompt alone does not fit the context.
  absl::StatusOr<std::vector<int32_t>> Generate(std::span<const int32_t> prompt,
                                                const GenerateOptions& options,
                                                const TokenCallback& on_token = nullptr) const;

  const StageEngine& engine() const { return engine_; }

 private:
  const Model& model_;
  StageEngine engine_;
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_GENERATOR_H_
