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
//
// Scheduling: a call splits [0, n) into up to kChunksPerThread chunks per
// thread, and every thread, the caller included, claims chunks from a shared
// counter until none is left. Which thread runs which chunk is unspecified,
// so `fn`'s result for an index must not depend on it. A worker that is
// descheduled (several daemons sharing the cores) therefore never holds up a
// call: the caller runs the chunks it did not claim, and waits only for
// chunks already running.
//
// Cost: decode calls ParallelFor several times per layer per token, so a call
// is cheap: workers spin for a short while (kSpinMicros) after each job
// before sleeping on a mutex, the caller spins as long while waiting for
// chunks in progress and then sleeps too, and the template overload passes
// `fn` by pointer (no std::function and no allocation). Spinning burns a core
// for up to kSpinMicros after each call, never longer.
#ifndef RINGLM_INFERENCE_OPS_THREAD_POOL_H_
#define RINGLM_INFERENCE_OPS_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <type_traits>
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

  // Splits [0, n) into at most kChunksPerThread * n_threads() contiguous,
  // non-empty chunks, runs fn(begin, end) once per chunk, on the caller or a
  // worker, and returns when all have finished. n <= 0 does nothing; with one
  // thread or n == 1 it runs fn(0, n) inline.
  void ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn) {
    ParallelForImpl(n, &CallStdFunction, const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Same, for any callable fn(int64_t begin, int64_t end), without wrapping
  // it in a std::function.
  template <typename Fn, typename = std::enable_if_t<!std::is_same_v<
                             std::decay_t<Fn>, std::function<void(int64_t, int64_t)>>>>
  void ParallelFor(int64_t n, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    ParallelForImpl(
        n, [](void* ctx, int64_t b, int64_t e) { (*static_cast<F*>(ctx))(b, e); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // How long an idle worker, or a caller waiting for chunks in progress,
  // spins before it sleeps.
  static constexpr int kSpinMicros = 200;
  // Chunks per thread: enough that a thread that starts late finds work
  // left, few enough that claiming stays cheap.
  static constexpr int kChunksPerThread = 4;

 private:
  using Call = void (*)(void* ctx, int64_t begin, int64_t end);
  static void CallStdFunction(void* ctx, int64_t begin, int64_t end) {
    (*static_cast<const std::function<void(int64_t, int64_t)>*>(ctx))(begin, end);
  }
  void ParallelForImpl(int64_t n, Call call, void* ctx);
  void WorkerLoop();
  // Claims and runs chunks of the current job until none is left.
  void RunChunks();
  // Waits, spinning and then sleeping, until `ready()` (read under mu_ when
  // sleeping) holds.
  template <typename Ready>
  void SpinThenAwait(std::atomic<bool>* sleeping, const Ready& ready);

  const int n_threads_;
  std::vector<std::thread> workers_;

  absl::Mutex call_mu_;  // serializes ParallelFor callers

  // The current job. Written by the caller (holding call_mu_) before it
  // publishes the job in claim_ (release); read by a thread only after it
  // claimed a chunk of the job (acquire), which keeps the job alive: the
  // caller rewrites it only after every chunk is done.
  Call job_call_ = nullptr;
  void* job_ctx_ = nullptr;
  int64_t job_n_ = 0;
  // The job's chunk count (high 32 bits) and the next chunk to claim (low 32
  // bits). A claim past the count fails; a job takes at most its chunk count
  // plus one failed claim per thread, so the low half never overflows.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> done_{0};             // chunks of this job finished
  std::atomic<uint64_t> generation_{0};  // bumped for each job, to wake workers
  std::atomic<bool> stop_{false};
  std::atomic<bool> caller_sleeping_{false};

  // Sleeping workers wait on mu_ for generation_ or stop_ to change, and a
  // sleeping caller for done_; writers of those take mu_ when someone may be
  // sleeping, so the waiters are re-checked.
  absl::Mutex mu_;
};

// Number of physical cores this process may run on (SMT siblings counted
// once), read from /sys topology or /proc/cpuinfo; falls back to
// std::thread::hardware_concurrency(). Always >= 1.
int DefaultThreadCount();

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_OPS_THREAD_POOL_H_
