// The last stage's sampling: the token each step of a request ends in.
#ifndef RINGLM_DAEMON_STAGE_LAST_STAGE_SAMPLER_H_
#define RINGLM_DAEMON_STAGE_LAST_STAGE_SAMPLER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/stage/step_chain.h"
#include "inference/draft_model.h"
#include "inference/grammar/token_vocabulary.h"
#include "inference/sampling/output_constraint.h"
#include "inference/sampling/sampler.h"
#include "inference/sampling/speculation.h"
#include "inference/tokenizer/tokenizer.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// Keeps one sampler (and, for a request with an output constraint, its
// compiled grammar) per request across its steps, samples each step's token
// from the last stage's logits, and decides whether the request ends there.
// A request it holds no sampler for (new, replayed on a new plan, or
// evicted) gets one rebuilt from the session's history: the sampler and the
// grammar follow the reply so far token by token, so the next token is the
// one an undisturbed run gives. The grammar is compiled once per sampler.
//
// At most `max_samplers` samplers; past that the least recently used goes
// (rebuilt exactly if its request comes back). Drafts come from `draft_model`
// when there is one (null: n-gram lookup in the session). Not thread-safe:
// the stage's worker thread owns it. The tokenizer and the draft model must
// outlive it.
class LastStageSampler {
 public:
  LastStageSampler(const Tokenizer& tokenizer, uint32_t context_size, size_t max_samplers,
                   DraftModel* draft_model = nullptr);

  // A step for stage 0 (the StageStepRequest fields of the same names):
  // the first token sampled or, for a step sent ahead, guessed; the rest
  // drafts.
  struct NextStep {
    uint32_t position = 0;
    std::vector<int32_t> tokens;
    uint32_t generated = 0;
    uint32_t discard = 0;
    uint32_t branch = 0;
  };
  // For the request's other stages (RollbackRequest).
  struct Rollback {
    uint32_t branch = 0;
    uint32_t positions = 0;
  };
  // What one step of a request ends in: its tokens, one delivery each (the
  // last one may end the request), the positions that stand, and what goes
  // round next.
  struct Outcome {
    std::vector<v1::DeliverTokenRequest> deliveries;
    uint32_t accepted = 0;  // drafts of this step that matched
    uint32_t valid = 0;     // the session's positions that stand; the rest go
    // To the other stages first, when they may hold positions past `valid`
    // that no step will truncate: steps in flight that bet wrong, or the
    // end of a request that checked drafts.
    std::optional<Rollback> rollback;
    std::vector<NextStep> steps;  // to stage 0, in order; none when the request ends
    uint32_t steps_ahead = 0;     // of `steps`, those sent ahead (all but a first from the token)
    uint32_t steps_voided = 0;    // steps in flight this step showed to have bet wrong
  };
  // Samples `request`'s step. `logits` holds a row per position from the
  // step's last non-draft token on ([request.drafts() + 1, n_vocab]);
  // `history` is the session's tokens through the step's (its drafts
  // included). Row i's token is delivered; while it equals draft i + 1,
  // row i + 1 is sampled too: so the tokens are exactly those of plain
  // steps. Each delivery has its index, logprobs when asked for, and a
  // finish reason when the request ends there (end of generation unless
  // ignore_eos, max_tokens, or the context full); the first carries the
  // drafts checked and matched. A finished request's sampler is dropped.
  //
  // When the request goes on, the next step starts from the last token,
  // with up to DraftBudget's count of guesses (the draft model's, or n-gram
  // lookup's) within max_tokens and the context; unless a step sent ahead
  // is already in flight from there (StepChain). When the request allows
  // several steps in flight and its guesses have been matching, more steps
  // of guesses follow it at once, up to speculation.steps_in_flight.
  // InvalidArgument for a step that claims more generated tokens than the
  // session holds, or whose constraint does not compile; an error from the
  // grammar when it rejects every token.
  absl::StatusOr<Outcome> Sample(const v1::StageStepRequest& request, std::span<const float> logits,
                                 std::span<const int32_t> history);
  // True for a step of a branch that a lost bet voided: drop it unrun.
  bool IsVoid(const v1::StageStepRequest& request) const;
  // Drops the request's sampler (and draft cache), if any.
  void Forget(const std::string& request_id);
  size_t size() const { return samplers_.size(); }

 private:
  struct State {
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<ConstrainedSampling> constrained;  // when the request has a constraint
    std::unique_ptr<DraftBudget> budget;               // when the request speculates
    StepChain chain{0, false};
    std::chrono::steady_clock::time_point last_used;
  };
  absl::StatusOr<State> NewState(const v1::StageStepRequest& request,
                                 std::span<const int32_t> history);
  // Samples one position's token from its `logits` and accepts it.
  absl::StatusOr<int32_t> SampleOne(State& state, std::span<const float> logits);
  // The steps that go round after `outcome`'s last token (which goes
  // on): the next from it, unless one in flight already does, then the
  // ones sent ahead. `history` holds the verified step's positions.
  void PlanSteps(const v1::StageStepRequest& request, State& state,
                 std::span<const int32_t> history, Outcome& outcome);
  // How many tokens a step at `position` whose first token is generated
  // token `index` may carry: within max_tokens and the context.
  uint32_t Room(const v1::StageStepRequest& request, uint32_t position, uint32_t index) const;
  // Up to `count` guesses of what follows `sequence`.
  std::vector<int32_t> Guesses(const v1::StageStepRequest& request,
                               std::span<const int32_t> sequence, uint32_t count);
  // Fills vocabulary_ and end_tokens_ on the first constrained request.
  void BuildGrammarVocabulary();

  const Tokenizer& tokenizer_;
  const uint32_t context_size_;
  const size_t max_samplers_;
  DraftModel* const draft_model_;
  std::map<std::string, State> samplers_;
  // The vocabulary as grammar masks see it, and the end-of-generation ids.
  std::shared_ptr<const grammar::TokenVocabulary> vocabulary_;
  std::shared_ptr<const std::vector<int32_t>> end_tokens_;
  std::vector<float> masked_;    // [vocab] scratch: the constrained logits
  std::vector<int32_t> lookup_;  // [positions] scratch: the sequence guesses follow
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_STAGE_LAST_STAGE_SAMPLER_H_
