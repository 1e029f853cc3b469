#include "inference/generator.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace ringlm {

LocalGenerator::LocalGenerator(const Model& model, ThreadPool* pool)
    : model_(model), engine_(model.config(), model.weights(), pool) {}

absl::StatusOr<std::vector<int32_t>> LocalGenerator::Generate(std::span<const int32_t> prompt,
                                                              const GenerateOptions& options,
                                                              const TokenCallback& on_token) const {
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  if (options.max_tokens < 0) return absl::InvalidArgumentError("max_tokens must be >= 0");
  RINGLM_RETURN_IF_ERROR(options.sampling.Validate());
  if (prompt.size() > model_.context_size()) {
    return absl::ResourceExhaustedError(absl::StrCat("the prompt has ", prompt.size(),
                                                     " tokens, more than the context size ",
                                                     model_.context_size()));
  }
  KvCache cache = engine_.NewCache(model_.context_size());
  Sampler sampler(options.sampling);
  std::vector<int32_t> generated;
  std::vector<float> logits;
  RINGLM_RETURN_IF_ERROR(
      engine_.Forward(cache, StageInput{prompt, {}}, LogitsMode::kLastPosition, &logits));
  for (int32_t i = 0; i < options.max_tokens; ++i) {
    const int32_t token = sampler.Sample(logits);
    sampler.Accept(token);
    generated.push_back(token);
    if (on_token && !on_token(token)) break;
    if (!options.ignore_eos && model_.tokenizer().IsEndOfGeneration(token)) break;
    if (i + 1 == options.max_tokens) break;
    if (cache.n_positions() >= model_.context_size()) break;  // context full: stop as at max_tokens
    const int32_t next[1] = {token};
    RINGLM_RETURN_IF_ERROR(
        engine_.Forward(cache, StageInput{next, {}}, LogitsMode::kLastPosition, &logits));
  }
  return generated;
}

}  // namespace ringlm
