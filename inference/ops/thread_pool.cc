#include "inference/ops/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace ringlm {
namespace {

// A hint to the CPU that we are spinning.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// [begin, end) of chunk `c` out of `chunks` over [0, n).
std::pair<int64_t, int64_t> ChunkBounds(int64_t n, int chunks, int c) {
  return {n * c / chunks, n * (c + 1) / chunks};
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(n_threads_ - 1);
  for (int i = 0; i < n_threads_ - 1; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stop_.store(true, std::memory_order_release);
  }
  for (std::thread& t : workers_) t.join();
}

template <typename Ready>
void ThreadPool::SpinThenAwait(std::atomic<bool>* sleeping, const Ready& ready) {
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
  for (uint32_t spins = 0; !ready(); ++spins) {
    if ((spins & 255u) != 255u || std::chrono::steady_clock::now() <= spin_until) {
      CpuRelax();
      continue;
    }
    if (sleeping != nullptr) sleeping->store(true);
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
    }
    if (sleeping != nullptr) sleeping->store(false);
    return;
  }
}

void ThreadPool::ParallelForImpl(int64_t n, Call call, void* ctx) {
  if (n <= 0) return;
  absl::MutexLock call_lock(&call_mu_);
  const int chunks = static_cast<int>(std::min<int64_t>(n, int64_t{n_threads_} * kChunksPerThread));
  if (n_threads_ == 1 || chunks == 1) {
    call(ctx, 0, n);
    return;
  }
  job_call_ = call;
  job_ctx_ = ctx;
  job_n_ = n;
  done_.store(0, std::memory_order_relaxed);
  claim_.store(static_cast<uint64_t>(chunks) << 32, std::memory_order_release);
  {
    absl::MutexLock lock(&mu_);  // wakes sleeping workers on unlock
    generation_.fetch_add(1, std::memory_order_release);
  }
  RunChunks();
  // Every chunk is claimed; wait for those still running elsewhere.
  SpinThenAwait(&caller_sleeping_, [&] { return done_.load() == chunks; });
}

void ThreadPool::RunChunks() {
  while (true) {
    const uint64_t claim = claim_.fetch_add(1, std::memory_order_acq_rel);
    const auto chunks = static_cast<uint32_t>(claim >> 32);
    const auto chunk = static_cast<uint32_t>(claim);
    if (chunk >= chunks) return;
    const auto [begin, end] =
        ChunkBounds(job_n_, static_cast<int>(chunks), static_cast<int>(chunk));
    job_call_(job_ctx_, begin, end);
    // The last chunk wakes a sleeping caller. (The caller sets its flag
    // before it checks done_, and we check the flag after bumping done_, so
    // one of us sees the other.)
    if (done_.fetch_add(1) + 1 == static_cast<int>(chunks) && caller_sleeping_.load()) {
      absl::MutexLock lock(&mu_);
    }
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    auto ready = [&] {
      return stop_.load(std::memory_order_acquire) ||
             generation_.load(std::memory_order_acquire) != seen;
    };
    SpinThenAwait(nullptr, ready);
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    RunChunks();
  }
}

namespace {

// Physical cores among `allowed` CPUs from sysfs topology; 0 if unreadable.
int CountCoresSysfs(const cpu_set_t* allowed) {
  namespace fs = std::filesystem;
  std::set<std::pair<int, int>> cores;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/devices/system/cpu", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 4 || name.compare(0, 3, "cpu") != 0 ||
        !std::all_of(name.begin() + 3, name.end(), [](char c) { return std::isdigit(c); })) {
      continue;
    }
    const int cpu = std::stoi(name.substr(3));
    if (allowed != nullptr && (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, allowed))) continue;
    std::ifstream core_file(entry.path() / "topology/core_id");
    std::ifstream pkg_file(entry.path() / "topology/physical_package_id");
    int core = -1;
    int pkg = -1;
    if (!(core_file >> core) || !(pkg_file >> pkg)) continue;
    cores.insert({pkg, core});
  }
  return static_cast<int>(cores.size());
}

// Physical cores from /proc/cpuinfo ("physical id", "core id"); 0 if unreadable.
int CountCoresCpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int pkg = 0;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = line.substr(colon + 1);
    if (key == "physical id") pkg = std::atoi(value.c_str());
    if (key == "core id") cores.insert({pkg, std::atoi(value.c_str())});
  }
  return static_cast<int>(cores.size());
}

}  // namespace

int DefaultThreadCount() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool have_mask = sched_getaffinity(0, sizeof(allowed), &allowed) == 0;
  int n = CountCoresSysfs(have_mask ? &allowed : nullptr);
  if (n <= 0) n = CountCoresCpuinfo();
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, n);
}

}  // namespace ringlm
