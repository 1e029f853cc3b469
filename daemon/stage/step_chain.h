// The steps of one request that travel the ring at once, as its last stage
// sent them (docs/speculation.md, "Steps in flight").
#ifndef RINGLM_DAEMON_STAGE_STEP_CHAIN_H_
#define RINGLM_DAEMON_STAGE_STEP_CHAIN_H_

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace ringlm {

// StepChain
//
// Purpose: the last stage's record of a request's steps in flight. The
// oldest starts with a sampled token; every later one is sent before the
// steps ahead of it are verified, betting that they are accepted whole and
// that its first token is the one sampled after them. When a verification
// shows a bet lost, every step in flight is void: the branch goes up, and
// steps of earlier branches are dropped wherever they are.
// Bounds: the caller sends at most kMaxStepsInFlight steps.
// Thread-safety: thread-compatible (one per request, on the stage worker).
class StepChain {
 public:
  // `branch`: the branch of the step the chain starts from. `unknown_flight`:
  // steps of this request may be in flight that the chain never saw (its
  // last stage lost track of the request): the first Advance voids them.
  StepChain(uint32_t branch, bool unknown_flight) : branch_(branch), blind_(unknown_flight) {}

  uint32_t branch() const { return branch_; }
  // A step of `branch` was sent before the chain's branch began: drop it.
  bool IsVoid(uint32_t branch) const { return branch < branch_; }
  size_t in_flight() const { return steps_.size(); }
  // Steps it never saw may be in flight (until the first Advance).
  bool blind() const { return blind_; }
  // The position after the last token sent; `from` when none is in flight.
  uint32_t End(uint32_t from) const;
  // The tokens of the steps in flight, in order, from the oldest's first.
  std::span<const int32_t> tokens() const { return tokens_; }

  // Records a step sent on the current branch: `tokens` at `position`,
  // which follows the steps in flight (End()).
  void Sent(uint32_t position, std::span<const int32_t> tokens);

  enum class Next {
    kIdle,       // no step in flight: the caller sends the next one
    kContinues,  // the oldest in flight goes on from `valid` with `token`
    kVoided,     // the steps in flight bet wrong: void, branch up
  };
  // The oldest step in flight (if the chain has it) was verified: `valid`
  // positions stand and `token` was sampled after them.
  Next Advance(uint32_t valid, int32_t token);

 private:
  struct Step {
    uint32_t position = 0;
    uint32_t size = 0;
  };
  void Clear();

  uint32_t branch_;
  bool blind_;
  std::deque<Step> steps_;
  std::vector<int32_t> tokens_;  // of steps_, in order
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_STAGE_STEP_CHAIN_H_
