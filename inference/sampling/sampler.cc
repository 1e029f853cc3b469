#include "inference/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ringlm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Exact argmax, lowest id on ties; NaN never wins. All -inf/NaN -> 0.
int32_t Argmax(std::span<const float> logits) {
  int32_t best_id = 0;
  float best = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best) {  // strict: keeps the lowest id on ties
      best = logits[i];
      best_id = static_cast<int32_t>(i);
    }
  }
  return best_id;
}

// Total order over candidates: higher logit first, then lower id. Makes every
// sort deterministic whatever the standard library's algorithm.
struct Better {
  template <typename C>
  bool operator()(const C& a, const C& b) const {
    if (a.logit != b.logit) return a.logit > b.logit;
    return a.id < b.id;
  }
};

// Uniform double in [0, 1) from the top 53 bits: specified, unlike
// std::uniform_real_distribution.
double UniformDouble(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

void Sampler::Accept(int32_t token) { ++history_counts_[token]; }

void Sampler::FastForward(std::span<const int32_t> accepted) {
  if (params_.temperature != 0.0f) rng_.discard(accepted.size());
  for (int32_t token : accepted) Accept(token);
}

std::span<const float> Sampler::ApplyPenalties(std::span<const float> logits) {
  if (history_counts_.empty() ||
      (params_.presence_penalty == 0.0f && params_.frequency_penalty == 0.0f)) {
    return logits;
  }
  penalized_.assign(logits.begin(), logits.end());
  const int64_t vocab = static_cast<int64_t>(logits.size());
  for (const auto& [token, count] : history_counts_) {
    if (token < 0 || token >= vocab) continue;  // not in this vocabulary
    penalized_[token] -=
        static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
  }
  return penalized_;
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (logits.empty()) return -1;
  const std::span<const float> penalized = ApplyPenalties(logits);
  if (params_.temperature == 0.0f) return Argmax(penalized);
  // One value of the stream per sampled token, whichever way it is chosen
  // below: the stream's position is the count of tokens (FastForward).
  const double u = UniformDouble(rng_);

  // Candidates: every token with a logit above -inf. -inf and NaN have zero
  // probability, so dropping them is exact.
  constexpr float kPosInf = std::numeric_limits<float>::infinity();
  candidates_.clear();
  candidates_.reserve(penalized.size());
  for (size_t i = 0; i < penalized.size(); ++i) {
    const float l = penalized[i];
    // +inf takes all the softmax mass; returning here keeps the math finite.
    if (l == kPosInf) return static_cast<int32_t>(i);
    if (l > kNegInf) candidates_.push_back({l, static_cast<int32_t>(i)});
  }
  if (candidates_.empty()) return Argmax(penalized);
  candidates_sorted_ = false;

  ApplyTopK();
  ApplyTopP();
  ApplyMinP();
  return Draw(u);
}

void Sampler::ApplyTopK() {
  const size_t k = static_cast<size_t>(params_.top_k);
  if (k == 0 || k >= candidates_.size()) return;
  std::partial_sort(candidates_.begin(), candidates_.begin() + k, candidates_.end(), Better());
  candidates_.resize(k);
  candidates_sorted_ = true;
}

void Sampler::ApplyTopP() {
  if (params_.top_p >= 1.0f) return;
  // Probabilities at temperature 1 (llama.cpp applies top-p before temp).
  float max_logit = kNegInf;
  for (const Candidate& c : candidates_) max_logit = std::max(max_logit, c.logit);
  double total = 0;
  for (const Candidate& c : candidates_) total += std::exp(double{c.logit} - max_logit);
  const double target = static_cast<double>(params_.top_p) * total;

  // Walk best-first, sorting lazily in growing chunks: the nucleus is usually
  // a tiny fraction of the vocabulary, so a full sort would be wasted work.
  size_t sorted = candidates_sorted_ ? candidates_.size() : 0;
  size_t keep = candidates_.size();
  double cumulative = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    if (i == sorted) {
      const size_t next = std::min(candidates_.size(), std::max<size_t>(64, 4 * sorted));
      std::partial_sort(candidates_.begin() + sorted, candidates_.begin() + next, candidates_.end(),
                        Better());
      sorted = next;
    }
    cumulative += std::exp(double{candidates_[i].logit} - max_logit);
    if (cumulative >= target) {  // this token crosses p: it stays in
      keep = i + 1;
      break;
    }
  }
  candidates_.resize(keep);
  candidates_sorted_ = sorted >= keep;
}

void Sampler::ApplyMinP() {
  if (params_.min_p <= 0.0f) return;
  float max_logit = kNegInf;
  for (const Candidate& c : candidates_) max_logit = std::max(max_logit, c.logit);
  // p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p).
  const float threshold = max_logit + std::log(params_.min_p);
  // remove_if is stable for the kept elements, so sortedness survives; the
  // best candidate always passes.
  std::erase_if(candidates_, [threshold](const Candidate& c) { return c.logit < threshold; });
}

int32_t Sampler::Draw(double u) {
  // Scaled in double: logit / temperature stays finite even for tiny
  // temperatures, where float would overflow to inf and softmax to NaN.
  const double inv_temperature = 1.0 / static_cast<double>(params_.temperature);
  float max_logit = kNegInf;
  for (const Candidate& c : candidates_) max_logit = std::max(max_logit, c.logit);
  const double max_scaled = max_logit * inv_temperature;
  auto weight = [&](const Candidate& c) {
    return std::exp(c.logit * inv_temperature - max_scaled);
  };

  double total = 0;
  for (const Candidate& c : candidates_) total += weight(c);
  const double target = u * total;
  double cumulative = 0;
  int32_t last_positive = candidates_.front().id;
  for (const Candidate& c : candidates_) {
    const double w = weight(c);
    if (w <= 0) continue;
    cumulative += w;
    last_positive = c.id;
    if (target < cumulative) return c.id;
  }
  return last_positive;  // only reachable through rounding
}

}  // namespace ringlm
