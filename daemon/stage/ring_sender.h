// A stage's outgoing ring messages, sent off its worker thread.
#ifndef RINGLM_DAEMON_STAGE_RING_SENDER_H_
#define RINGLM_DAEMON_STAGE_RING_SENDER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "base/task_queue.h"

namespace ringlm {

// Two lanes per destination node, each a thread that runs its sends in the
// order they were posted: one for steps (and what must stay in order with
// them), one for tokens delivered to an origin. A request's steps stay in
// order, and so do its tokens; each send waits for its reply, so a
// delivery's round trip never holds up the next step to the same node
// (with several steps in flight, both go there at once). A slow or hung
// node holds up its own lanes only, never the stage's compute or the other
// lanes. Each lane is bounded in messages and bytes;
// so is the number of lanes (a stage talks to its next stage and to the
// origins of its requests). Stop() lets each lane finish its running send
// (every call has a deadline) and drops the rest. Thread-safe.
class RingSender {
 public:
  struct Limits {
    size_t max_lanes = 256;
    size_t max_pending = 4096;                         // per lane
    uint64_t max_pending_bytes = uint64_t{256} << 20;  // per lane
  };
  explicit RingSender(Limits limits);
  ~RingSender();

  enum class Lane { kSteps, kTokens };
  // Runs `send` on `to`'s lane `lane`. False, with nothing queued, when
  // that lane is full, the lanes are all taken, or the sender is stopping.
  // `bytes` is what the task holds until it runs.
  bool Post(const std::string& to, std::function<void()> send, uint64_t bytes,
            Lane lane = Lane::kSteps);
  void Stop();
  // Messages waiting on all lanes.
  size_t pending() const;

 private:
  const Limits limits_;
  mutable absl::Mutex mu_;
  // Shared: a send in progress keeps its lane alive through Stop.
  using LaneKey = std::pair<std::string, Lane>;
  std::map<LaneKey, std::shared_ptr<TaskQueue>> lanes_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_STAGE_RING_SENDER_H_
