#include "daemon/model_fetch/layer_fetcher.h"

#include <sys/statvfs.h>

#include "absl/strings/str_cat.h"
#include "daemon/model_fetch/peer_tensor_source.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

std::string FormatRange(LayerRange r) { return absl::StrCat("[", r.first, ", ", r.last, ")"); }

// Free bytes on the file system that holds `dir`; nullopt when unknown.
std::optional<uint64_t> FreeBytes(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return std::nullopt;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

}  // namespace

LayerFetcher::LayerFetcher(LayerFetcherOptions options, ModelCache* cache, PeerClient* client,
                           LayerFetcherMetrics metrics,
                           std::function<void(std::shared_ptr<const ClusterSnapshot>)> on_fetched)
    : options_(std::move(options)),
      cache_(cache),
      client_(client),
      metrics_(metrics),
      on_fetched_(std::move(on_fetched)),
      fetcher_(cache, [this] {
        FetchOptions f = options_.fetch;
        f.cancelled = [this] { return Superseded(running_generation_.load()); };
        f.progress = [this](const FetchProgress& p) {
          if (metrics_.pending_bytes != nullptr) {
            metrics_.pending_bytes->Set(static_cast<double>(p.bytes_total - p.bytes_done));
          }
          if (p.bytes_done >= p.bytes_total) return;  // the summary line follows
          spdlog::info("model fetch: {:.1f} of {:.1f} MB, {:.1f} MB/s, ETA {:.0f} s",
                       p.bytes_done / 1e6, p.bytes_total / 1e6, p.bytes_per_second / 1e6,
                       p.eta_seconds);
        };
        return f;
      }()) {
  thread_ = std::thread([this] { Loop(); });
}

LayerFetcher::~LayerFetcher() { Stop(); }

void LayerFetcher::Request(std::shared_ptr<const ClusterSnapshot> snapshot, LayerRange range,
                           std::vector<size_t> tensors) {
  absl::MutexLock lock(&mu_);
  job_ = Job{std::move(snapshot), range, std::move(tensors), ++generation_};
}

void LayerFetcher::Cancel() {
  absl::MutexLock lock(&mu_);
  job_.reset();
  ++generation_;
}

void LayerFetcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool LayerFetcher::Superseded(uint64_t generation) const {
  absl::MutexLock lock(&mu_);
  return stopping_ || generation != generation_;
}

void LayerFetcher::Loop() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &LayerFetcher::HasWorkLocked));
      if (stopping_) return;
      job = *job_;
    }
    running_generation_ = job.generation;
    absl::Status s = Run(job);
    if (metrics_.pending_bytes != nullptr) metrics_.pending_bytes->Set(0);
    if (s.ok()) {
      {
        absl::MutexLock lock(&mu_);
        if (stopping_ || job.generation != generation_) continue;
        job_.reset();
      }
      on_fetched_(job.snapshot);
      continue;
    }
    if (Superseded(job.generation)) continue;
    spdlog::error("model fetch: layers {} not fetched: {}; trying again in {} ms",
                  FormatRange(job.range), s.ToString(), options_.retry_after.count());
    const auto until = std::chrono::steady_clock::now() + options_.retry_after;
    while (!Superseded(job.generation) && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

absl::Status LayerFetcher::Run(const Job& job) {
  std::set<size_t> keep(job.tensors.begin(), job.tensors.end());
  uint64_t missing_bytes = 0;
  for (size_t t : job.tensors) {
    if (!cache_->Holds(t)) missing_bytes += cache_->manifest().tensors()[t].size;
  }
  if (options_.cache_budget_bytes > 0) {
    const uint64_t room = options_.cache_budget_bytes > missing_bytes
                              ? options_.cache_budget_bytes - missing_bytes
                              : 0;
    absl::StatusOr<size_t> dropped = cache_->Evict(room, keep);
    if (!dropped.ok()) return dropped.status();
    if (*dropped > 0) spdlog::info("model fetch: dropped {} least recently used tensors", *dropped);
  }
  if (std::optional<uint64_t> free = FreeBytes(cache_->dir());
      free.has_value() && *free < missing_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the disk holding ", cache_->dir(), " has ", *free / 1048576, " MiB free, ",
                     "the layers need ", (missing_bytes - *free + 1048575) / 1048576, " MiB more"));
  }
  if (metrics_.pending_bytes != nullptr) metrics_.pending_bytes->Set(missing_bytes);
  std::vector<std::unique_ptr<PeerTensorSource>> sources;
  std::vector<TensorSource*> pointers;
  for (const PeerInfo& p : job.snapshot->peers) {
    sources.push_back(std::make_unique<PeerTensorSource>(
        client_, p.node_id, p.address, options_.fingerprint, &cache_->manifest()));
    pointers.push_back(sources.back().get());
  }
  spdlog::info("model fetch: layers {} need {:.1f} MB from {} member(s)", FormatRange(job.range),
               missing_bytes / 1e6, sources.size());
  absl::StatusOr<FetchStats> stats = fetcher_.Fetch(job.tensors, pointers);
  if (!stats.ok()) return stats.status();
  if (metrics_.bytes != nullptr) metrics_.bytes->Increment(stats->bytes);
  if (metrics_.tensors != nullptr) metrics_.tensors->Increment(stats->tensors);
  if (metrics_.bad_chunks != nullptr) metrics_.bad_chunks->Increment(stats->bad_chunks);
  if (metrics_.failed_calls != nullptr) metrics_.failed_calls->Increment(stats->failed_calls);
  spdlog::info("model fetch: layers {}: {:.1f} MB in {} tensors in {:.2f} s ({:.1f} MB/s)",
               FormatRange(job.range), stats->bytes / 1e6, stats->tensors, stats->seconds,
               stats->seconds > 0 ? stats->bytes / 1e6 / stats->seconds : 0.0);
  return absl::OkStatus();
}

}  // namespace ringlm
