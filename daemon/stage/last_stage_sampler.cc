#include "daemon/stage/last_stage_sampler.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/rpc/proto_convert.h"
#include "inference/sampling/logprobs.h"

namespace ringlm {

LastStageSampler::LastStageSampler(const Tokenizer& tokenizer, uint32_t context_size,
                                   size_t max_samplers, DraftModel* draft_model)
    : tokenizer_(tokenizer),
      context_size_(context_size),
      max_samplers_(max_samplers),
      draft_model_(draft_model) {}

void LastStageSampler::Forget(const std::string& request_id) {
  samplers_.erase(request_id);
  if (draft_model_ != nullptr) draft_model_->Forget(request_id);
}

absl::StatusOr<LastStageSampler::Outcome> LastStageSampler::Sample(
    const v1::StageStepRequest& request, std::span<const float> logits,
    std::span<const int32_t> history) {
  const uint32_t drafts = request.drafts();
  const size_t n_vocab = static_cast<size_t>(tokenizer_.n_vocab());
  // The stage ran the step: its tokens are in the history, a row each.
  assert(drafts < history.size() && logits.size() == (drafts + size_t{1}) * n_vocab);
  // The session's tokens through the step's last non-draft one.
  const uint32_t base = static_cast<uint32_t>(history.size()) - drafts;
  if (samplers_.size() >= max_samplers_ && samplers_.count(request.request_id()) == 0) {
    // Full: the least recently used sampler goes (its request, if it is
    // still running, rebuilds it exactly from the session).
    auto oldest = samplers_.begin();
    for (auto it = samplers_.begin(); it != samplers_.end(); ++it) {
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    }
    const std::string id = oldest->first;  // a copy: the erase frees the key
    Forget(id);
  }
  auto it = samplers_.find(request.request_id());
  const auto now = std::chrono::steady_clock::now();
  double trip_seconds = 0;  // since this request's last step here: one trip of the ring
  if (it == samplers_.end()) {
    RINGLM_ASSIGN_OR_RETURN(State fresh, NewState(request, history.first(base)));
    it = samplers_.emplace(request.request_id(), std::move(fresh)).first;
  } else {
    trip_seconds = std::chrono::duration<double>(now - it->second.last_used).count();
  }
  State& state = it->second;
  state.last_used = now;

  Outcome outcome;
  bool finished = false;
  for (uint32_t i = 0; i <= drafts; ++i) {
    const std::span<const float> row = logits.subspan(i * n_vocab, n_vocab);
    RINGLM_ASSIGN_OR_RETURN(const int32_t token, SampleOne(state, row));
    const uint32_t index = request.generated() + i;
    const uint32_t n_positions = base + i;  // held before this token
    v1::DeliverTokenRequest& deliver = outcome.deliveries.emplace_back();
    deliver.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    deliver.set_request_id(request.request_id());
    deliver.set_token(token);
    deliver.set_index(index);
    if (request.logprobs().enabled()) {
      *deliver.mutable_logprobs() = LogprobsToProto(
          ComputeLogprobs(row, token, static_cast<int32_t>(request.logprobs().top())));
    }
    if (!request.limits().ignore_eos() && tokenizer_.IsEndOfGeneration(token)) {
      deliver.set_finish_reason(v1::FINISH_REASON_STOP);
    } else if (static_cast<int64_t>(index) + 1 >= request.limits().max_tokens() ||
               n_positions >= context_size_) {
      deliver.set_finish_reason(v1::FINISH_REASON_LENGTH);
    }
    finished = deliver.finish_reason() != v1::FINISH_REASON_UNSPECIFIED;
    // The next row saw draft i + 1 as this position's token: it counts only
    // when that is the token sampled here.
    if (finished || i == drafts || history[base + i] != token) break;
    ++outcome.accepted;
  }
  if (drafts > 0) {
    outcome.deliveries.front().set_drafted(drafts);
    outcome.deliveries.front().set_accepted(outcome.accepted);
  }
  if (state.budget != nullptr) state.budget->Record(drafts, outcome.accepted, trip_seconds);
  if (finished) {
    Forget(request.request_id());
    return outcome;
  }
  const v1::DeliverTokenRequest& last = outcome.deliveries.back();
  outcome.drafts = NextDrafts(request, state, history.first(base + outcome.accepted), last.token(),
                              last.index() + 1);
  return outcome;
}

absl::StatusOr<int32_t> LastStageSampler::SampleOne(State& state, std::span<const float> logits) {
  std::span<const float> choices = logits;
  if (state.constrained != nullptr) {
    masked_.assign(logits.begin(), logits.end());
    RINGLM_RETURN_IF_ERROR(state.constrained->Mask(masked_));
    choices = masked_;
  }
  const int32_t token = state.sampler->Sample(choices);
  state.sampler->Accept(token);
  if (state.constrained != nullptr) RINGLM_RETURN_IF_ERROR(state.constrained->Accept(token));
  return token;
}

std::vector<int32_t> LastStageSampler::NextDrafts(const v1::StageStepRequest& request, State& state,
                                                  std::span<const int32_t> valid, int32_t token,
                                                  uint32_t next_index) {
  if (state.budget == nullptr) return {};
  uint32_t room = state.budget->Next();
  // The next step yields at most drafts + 1 tokens: no more than the
  // request has left, nor than the context holds after `token`.
  const int64_t to_go = int64_t{request.limits().max_tokens()} - next_index;
  const int64_t free_positions = int64_t{context_size_} - static_cast<int64_t>(valid.size()) - 1;
  room = static_cast<uint32_t>(
      std::max<int64_t>(0, std::min({int64_t{room}, to_go - 1, free_positions})));
  if (room == 0) return {};
  lookup_.assign(valid.begin(), valid.end());
  lookup_.push_back(token);
  if (draft_model_ == nullptr) return DraftByNgram(lookup_, room);
  absl::StatusOr<std::vector<int32_t>> drafts =
      draft_model_->Draft(request.request_id(), lookup_, room);
  // A guess that fails costs the speculation of one step, never a token.
  return drafts.ok() ? *std::move(drafts) : std::vector<int32_t>{};
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
  if (request.speculation().max_drafts() > 0) {
    state.budget = std::make_unique<DraftBudget>(request.speculation().max_drafts());
  }
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
