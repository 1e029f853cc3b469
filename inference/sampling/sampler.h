// Token sampler: turns the last stage's logits into the next token.
#ifndef RINGLM_INFERENCE_SAMPLING_SAMPLER_H_
#define RINGLM_INFERENCE_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "inference/sampling/sampling_params.h"

namespace ringlm {

// Sampler: one per request. Holds the request's SamplingParams, its seeded
// random stream and the penalized history (token -> count).
//
// Sample() runs llama.cpp's default chain, restricted to the knobs OpenAI has:
//   penalties -> top_k -> top_p -> min_p -> temperature -> seeded draw.
// top_p and min_p therefore see temperature-1 probabilities, as in llama.cpp;
// temperature only reshapes the draw among the survivors.
// temperature == 0 is greedy: an exact argmax over the penalized logits, lowest
// id on ties; top_k/top_p/min_p cannot change that answer and are skipped.
//
// Determinism: the same params, history and logits give the same token on any
// machine with the same libm (exp/log): candidates are ordered by a total order
// (logit desc, id asc), the generator is std::mt19937_64 (fully specified by the
// standard) and uniform doubles are built by hand from its output.
//
// Ownership: logits are only read during Sample(). Scratch buffers of O(vocab)
// are kept between calls, so steady-state sampling does not allocate.
// Thread-safety: none; use one Sampler per request from one thread at a time.
// Preconditions: params.Validate().ok(); logits non-empty and shorter than 2^31.
// NaN logits are treated as -inf. Accepted tokens outside [0, vocab) are kept
// in the history but never penalize anything.
class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Chooses a token id in [0, logits.size()). Returns -1 only for empty logits.
  // Does not add the token to the history: call Accept() for that.
  int32_t Sample(std::span<const float> logits);

  // Adds `token` to the penalized history (the caller passes generated tokens,
  // and prompt tokens too if it wants them penalized).
  void Accept(int32_t token);

  // Brings a new sampler to the state it has after sampling and accepting
  // each of `accepted` in turn: the random stream moves one value per
  // token (Sample takes exactly one when temperature > 0, none when
  // greedy), and the tokens join the history. So a request moved to another
  // node continues exactly. Call it before the first Sample.
  void FastForward(std::span<const int32_t> accepted);

  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    float logit;
    int32_t id;
  };

  // Returns `logits` itself when there is nothing to penalize, else
  // penalized_ filled with the penalized copy.
  std::span<const float> ApplyPenalties(std::span<const float> logits);
  // Top-k over candidates_; leaves them sorted best first.
  void ApplyTopK();
  // Nucleus filter; sorts as much of candidates_ as it needs.
  void ApplyTopP();
  void ApplyMinP();
  // `u` in [0, 1): this token's value of the random stream.
  int32_t Draw(double u);

  SamplingParams params_;
  std::mt19937_64 rng_;
  absl::flat_hash_map<int32_t, int32_t> history_counts_;
  bool candidates_sorted_ = false;
  std::vector<float> penalized_;       // [vocab] scratch
  std::vector<Candidate> candidates_;  // [<= vocab] scratch
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_SAMPLING_SAMPLER_H_
