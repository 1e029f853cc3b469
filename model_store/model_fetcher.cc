#include "model_store/model_fetcher.h"

#include <algorithm>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

using Clock = std::chrono::steady_clock;

// A source this Fetch may use, with what it said it holds.
struct SourceSlot {
  TensorSource* source = nullptr;
  std::vector<bool> holds;  // one per manifest tensor
};

// The shared state of one Fetch: a queue of tensors (largest first) that
// worker threads take from, each worker running one source at a time.
// Thread-safe; every member the workers share is guarded or atomic.
class FetchRun {
 public:
  FetchRun(ModelCache* cache, const FetchOptions& options, std::vector<size_t> order,
           std::vector<SourceSlot> sources, uint64_t bytes_total)
      : cache_(cache),
        options_(options),
        order_(std::move(order)),
        sources_(std::move(sources)),
        bytes_total_(bytes_total),
        start_(Clock::now()),
        jobs_(order_.size()),
        claimed_(sources_.size(), 0) {}

  // A worker thread's body: claims sources until none is left that holds a
  // tensor still to fetch.
  void Worker() {
    while (const SourceSlot* slot = ClaimSource()) RunSource(*slot);
  }

  void Fail(absl::Status s) {
    absl::MutexLock lock(&mu_);
    FailLocked(std::move(s));
  }

  // After every worker has been joined: the result, and the sources that
  // sent bad chunks.
  absl::StatusOr<FetchStats> Finish(std::set<std::string>* bad_sources) {
    const uint64_t done = bytes_done_.load();
    const Clock::time_point now = Clock::now();
    if (options_.progress) options_.progress(Progress(done, now));
    absl::MutexLock lock(&mu_);
    *bad_sources = bad_;
    if (!error_.ok()) return error_;
    for (size_t j = 0; j < jobs_.size(); ++j) {
      if (jobs_[j].state != State::kDone) {
        const std::string last = jobs_[j].last_error.empty()
                                     ? std::string()
                                     : absl::StrCat(" (last error: ", jobs_[j].last_error, ")");
        return absl::UnavailableError(
            absl::StrCat("no usable source left for tensor '", Name(j), "'", last));
      }
    }
    FetchStats stats = stats_;
    stats.bytes = done;
    stats.seconds = std::chrono::duration<double>(now - start_).count();
    return stats;
  }

 private:
  enum class State { kQueued, kInFlight, kDone };
  struct Job {
    State state = State::kQueued;
    int attempts = 0;
    std::string last_error;
  };
  // What became of one call to a source.
  enum class Outcome { kCommitted, kTransportError, kBadSource, kStop };
  // Why on_chunk stopped a call early.
  enum class Stop { kNone, kBadChunk, kAbort };

  const std::string& Name(size_t job) const {
    return cache_->manifest().tensors()[order_[job]].name;
  }

  bool Cancelled() const { return options_.cancelled && options_.cancelled(); }

  bool IsBad(const SourceSlot& slot) {
    absl::MutexLock lock(&mu_);
    return bad_.contains(slot.source->name());
  }

  const SourceSlot* ClaimSource() {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return nullptr;
    for (size_t s = 0; s < sources_.size(); ++s) {
      if (claimed_[s] >= std::max(1, options_.streams_per_source)) continue;
      for (size_t j = 0; j < jobs_.size(); ++j) {
        if (jobs_[j].state != State::kDone && sources_[s].holds[order_[j]]) {
          ++claimed_[s];
          return &sources_[s];
        }
      }
    }
    return nullptr;
  }

  void RunSource(const SourceSlot& slot) {
    int consecutive_failures = 0;
    while (true) {
      if (Cancelled()) return Fail(absl::CancelledError("model fetch cancelled"));
      if (IsBad(slot)) return;  // another stream of this source sent a bad chunk
      const int job = TakeJob(slot.holds);
      if (job < 0) return;
      switch (FetchOne(slot, static_cast<size_t>(job))) {
        case Outcome::kCommitted:
          consecutive_failures = 0;
          break;
        case Outcome::kTransportError:
          if (++consecutive_failures >= 2) {
            spdlog::warn("source '{}' failed twice in a row; not using it for this fetch",
                         slot.source->name());
            return;
          }
          break;
        case Outcome::kBadSource:
        case Outcome::kStop:
          return;
      }
    }
  }

