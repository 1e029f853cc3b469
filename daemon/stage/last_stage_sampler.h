// The last stage's sampling: the token each step of a request ends in.
#ifndef RINGLM_DAEMON_STAGE_LAST_STAGE_SAMPLER_H_
#define RINGLM_DAEMON_STAGE_LAST_STAGE_SAMPLER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "inference/grammar/token_vocabulary.h"
#include "inference/sampling/output_constraint.h"
#include "inference/sampling/sampler.h"
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
// (rebuilt exactly if its request comes back). Not thread-safe: the stage's
// worker thread owns it. The tokenizer must outlive it.
class LastStageSampler {
 public:
  LastStageSampler(const Tokenizer& tokenizer, uint32_t context_size, size_t max_samplers);

  // The delivery for `request`'s step: its token, index, logprobs when asked
  // for, and a finish reason when the request ends here (end of generation
  // unless ignore_eos, max_tokens, or the context full). `logits` are the
  // step's last position's; `history` is the session's tokens (prompt and
  // reply so far, the sampled token not yet among them). A finished
  // request's sampler is dropped. InvalidArgument for a step that claims
  // more generated tokens than the session holds, or whose constraint does
  // not compile; an error from the grammar when it rejects every token.
  absl::StatusOr<v1::DeliverTokenRequest> Sample(const v1::StageStepRequest& request,
                                                 const std::vector<float>& logits,
                                                 std::span<const int32_t> history);
  // Drops the request's sampler, if any.
  void Forget(const std::string& request_id) { samplers_.erase(request_id); }
  size_t size() const { return samplers_.size(); }

 private:
  struct State {
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<ConstrainedSampling> constrained;  // when the request has a constraint
    std::chrono::steady_clock::time_point last_used;
  };
  absl::StatusOr<State> NewState(const v1::StageStepRequest& request,
                                 std::span<const int32_t> history);
  // Fills vocabulary_ and end_tokens_ on the first constrained request.
  void BuildGrammarVocabulary();

  const Tokenizer& tokenizer_;
  const uint32_t context_size_;
  const size_t max_samplers_;
  std::map<std::string, State> samplers_;
  // The vocabulary as grammar masks see it, and the end-of-generation ids.
  std::shared_ptr<const grammar::TokenVocabulary> vocabulary_;
  std::shared_ptr<const std::vector<int32_t>> end_tokens_;
  std::vector<float> masked_;  // [vocab] scratch: the constrained logits
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_STAGE_LAST_STAGE_SAMPLER_H_
