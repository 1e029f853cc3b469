#include "daemon/stage/last_stage_sampler.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/rpc/proto_convert.h"
#include "inference/sampling/logprobs.h"
#include "inference/sampling/tool_call_syntax.h"

namespace ringlm {
namespace {

// A step is sent ahead only when it is at least this likely to stand. A
// lost bet costs a step's compute and a rollback, never a token; at 0.6
// a request whose drafts all matched waited 5 steps before the third was
// in flight (stories260K's draft-model ring, 124 tokens: 1.32-1.36x over
// one step in flight at 0.6, 1.42-1.61x at 0.4).
constexpr double kAheadOdds = 0.4;

// The steps in flight behind the one being verified.
uint32_t Waiting(const StepChain& chain) {
  return chain.in_flight() > 1 ? static_cast<uint32_t>(chain.in_flight() - 1) : 0;
}

}  // namespace

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
  // With steps in flight, the time since this request's last sampling is
  // not a trip of the ring.
  const bool pipelined = state.chain.in_flight() > 1;
  if (state.budget != nullptr) {
    state.budget->Record(drafts, outcome.accepted, pipelined ? 0 : trip_seconds);
  }
  const uint32_t held = static_cast<uint32_t>(history.size());
  outcome.valid = base + outcome.accepted;
  if (finished) {
    // Other stages may hold this step's rejected drafts, or steps sent
    // ahead: nothing follows to truncate them.
    if (state.chain.End(held) > outcome.valid || state.chain.blind()) {
      outcome.rollback = Rollback{state.chain.branch() + 1, outcome.valid};
    }
    outcome.steps_voided = Waiting(state.chain);
    Forget(request.request_id());
    return outcome;
  }
  PlanSteps(request, state, history.first(held), outcome);
  return outcome;
}

void LastStageSampler::PlanSteps(const v1::StageStepRequest& request, State& state,
                                 std::span<const int32_t> history, Outcome& outcome) {
  const uint32_t held = static_cast<uint32_t>(history.size());
  const uint32_t valid = outcome.valid;
  const v1::DeliverTokenRequest& last = outcome.deliveries.back();
  const int32_t token = last.token();
  // What a stage may hold past `valid`: this step's rejected drafts, the
  // steps in flight, or, when the chain lost track, any of them.
  const uint32_t beyond =
      state.chain.blind() ? kMaxDiscard : std::max(held, state.chain.End(held)) - valid;
  const uint32_t waiting = Waiting(state.chain);
  const StepChain::Next next = state.chain.Advance(valid, token);
  if (next == StepChain::Next::kVoided) {
    outcome.rollback = Rollback{state.chain.branch(), valid};
    outcome.steps_voided = waiting;
  }
  if (next != StepChain::Next::kContinues) {
    NextStep& step = outcome.steps.emplace_back();
    step.position = valid;
    step.generated = last.index() + 1;
    step.discard = beyond;
    step.branch = state.chain.branch();
    step.tokens.push_back(token);
    if (state.budget != nullptr) {
      lookup_.assign(history.begin(), history.begin() + valid);
      lookup_.push_back(token);
      const uint32_t room = Room(request, valid, last.index());
      const uint32_t k = std::min(state.budget->Next(), room - 1);
      std::vector<int32_t> drafts = Guesses(request, lookup_, k);
      step.tokens.insert(step.tokens.end(), drafts.begin(), drafts.end());
    }
    state.chain.Sent(step.position, step.tokens);
  }
  // Steps sent ahead: each bets that every guess before it matches.
  const uint32_t max_in_flight =
      std::clamp(request.speculation().steps_in_flight(), 1u, kMaxStepsInFlight);
  while (state.budget != nullptr && state.chain.in_flight() < max_in_flight &&
         state.budget->MatchOdds(static_cast<uint32_t>(state.chain.tokens().size())) >=
             kAheadOdds) {
    const uint32_t position = state.chain.End(valid);
    const uint32_t index = last.index() + (position - valid);  // of its first token
    const uint32_t count = std::min(state.budget->Next() + 1, Room(request, position, index));
    if (count == 0) break;
    lookup_.assign(history.begin(), history.begin() + valid);
    lookup_.insert(lookup_.end(), state.chain.tokens().begin(), state.chain.tokens().end());
    std::vector<int32_t> guesses = Guesses(request, lookup_, count);
    if (guesses.empty()) break;
    ++outcome.steps_ahead;
    NextStep& step = outcome.steps.emplace_back();
    step.position = position;
    step.generated = index + 1;
    step.branch = state.chain.branch();
    step.tokens = std::move(guesses);
    state.chain.Sent(step.position, step.tokens);
  }
}

bool LastStageSampler::IsVoid(const v1::StageStepRequest& request) const {
  auto it = samplers_.find(request.request_id());
  return it != samplers_.end() && it->second.chain.IsVoid(request.branch());
}

uint32_t LastStageSampler::Room(const v1::StageStepRequest& request, uint32_t position,
                                uint32_t index) const {
  // The last token's sample must still be a token the request may have,
  // at a position the context holds.
  const int64_t by_tokens = int64_t{request.limits().max_tokens()} - index - 1;
  const int64_t by_context = int64_t{context_size_} - position;
  return static_cast<uint32_t>(std::max<int64_t>(0, std::min(by_tokens, by_context)));
}

std::vector<int32_t> LastStageSampler::Guesses(const v1::StageStepRequest& request,
                                               std::span<const int32_t> sequence, uint32_t count) {
  if (count == 0) return {};
  if (draft_model_ == nullptr) return DraftByNgram(sequence, count);
  absl::StatusOr<std::vector<int32_t>> guesses =
      draft_model_->Draft(request.request_id(), sequence, count);
  // A guess that fails costs the speculation of one step, never a token.
  return guesses.ok() ? *std::move(guesses) : std::vector<int32_t>{};
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
  // Mid-reply, steps this stage sent before it lost track of the request
  // may be in flight: the chain voids them first.
  state.chain =
      StepChain(request.branch(), generated > 0 && request.speculation().steps_in_flight() > 1);
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
  // appear in it (end-of-generation ones are the matcher's end tokens),
  // except the control tokens a tool-call syntax shows as text (DeepSeek
  // V3's markers): they spell their own text, so that a forced call is
  // written with the model's own marker tokens, as its template writes it.
  // (They may then spell that text anywhere a grammar allows it, e.g. in a
  // JSON string, where the head shows them as "" outside tool calls: a
  // model's own markers inside its JSON are not worth a second vocabulary.)
  auto shown = [&](int32_t id) {
    return vocab.types[static_cast<size_t>(id)] == TokenType::kControl &&
           IsShownToolCallToken(vocab.pieces[static_cast<size_t>(id)]);
  };
  auto is_text = [&](int32_t id) {
    const TokenType type = vocab.types[static_cast<size_t>(id)];
    return type == TokenType::kNormal || type == TokenType::kUserDefined ||
           type == TokenType::kByte || shown(id);
  };
  auto piece = [&](int32_t id) {
    return shown(id) ? vocab.pieces[static_cast<size_t>(id)] : tokenizer_.TokenToPiece(id);
  };
  vocabulary_ = MakeTokenVocabulary(tokenizer_.n_vocab(), piece, is_text);
  auto ends = std::make_shared<std::vector<int32_t>>();
  for (int32_t id = 0; id < tokenizer_.n_vocab(); ++id) {
    if (tokenizer_.IsEndOfGeneration(id)) ends->push_back(id);
  }
  end_tokens_ = std::move(ends);
}

}  // namespace ringlm
