// A fixed-size pool of worker threads for data-parallel kernels.
//
// Ownership: the pool owns its workers; they start in the constructor and are
// stopped and joined in the destructor (which must not run while a
// ParallelFor is in progress).
// Thread safety: ParallelFor is meant to be called from one thread at a time;
// concurrent callers are serialized by an internal mutex (each call still runs
// to completion with all workers). `fn` must not call ParallelFor on the same
// pool (that would deadlock) and must not throw.
// Kernels take a `ThreadPool*`; nullptr means "run inline on the caller".
#ifndef RINGLM_INFERENCE_OPS_THREAD_POOL_H_
#define RINGLM_INFERENCE_OPS_THREAD_POOL_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringlm {

class ThreadPool {
 public:
  // Starts `n_threads - 1` workers; the caller of ParallelFor is the last
  // thread. Precondition: n_threads >= 1 (smaller values are treated as 1).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Splits [0, n) into at most n_threads() contiguous, non-empty chunks, runs
  // fn(begin, end) once per chunk (chunk 0 on the calling thread, the others on
  // workers) and returns when all have finished. n <= 0 does nothing; with
  // one thread or n == 1 it runs fn(0, n) inline.
  void ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

 private:
  void WorkerLoop(int worker_index);

  const int n_threads_;
  std::vector<std::thread> workers_;

  absl::Mutex call_mu_;  // serializes ParallelFor callers

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped once per job
  const std::function<void(int64_t, int64_t)>* job_fn_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t job_n_ ABSL_GUARDED_BY(mu_) = 0;
  int job_chunks_ ABSL_GUARDED_BY(mu_) = 0;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // worker chunks not yet finished
};

// Number of physical cores this process may run on (SMT siblings counted
// once), read from /sys topology or /proc/cpuinfo; falls back to
// std::thread::hardware_concurrency(). Always >= 1.
int DefaultThreadCount();

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_THREAD_POOL_H_
