#include "inference/ops/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace ringlm {
namespace {

// [begin, end) of chunk `c` out of `chunks` over [0, n).
std::pair<int64_t, int64_t> ChunkBounds(int64_t n, int chunks, int c) {
  return {n * c / chunks, n * (c + 1) / chunks};
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(n_threads_ - 1);
  for (int i = 0; i < n_threads_ - 1; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn) {
  if (n <= 0) return;
  absl::MutexLock call_lock(&call_mu_);
  const int chunks = static_cast<int>(std::min<int64_t>(n, n_threads_));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    job_fn_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  const auto [begin, end] = ChunkBounds(n, chunks, 0);
  fn(begin, end);
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* pending) { return *pending == 0; }, &pending_));
  job_fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int worker_index) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n;
    int chunks;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || generation_ != seen; };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      seen = generation_;
      fn = job_fn_;
      n = job_n_;
      chunks = job_chunks_;
    }
    const int chunk = worker_index + 1;  // chunk 0 belongs to the caller
    if (chunk >= chunks) continue;       // fewer chunks than threads this time
    const auto [begin, end] = ChunkBounds(n, chunks, chunk);
    (*fn)(begin, end);
    absl::MutexLock lock(&mu_);
    --pending_;
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
