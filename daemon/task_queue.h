// A single worker thread that runs queued tasks in order.
#ifndef RINGLM_DAEMON_TASK_QUEUE_H_
#define RINGLM_DAEMON_TASK_QUEUE_H_

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
class TaskQueue {
 public:
  explicit TaskQueue(std::string name);
  ~TaskQueue();
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;

  // Returns false (and drops the task) after Stop or when `max_pending`
  // tasks are already waiting.
  bool Post(std::function<void()> task);
  void Stop();
  size_t pending() const;

  static constexpr size_t kMaxPending = 65536;

 private:
  void Loop();

  const std::string name_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_TASK_QUEUE_H_
