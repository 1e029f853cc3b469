// Fetches a node's tensors from the peers that hold them, in parallel,
// verifying every chunk.
#ifndef RINGLM_MODEL_STORE_MODEL_FETCHER_H_
#define RINGLM_MODEL_STORE_MODEL_FETCHER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "model_store/model_cache.h"

namespace ringlm {

// One peer that can send tensor bytes: the seam where tests inject a source
// that lies, stalls or fails. Implementations must be thread-safe for calls
// on different tensors; the fetcher makes at most
// FetchOptions::streams_per_source calls per source at a time.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // A stable label for logs and for the avoid list (the peer's node id).
  virtual const std::string& name() const = 0;
  // Which tensors (indices of the manifest) this source can send.
  virtual std::vector<bool> Holdings() = 0;
  // Sends chunks first_chunk, first_chunk+1, ... of tensor `tensor`, in
  // order, to `on_chunk(chunk, bytes)`, until the tensor ends or on_chunk
  // returns false. OK after the last chunk or an early stop; the transport's
  // error otherwise (with its own deadline).
  virtual absl::Status Fetch(
      size_t tensor, uint64_t first_chunk,
      const std::function<bool(uint64_t chunk, std::string_view bytes)>& on_chunk) = 0;
};

struct FetchProgress {
  uint64_t bytes_done = 0;   // verified bytes written in this fetch
  uint64_t bytes_total = 0;  // bytes this fetch must write
  double bytes_per_second = 0;
  double eta_seconds = 0;  // 0 when unknown or done
};

struct FetchOptions {
  // Sources fetched from at once.
  int max_parallel_sources = 4;
  // Calls in flight to one source at once (a thread each), so the source
  // reads and sends the next tensor while this node verifies and writes the
  // last. 1 gives one strictly ordered stream per source.
  int streams_per_source = 2;
  // A tensor whose fetch failed this many times (over all sources) fails
  // the whole fetch.
  int max_attempts_per_tensor = 4;
  // Called about once a second and at the end, on a fetch thread.
  std::function<void(const FetchProgress&)> progress;
  // Polled between chunks; true stops the fetch with Cancelled.
  std::function<bool()> cancelled;
};

// What one Fetch did.
struct FetchStats {
  uint64_t bytes = 0;         // verified bytes written
  uint64_t tensors = 0;       // tensors committed
  uint64_t bad_chunks = 0;    // chunks that failed verification
  uint64_t failed_calls = 0;  // source calls that failed in transport
  double seconds = 0;
};

// ModelFetcher
//
// Purpose: makes `cache` hold a set of tensors, taking each missing one from
// some source that holds it. Each source gets streams_per_source threads that take tensors
// it holds from one shared queue (largest first), so several sources fetch
// in parallel and a fast source takes more. A call that fails in transport
// puts the tensor back, resuming at the first chunk not yet written. A chunk
// that fails verification is never written: the source is logged, counted
// and put on the avoid list (kept across Fetch calls, for this model), and
// the tensor goes back to the queue for another source.
// Ownership: borrows `cache`, which must outlive it; does not own sources.
// Thread-safety: Fetch calls are serialised; avoided() is thread-safe.
class ModelFetcher {
 public:
  ModelFetcher(ModelCache* cache, FetchOptions options);

  // Fetches every tensor in `wanted` that the cache does not hold, then
  // commits it. OK when all of `wanted` is held; Unavailable naming a
  // tensor no usable source holds, or that failed max_attempts_per_tensor
  // times; Cancelled when options.cancelled said so. Tensors committed before
  // an error stay held.
  absl::StatusOr<FetchStats> Fetch(const std::vector<size_t>& wanted,
                                   const std::vector<TensorSource*>& sources);

  // Names of sources that sent a bad chunk.
  std::set<std::string> avoided() const;

 private:
  ModelCache* const cache_;
  const FetchOptions options_;
  absl::Mutex fetch_mu_;
  mutable absl::Mutex mu_;
  std::set<std::string> avoided_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringlm

#endif  // RINGLM_MODEL_STORE_MODEL_FETCHER_H_
