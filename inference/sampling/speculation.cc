#include "inference/sampling/speculation.h"

#include <algorithm>
#include <cmath>

namespace ringlm {
namespace {

// Where the last `n` tokens of `history` occurred before, latest first;
// history.size() when nowhere. The match may overlap the key itself.
size_t LatestEarlierMatch(std::span<const int32_t> history, size_t n) {
  const size_t size = history.size();
  if (size <= n) return size;
  const std::span<const int32_t> key = history.subspan(size - n);
  for (size_t start = size - n; start-- > 0;) {
    if (std::equal(key.begin(), key.end(), history.begin() + static_cast<ptrdiff_t>(start))) {
      return start;
    }
  }
  return size;
}

}  // namespace

std::vector<int32_t> DraftByNgram(std::span<const int32_t> history, uint32_t max_drafts) {
  if (max_drafts == 0) return {};
  for (size_t n : {size_t{3}, size_t{2}, size_t{1}}) {
    const size_t start = LatestEarlierMatch(history, n);
    if (start == history.size()) continue;
    // What followed the earlier occurrence: at least one token, since it
    // ended before the key did.
    const size_t from = start + n;
    const size_t count = std::min<size_t>(max_drafts, history.size() - from);
    return {history.begin() + static_cast<ptrdiff_t>(from),
            history.begin() + static_cast<ptrdiff_t>(from + count)};
  }
  return {};
}

DraftBudget::DraftBudget(uint32_t max_drafts) : max_(std::min(max_drafts, kMaxDrafts)) {}

double DraftBudget::MatchRate() const { return (matched_ + 1) / (matched_ + rejected_ + 2); }

double DraftBudget::MatchOdds(uint32_t guesses) const {
  if (matched_ + rejected_ == 0) return 0;  // no draft checked yet: no evidence
  return std::pow(MatchRate(), static_cast<double>(guesses));
}

uint32_t DraftBudget::Next() {
  if (max_ == 0) return 0;
  if (plain_wanted_) {
    plain_wanted_ = false;
    return 0;
  }
  const double q = MatchRate();
  const double t0 = plain_trip_ > 0 ? plain_trip_ : 1;
  const double m = plain_trip_ > 0 ? draft_seconds_ : 0;
  uint32_t best = 0;
  double best_rate = 1 / t0;
  double expected = 1;  // tokens a step of k drafts yields
  double power = 1;
  for (uint32_t k = 1; k <= max_; ++k) {
    power *= q;
    expected += power;
    const double rate = expected / (t0 + m * k);
    if (rate > best_rate) {
      best = k;
      best_rate = rate;
    }
  }
  if (best == 0 && ++since_draft_ >= kProbeEvery) best = 1;  // look again
  if (best > 0) since_draft_ = 0;
  return best;
}

void DraftBudget::Record(uint32_t drafted, uint32_t accepted, double trip_seconds) {
  auto smooth = [](double& average, double sample) {
    average = average == 0 ? sample : average + kSmoothing * (sample - average);
  };
  if (trip_seconds > 0) {
    if (drafted == 0) {
      smooth(plain_trip_, trip_seconds);
    } else if (plain_trip_ > 0) {
      smooth(draft_seconds_, std::max(0.0, trip_seconds - plain_trip_) / drafted);
    } else {
      plain_wanted_ = true;  // to measure the drafts' cost against
    }
  }
  if (drafted == 0) return;
  matched_ = matched_ * kDecay + std::min(accepted, drafted);
  rejected_ = rejected_ * kDecay + (accepted < drafted ? 1 : 0);
}

}  // namespace ringlm
