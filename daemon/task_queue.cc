#include "daemon/task_queue.h"

namespace ringlm {

TaskQueue::TaskQueue(std::string name) : name_(std::move(name)), thread_([this] { Loop(); }) {}

TaskQueue::~TaskQueue() { Stop(); }

bool TaskQueue::Post(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || tasks_.size() >= kMaxPending) return false;
  tasks_.push_back(std::move(task));
  return true;
}

void TaskQueue::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    tasks_.clear();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

size_t TaskQueue::pending() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
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
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace ringlm
