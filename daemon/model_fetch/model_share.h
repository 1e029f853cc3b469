// What a node serves to members that fetch the model from it
// (docs/model-fetch.md): the file's header, its tensor manifest, and the
// bytes of the tensors the node holds.
#ifndef RINGLM_DAEMON_MODEL_FETCH_MODEL_SHARE_H_
#define RINGLM_DAEMON_MODEL_FETCH_MODEL_SHARE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/metrics.h"
#include "gguf/gguf_file.h"
#include "model_store/model_cache.h"
#include "model_store/tensor_manifest.h"
#include "proto/ringlm.grpc.pb.h"

namespace ringlm {

// ModelShare
//
// Purpose: the source side of model distribution. A node with the full
// model file holds every tensor; its manifest is computed on first use, in
// a background thread this object owns, and cached beside the file (or in
// the state dir). A node with a ModelCache holds what it fetched, and serves
// the manifest it verified against. Only held tensors of this one model are
// ever read; requests name tensors by index, never by path.
// Thread-safe. The destructor waits for a manifest computation in progress
// to stop (it checks between chunks).
class ModelShare {
 public:
  // The full file at `path`, whose parsed header is `file` (which must
  // outlive this). `manifest_dir` takes the manifest when the file's folder
  // is read-only.
  static absl::StatusOr<std::unique_ptr<ModelShare>> ForFile(const std::string& path,
                                                             const GgufFile& file,
                                                             std::string fingerprint,
                                                             std::string manifest_dir);
  static std::unique_ptr<ModelShare> ForCache(std::shared_ptr<ModelCache> cache,
                                              std::string fingerprint);
  ~ModelShare();

  const std::string& fingerprint() const { return fingerprint_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t header_size() const { return header_.size(); }
  const std::string& header_sha256() const { return header_sha256_; }
  // The manifest, or Unavailable "computing the manifest (N%)" while the
  // first computation runs (which the first call starts), or its error.
  absl::StatusOr<std::shared_ptr<const TensorManifest>> Manifest();
  // held[i]: tensor i can be sent.
  std::vector<bool> Held() const;
  // Chunks of tensor `tensor` (or of the header when `header`), and chunk
  // `chunk` of it: NotFound for a tensor not held, OutOfRange past the end.
  absl::StatusOr<uint64_t> Chunks(bool header, size_t tensor) const;
  absl::Status ReadChunk(bool header, size_t tensor, uint64_t chunk, std::string* out) const;
  // A slot for one FetchTensor stream; false when kMaxStreams are running.
  static constexpr int kMaxStreams = 8;
  bool BeginStream();
  void EndStream();

 private:
  ModelShare() = default;
  void ComputeManifest();

  std::string fingerprint_;
  uint64_t file_size_ = 0;
  std::string header_;
  std::string header_sha256_;
  // Exactly one source of tensor bytes: the full file, or the cache.
  const GgufFile* file_ = nullptr;
  std::string path_;
  std::string manifest_dir_;
  int fd_ = -1;
  std::shared_ptr<ModelCache> cache_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const TensorManifest> manifest_ ABSL_GUARDED_BY(mu_);
  absl::Status manifest_status_ ABSL_GUARDED_BY(mu_);
  bool computing_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> hashed_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<int> streams_{0};
  std::thread computer_;
};

// Counters of what a node served.
struct ModelShareMetrics {
  Counter* served_bytes = nullptr;
  Counter* refused_streams = nullptr;
};

// The handlers of the two RPCs, after the caller was authenticated as a
// node of the cluster. `share` is null when this node serves no model yet.
void ServeGetModel(ModelShare* share, const v1::GetModelRequest& request, v1::GetModelReply* reply,
                   absl::Status* status);
grpc::ServerWriteReactor<v1::TensorChunk>* ServeFetchTensor(ModelShare* share,
                                                            const v1::FetchTensorRequest& request,
                                                            absl::Status refusal,
                                                            const ModelShareMetrics& metrics);

}  // namespace ringlm

#endif  // RINGLM_DAEMON_MODEL_FETCH_MODEL_SHARE_H_
