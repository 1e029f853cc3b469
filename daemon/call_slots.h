// A bound on calls running at once (the node's Generate calls).
#ifndef RINGLM_DAEMON_CALL_SLOTS_H_
#define RINGLM_DAEMON_CALL_SLOTS_H_

#include <atomic>

namespace ringlm {

// CallSlots
//
// Purpose: at most `capacity` calls hold a slot at once; one more is refused
// (the caller answers RESOURCE_EXHAUSTED), never queued.
// Ownership: a plain counter; whoever takes a slot gives it back with
// Release, exactly once.
// Thread-safety: thread-safe (one atomic).
class CallSlots {
 public:
  explicit CallSlots(int capacity) : capacity_(capacity) {}
  CallSlots(const CallSlots&) = delete;
  CallSlots& operator=(const CallSlots&) = delete;

  // Takes a slot; false (and nothing taken) when all are taken.
  bool TryAcquire() {
    if (in_use_.fetch_add(1) < capacity_) return true;
    in_use_.fetch_sub(1);
    return false;
  }
  // Gives back a slot TryAcquire took.
  void Release() { in_use_.fetch_sub(1); }
  // Slots taken now (a refused TryAcquire may count for an instant).
  int in_use() const { return in_use_.load(); }

 private:
  const int capacity_;
  std::atomic<int> in_use_{0};
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_CALL_SLOTS_H_
