#include "daemon/stage/last_stage_sampler.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/rpc/proto_convert.h"
#include "inference/sampling/logprobs.h"

namespace ringlm {

LastStageSampler::LastStageSampler(const Tokenizer& tokenizer, uint32_t context_size,
                                   size_t max_samplers)
    : tokenizer_(tokenizer), context_size_(context_size), max_samplers_(max_samplers) {}

absl::StatusOr<v1::DeliverTokenRequest> LastStageSampler::Sample(
    const v1::StageStepRequest& request, const std::vector<float>& logits,
    std::span<const int32_t> history) {
  const uint32_t n_positions = static_cast<uint32_t>(history.size());
  if (samplers_.size() >= max_samplers_ && samplers_.count(request.request_id()) == 0) {
    // Full: the least recently used sampler goes (its request, if it is
    // still running, rebuilds it exactly from the session).
    auto oldest = samplers_.begin();
    for (auto it = samplers_.begin(); it != samplers_.end(); ++it) {
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    }
    samplers_.erase(oldest);
  }
  auto it = samplers_.find(request.request_id());
  if (it == samplers_.end()) {
    RINGLM_ASSIGN_OR_RETURN(State fresh, NewState(request, history));
    it = samplers_.emplace(request.request_id(), std::move(fresh)).first;
  }
  State& state = it->second;
  state.last_used = std::chrono::steady_clock::now();
  std::span<const float> choices = logits;
  if (state.constrained != nullptr) {
    masked_.assign(logits.begin(), logits.end());
    RINGLM_RETURN_IF_ERROR(state.constrained->Mask(masked_));
    choices = masked_;
  }
  const int32_t token = state.sampler->Sample(choices);
  state.sampler->Accept(token);
  if (state.constrained != nullptr) RINGLM_RETURN_IF_ERROR(state.constrained->Accept(token));

  const uint32_t index = request.generated();
  v1::DeliverTokenRequest deliver;
  deliver.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  deliver.set_request_id(request.request_id());
  deliver.set_token(token);
  deliver.set_index(index);
  if (request.logprobs().enabled()) {
    *deliver.mutable_logprobs() = LogprobsToProto(
        ComputeLogprobs(logits, token, static_cast<int32_t>(request.logprobs().top())));
  }
  if (!request.limits().ignore_eos() && tokenizer_.IsEndOfGeneration(token)) {
    deliver.set_finish_reason(v1::FINISH_REASON_STOP);
  } else if (static_cast<int64_t>(index) + 1 >= request.limits().max_tokens() ||
             n_positions >= context_size_) {
    deliver.set_finish_reason(v1::FINISH_REASON_LENGTH);
  }
  if (deliver.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
    samplers_.erase(request.request_id());
  }
  return deliver;
}

absl::StatusOr<LastStageSampler::State> LastStageSampler::NewState(
    const v1::StageStepRequest& request, std::span<const int32_t> history) {
  // A new request, or one that continues mid-reply (a replay on a new plan,
  // or an evicted sampler): the reply so far is the last `generated`
  // positions of the session, and the sampler and the grammar follow it
  // token by token to where they were.
  const uint32_t generated = request.generated();
  if (generated > history.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the step claims ", generated, " generated tokens, the session holds ", history.size()));
  }
  const std::span<const int32_t> reply = history.subspan(history.size() - generated);
  State state;
  state.sampler = std::make_unique<Sampler>(SamplingFromProto(request.sampling()));
  state.sampler->FastForward(reply);
  if (!request.constraint().empty()) {
    RINGLM_ASSIGN_OR_RETURN(grammar::Grammar grammar, CompileConstraint(request.constraint()));
    BuildGrammarVocabulary();
    state.constrained = std::make_unique<ConstrainedSampling>(grammar, vocabulary_, end_tokens_);
    for (int32_t token : reply) RINGLM_RETURN_IF_ERROR(state.constrained->Accept(token));
  }
  return state;
}

void LastStageSampler::BuildGrammarVocabulary() {
  if (vocabulary_ != nullptr) return;
  const Vocabulary& vocab = tokenizer_.vocabulary();
  // A constrained reply is text: control, unknown and unused tokens never
  // appear in it (end-of-generation ones are the matcher's end tokens).
  auto is_text = [&](int32_t id) {
    const TokenType type = vocab.types[static_cast<size_t>(id)];
    return type == TokenType::kNormal || type == TokenType::kUserDefined ||
           type == TokenType::kByte;
  };
  vocabulary_ = MakeTokenVocabulary(
      tokenizer_.n_vocab(), [&](int32_t id) { return tokenizer_.TokenToPiece(id); }, is_text);
  auto ends = std::make_shared<std::vector<int32_t>>();
  for (int32_t id = 0; id < tokenizer_.n_vocab(); ++id) {
    if (tokenizer_.IsEndOfGeneration(id)) ends->push_back(id);
  }
  end_tokens_ = std::move(ends);
}

}  // namespace ringlm
