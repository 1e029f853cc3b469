#include "inference/sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ringlm {
namespace {

double Clean(float logit) {
  return std::isnan(logit) ? -std::numeric_limits<double>::infinity() : logit;
}

}  // namespace

TokenLogprobs ComputeLogprobs(std::span<const float> logits, int32_t chosen, int32_t top_n) {
  double max = -std::numeric_limits<double>::infinity();
  for (float l : logits) max = std::max(max, Clean(l));
  double sum = 0;
  for (float l : logits) sum += std::exp(Clean(l) - max);
  const double log_z = max + std::log(sum);
  auto logprob = [&](int32_t id) { return static_cast<float>(Clean(logits[id]) - log_z); };

  TokenLogprobs out;
  out.chosen = {chosen, logprob(chosen)};
  const size_t n = std::min<size_t>(static_cast<size_t>(std::max(top_n, 0)), logits.size());
  if (n == 0) return out;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  auto better = [&](int32_t a, int32_t b) {
    const double la = Clean(logits[a]), lb = Clean(logits[b]);
    return la != lb ? la > lb : a < b;
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), better);
  out.top.reserve(n);
  for (size_t i = 0; i < n; ++i) out.top.push_back({ids[i], logprob(ids[i])});
  return out;
}

}  // namespace ringlm
