#include "daemon/stage/step_chain.h"

#include <cassert>

namespace ringlm {

uint32_t StepChain::End(uint32_t from) const {
  return steps_.empty() ? from : steps_.back().position + steps_.back().size;
}

void StepChain::Sent(uint32_t position, std::span<const int32_t> tokens) {
  assert(!tokens.empty() && (steps_.empty() || position == End(0)));
  steps_.push_back({position, static_cast<uint32_t>(tokens.size())});
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
}

void StepChain::Clear() {
  steps_.clear();
  tokens_.clear();
}

StepChain::Next StepChain::Advance(uint32_t valid, int32_t token) {
  if (blind_) {
    blind_ = false;
    ++branch_;
    Clear();
    return Next::kVoided;
  }
  if (steps_.empty()) return Next::kIdle;
  // The verified step leaves the chain.
  const Step done = steps_.front();
  steps_.pop_front();
  tokens_.erase(tokens_.begin(), tokens_.begin() + done.size);
  if (steps_.empty()) return Next::kIdle;
  if (steps_.front().position == valid && tokens_.front() == token) return Next::kContinues;
  ++branch_;
  Clear();
  return Next::kVoided;
}

}  // namespace ringlm