  // The next queued tensor this source holds, marked in flight; -1 when there
  // is none and none can come back (nothing it holds is in flight elsewhere).
  int TakeJob(const std::vector<bool>& holds) {
    absl::MutexLock lock(&mu_);
    while (true) {
      if (!error_.ok()) return -1;
      bool may_return = false;
      for (size_t j = 0; j < jobs_.size(); ++j) {
        if (!holds[order_[j]]) continue;
        if (jobs_[j].state == State::kQueued) {
          jobs_[j].state = State::kInFlight;
          return static_cast<int>(j);
        }
        may_return |= jobs_[j].state == State::kInFlight;
      }
      if (!may_return) return -1;
      cv_.Wait(&mu_);
    }
  }

  Outcome FetchOne(const SourceSlot& slot, size_t job) {
    const size_t tensor = order_[job];
    const TensorDigest& digest = cache_->manifest().tensors()[tensor];
    const uint64_t first = cache_->FirstMissingChunk(tensor);
    uint64_t expected = first;
    Stop stop = Stop::kNone;
    std::string why;
    absl::Status call;
    if (first < digest.chunks()) {
      call = slot.source->Fetch(tensor, first, [&](uint64_t chunk, std::string_view bytes) {
        if (Cancelled()) {
          Fail(absl::CancelledError("model fetch cancelled"));
          stop = Stop::kAbort;
          return false;
        }
        if (Failed()) {
          stop = Stop::kAbort;
          return false;
        }
        if (chunk != expected || chunk >= digest.chunks()) {
          stop = Stop::kBadChunk;
          why = absl::StrCat("sent chunk ", chunk, " where chunk ", expected, " of ",
                             digest.chunks(), " was due");
          return false;
        }
        absl::Status s = cache_->WriteChunk(tensor, chunk, bytes);
        if (absl::IsDataLoss(s)) {
          stop = Stop::kBadChunk;
          why = std::string(s.message());
          return false;
        }
        if (!s.ok()) {  // our disk, not the peer: the whole fetch fails
          Fail(s);
          stop = Stop::kAbort;
          return false;
        }
        ++expected;
        AddBytes(bytes.size());
        return true;
      });
    }

    if (stop == Stop::kNone && call.ok()) {
      if (cache_->FirstMissingChunk(tensor) < digest.chunks()) {
        call = absl::DataLossError(absl::StrCat("ended the tensor early, at chunk ", expected));
      } else {
        // Outside mu_: fdatasync and the held-file rewrite take a while.
        const absl::Status s = cache_->CommitTensor(tensor);
        absl::MutexLock lock(&mu_);
        if (!s.ok()) {
          FailLocked(s);
          RequeueLocked(job, "", false);
          return Outcome::kStop;
        }
        jobs_[job].state = State::kDone;
        ++stats_.tensors;
        cv_.SignalAll();
        return Outcome::kCommitted;
      }
    }
    if (stop == Stop::kBadChunk) {
      spdlog::warn("source '{}' sent a bad chunk of tensor '{}': {}; avoiding it",
                   slot.source->name(), digest.name, why);
    } else if (stop == Stop::kNone) {
      spdlog::warn("fetching tensor '{}' from '{}' failed: {}", digest.name, slot.source->name(),
                   call.ToString());
    }
    absl::MutexLock lock(&mu_);
    if (stop == Stop::kAbort) {
      RequeueLocked(job, "", false);
      return Outcome::kStop;
    }
    if (stop == Stop::kBadChunk) {
      ++stats_.bad_chunks;
      bad_.insert(slot.source->name());
      RequeueLocked(job, absl::StrCat("bad chunk from '", slot.source->name(), "'"), true);
      return Outcome::kBadSource;
    }
    ++stats_.failed_calls;
    RequeueLocked(job, call.ToString(), true);
    return Outcome::kTransportError;
  }

  void RequeueLocked(size_t job, std::string reason, bool count_attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Job& j = jobs_[job];
    j.state = State::kQueued;
    if (count_attempt) {
      j.last_error = std::move(reason);
      if (++j.attempts >= std::max(1, options_.max_attempts_per_tensor)) {
        FailLocked(absl::UnavailableError(absl::StrCat(
            "tensor '", Name(job), "' failed ", j.attempts, " times (last: ", j.last_error, ")")));
      }
    }
    cv_.SignalAll();
  }

  void FailLocked(absl::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (error_.ok()) error_ = std::move(s);
    failed_.store(true);
    cv_.SignalAll();
  }

  bool Failed() const { return failed_.load(); }

  FetchProgress Progress(uint64_t done, Clock::time_point now) const {
    FetchProgress p;
    p.bytes_done = done;
    p.bytes_total = bytes_total_;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    if (seconds > 0) p.bytes_per_second = static_cast<double>(done) / seconds;
    if (p.bytes_per_second > 0 && done < bytes_total_) {
      p.eta_seconds = static_cast<double>(bytes_total_ - done) / p.bytes_per_second;
    }
    return p;
  }

