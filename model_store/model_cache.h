// A node's own copy of a model it fetched from peers: a partial GGUF file.
#ifndef RINGLM_MODEL_STORE_MODEL_CACHE_H_
#define RINGLM_MODEL_STORE_MODEL_CACHE_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "gguf/gguf_file.h"
#include "model_store/tensor_manifest.h"

namespace ringlm {

// The folder that caches the model with this fingerprint under a node's
// state dir: STATE/models/<hex of SHA-256(fingerprint), 16 digits>.
std::string ModelCacheDir(const std::string& state_dir, std::string_view fingerprint);

// ModelCache
//
// Purpose: the bytes of a model that this node holds without the original
// file. Its folder holds:
//   model.gguf  the full header and the full file size, with only the held
//               tensors' bytes present: a sparse file, so unheld tensors take
//               no disk. GgufFile::Open and Model::Load map it like a full
//               file; a hole reads as zeros, so only held() tensors may be
//               used.
//   manifest    the TensorManifest the bytes were verified against.
//   held        which tensors are present and verified, and when each was
//               last used, rewritten atomically (temp + rename + fsync).
// Invariant: the file contains only verified bytes. A chunk is checked
// against the manifest before it is written; a tensor enters held() only
// after all its chunks are written and fdatasync'd. A crash loses at most the
// tensors not yet committed.
// Thread-safety: all methods are thread-safe; WriteChunk may run in parallel
// for different chunks.
// Ownership: owns its open file descriptor; file() views a mapping of the
// header it owns.
class ModelCache {
 public:
  // Makes the folder `dir` for a model whose file starts with `header`
  // (bytes [0, data offset) of the original file) and is `file_size` bytes
  // long, verified against `manifest_bytes` (TensorManifest::Serialize of it).
  // `header` must parse as GGUF with every tensor inside `file_size`; the
  // manifest must match its tensor table. A folder already there for another
  // header is replaced. DataLoss/InvalidArgument for bad input (it comes
  // from a peer), the errno text for a file-system error, and
  // ResourceExhausted when the file system lacks room for the header.
  static absl::StatusOr<std::unique_ptr<ModelCache>> Create(const std::string& dir,
                                                            std::string_view header,
                                                            uint64_t file_size,
                                                            std::string_view manifest_bytes);
  // Opens the cache a previous Create made. NotFound when `dir` holds none;
  // DataLoss when its files are inconsistent (the caller may Create anew).
  static absl::StatusOr<std::unique_ptr<ModelCache>> Open(const std::string& dir);

  ~ModelCache();
  ModelCache(const ModelCache&) = delete;
  ModelCache& operator=(const ModelCache&) = delete;

  const std::string& dir() const { return dir_; }
  // The partial GGUF, to be opened with Model::Load.
  std::string gguf_path() const;
  // The cache's own parse of the header; tensor indices are into
  // file().tensors() and manifest().tensors() alike.
  const GgufFile& file() const { return *file_; }
  const TensorManifest& manifest() const { return manifest_; }
  // Bytes [0, data offset) of the model file, as given to Create.
  std::string_view header() const { return header_; }

  bool Holds(size_t tensor) const;
  std::vector<size_t> Held() const;
  // Sum of the sizes of held tensors.
  uint64_t HeldBytes() const;

  // Checks `bytes` against the manifest for (tensor, chunk) and, if they
  // match, writes them at their place in model.gguf. DataLoss when they do
  // not match (nothing is written); InvalidArgument for an index out of
  // range.
  absl::Status WriteChunk(size_t tensor, uint64_t chunk, std::string_view bytes);
  // The first chunk of `tensor` not yet written in this process, so an
  // interrupted fetch resumes there (0 after a restart unless held).
  uint64_t FirstMissingChunk(size_t tensor) const;
  // After every chunk of `tensor` was written: fdatasync, then record it held.
  // FailedPrecondition when a chunk is missing.
  absl::Status CommitTensor(size_t tensor);

  // Records that these tensors are in use now (least-recently-used order).
  void Touch(const std::vector<size_t>& tensors);
  // Drops held tensors not in `keep`, least recently used first, until
  // HeldBytes() <= budget_bytes or only `keep` is left (punching holes, so
  // their disk space is freed). Returns how many were dropped.
  absl::StatusOr<size_t> Evict(uint64_t budget_bytes, const std::set<size_t>& keep);

  // Copies chunk `chunk` of a held tensor into `out` (for serving to a
  // peer). NotFound when the tensor is not held.
  absl::Status ReadChunk(size_t tensor, uint64_t chunk, std::string* out) const;

  // Disk space the folder's files take (allocated blocks, st_blocks * 512).
  uint64_t DiskBytes() const;

 private:
  ModelCache() = default;
  // A cache over dir/model.gguf with dir_, file_, fd_ and header_ set (the
  // part Create and Open share); the caller adds the manifest and tensors_.
  static absl::StatusOr<std::unique_ptr<ModelCache>> OpenGguf(const std::string& dir);
  absl::Status SaveHeldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A last-used time (ms since the epoch) later than every one handed out
  // before, so least-recently-used order follows call order exactly.
  int64_t NextStampLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::string dir_;
  std::string header_;
  std::unique_ptr<GgufFile> file_;
  TensorManifest manifest_;
  int fd_ = -1;

  mutable absl::Mutex mu_;
  struct TensorState {
    bool held = false;
    int64_t last_used_ms = 0;
    std::vector<bool> written;  // chunks written in this process
    uint64_t evictions = 0;     // lets ReadChunk notice an Evict racing it
  };
  std::vector<TensorState> tensors_ ABSL_GUARDED_BY(mu_);
  int64_t last_stamp_ms_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringlm

#endif  // RINGLM_MODEL_STORE_MODEL_CACHE_H_
