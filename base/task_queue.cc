#include "base/task_queue.h"

namespace ringlm {

TaskQueue::TaskQueue(std::string name, size_t max_pending, uint64_t max_pending_bytes)
    : name_(std::move(name)),
      max_pending_(max_pending),
      max_pending_bytes_(max_pending_bytes),
      thread_([this] { Loop(); }) {}

TaskQueue::~TaskQueue() { Stop(); }

bool TaskQueue::Post(std::function<void()> task, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || tasks_.size() >= max_pending_ || bytes > max_pending_bytes_ - bytes_) {
    return false;
  }
  tasks_.push_back(Task{std::move(task), bytes});
  bytes_ += bytes;
  return true;
}

void TaskQueue::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    tasks_.clear();
    bytes_ = 0;
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

size_t TaskQueue::pending() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

uint64_t TaskQueue::pending_bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

void TaskQueue::Loop() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](TaskQueue* q)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) { return q->stopping_ || !q->tasks_.empty(); },
          this));
      if (stopping_) return;
      task = std::move(tasks_.front().run);
      bytes_ -= tasks_.front().bytes;
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace ringlm