  // Counts verified bytes; the thread that crosses a second reports.
  void AddBytes(uint64_t n) {
    const uint64_t done = bytes_done_.fetch_add(n) + n;
    if (!options_.progress) return;
    const Clock::time_point now = Clock::now();
    const int64_t now_ns = (now - start_).count();
    int64_t last = last_report_ns_.load();
    if (now_ns - last < std::chrono::nanoseconds(std::chrono::seconds(1)).count()) return;
    if (!last_report_ns_.compare_exchange_strong(last, now_ns)) return;  // another reports
    options_.progress(Progress(done, now));
  }

  ModelCache* const cache_;
  const FetchOptions& options_;
  const std::vector<size_t> order_;  // job -> tensor, largest first
  const std::vector<SourceSlot> sources_;
  const uint64_t bytes_total_;
  const Clock::time_point start_;
  std::atomic<uint64_t> bytes_done_{0};
  std::atomic<int64_t> last_report_ns_{0};  // since start_
  std::atomic<bool> failed_{false};         // error_ is set (read without the lock)

  absl::Mutex mu_;
  absl::CondVar cv_;  // a job changed state, or the run failed
  std::vector<Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<int> claimed_ ABSL_GUARDED_BY(mu_);  // threads per source
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  FetchStats stats_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> bad_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

ModelFetcher::ModelFetcher(ModelCache* cache, FetchOptions options)
    : cache_(cache), options_(std::move(options)) {}

std::set<std::string> ModelFetcher::avoided() const {
  absl::MutexLock lock(&mu_);
  return avoided_;
}

absl::StatusOr<FetchStats> ModelFetcher::Fetch(const std::vector<size_t>& wanted,
                                               const std::vector<TensorSource*>& sources) {
  absl::MutexLock serial(&fetch_mu_);
  const Clock::time_point start = Clock::now();
  const std::vector<TensorDigest>& digests = cache_->manifest().tensors();
  std::vector<size_t> missing;
  for (size_t t : wanted) {
    if (t >= digests.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", t, " is not in the manifest (", digests.size(), " tensors)"));
    }
    if (!cache_->Holds(t)) missing.push_back(t);
  }
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  if (missing.empty()) {
    if (options_.progress) options_.progress(FetchProgress{});
    FetchStats stats;
    stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return stats;
  }

  const std::set<std::string> avoid = avoided();
  std::vector<SourceSlot> usable;
  for (TensorSource* s : sources) {
    if (s == nullptr || avoid.contains(s->name())) continue;
    std::vector<bool> holds = s->Holdings();
    if (holds.size() != digests.size()) {
      spdlog::warn("source '{}' reports holdings of {} tensors, the manifest has {}; skipping it",
                   s->name(), holds.size(), digests.size());
      continue;
    }
    usable.push_back(SourceSlot{s, std::move(holds)});
  }
  for (size_t t : missing) {
    const bool held =
        std::any_of(usable.begin(), usable.end(), [t](const SourceSlot& s) { return s.holds[t]; });
    if (!held) {
      return absl::UnavailableError(
          absl::StrCat("no usable source holds tensor '", digests[t].name, "'"));
    }
  }

  // Largest first, so the long transfers start early and overlap.
  std::stable_sort(missing.begin(), missing.end(),
                   [&](size_t a, size_t b) { return digests[a].size > digests[b].size; });
  uint64_t total = 0;
  for (size_t t : missing) {
    // Chunks written by an earlier, interrupted fetch are not fetched again.
    total += digests[t].size - std::min(digests[t].size, cache_->FirstMissingChunk(t) *
                                                             cache_->manifest().chunk_bytes());
  }
  const size_t n_threads =
      std::min(usable.size(), static_cast<size_t>(std::max(1, options_.max_parallel_sources))) *
      static_cast<size_t>(std::max(1, options_.streams_per_source));
  FetchRun run(cache_, options_, std::move(missing), std::move(usable), total);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n_threads; ++i) {
    try {
      threads.emplace_back([&run] { run.Worker(); });
    } catch (const std::system_error& e) {
      run.Fail(
          absl::ResourceExhaustedError(absl::StrCat("cannot start a fetch thread: ", e.what())));
      break;
    }
  }
  for (std::thread& t : threads) t.join();

  std::set<std::string> bad;
  absl::StatusOr<FetchStats> result = run.Finish(&bad);
  {
    absl::MutexLock lock(&mu_);
    avoided_.insert(bad.begin(), bad.end());
  }
  return result;
}

}  // namespace ringlm
