// A single worker thread that runs queued tasks in order.
#ifndef RINGLM_BASE_TASK_QUEUE_H_
#define RINGLM_BASE_TASK_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringlm {

// Runs tasks one at a time, first in first out, on a thread it owns. Stop()
// (also run by the destructor) lets the running task finish, drops the rest,
// and joins the thread. Post and Stop are thread-safe; a task may Post.
// Bounded by the count of waiting tasks and by the bytes their owners say
// they hold (a queued network message, say).
class TaskQueue {
 public:
  explicit TaskQueue(std::string name, size_t max_pending = kMaxPending,
                     uint64_t max_pending_bytes = UINT64_MAX);
  ~TaskQueue();
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;

  // Returns false (and drops the task) after Stop, or when `max_pending`
  // tasks or `max_pending_bytes` bytes would be waiting with it. `bytes` is
  // what the task holds until it runs.
  bool Post(std::function<void()> task, uint64_t bytes = 0);
  void Stop();
  size_t pending() const;
  uint64_t pending_bytes() const;

  static constexpr size_t kMaxPending = 65536;

 private:
  void Loop();

  struct Task {
    std::function<void()> run;
    uint64_t bytes = 0;
  };

  const std::string name_;
  const size_t max_pending_;
  const uint64_t max_pending_bytes_;
  mutable absl::Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ringlm

#endif  // RINGLM_BASE_TASK_QUEUE_H_
