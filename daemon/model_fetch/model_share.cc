#include "daemon/model_fetch/model_share.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "base/posix_file.h"
#include "base/status_macros.h"
#include "daemon/rpc/proto_convert.h"
#include "security/crypto.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

uint64_t ChunksOf(uint64_t bytes) {
  return (bytes + kManifestChunkBytes - 1) / kManifestChunkBytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelShare>> ModelShare::ForFile(const std::string& path,
                                                                const GgufFile& file,
                                                                std::string fingerprint,
                                                                std::string manifest_dir) {
  std::unique_ptr<ModelShare> share(new ModelShare());
  share->fingerprint_ = std::move(fingerprint);
  share->file_ = &file;
  share->path_ = path;
  share->manifest_dir_ = std::move(manifest_dir);
  share->file_size_ = file.file_size();
  share->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (share->fd_ < 0) return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  share->header_.resize(file.data_offset());
  RINGLM_RETURN_IF_ERROR(
      PreadFull(share->fd_, share->header_.data(), share->header_.size(), 0, path));
  share->header_sha256_ = Sha256(share->header_);
  return share;
}

std::unique_ptr<ModelShare> ModelShare::ForCache(std::shared_ptr<ModelCache> cache,
                                                 std::string fingerprint) {
  std::unique_ptr<ModelShare> share(new ModelShare());
  share->fingerprint_ = std::move(fingerprint);
  share->file_size_ = cache->file().file_size();
  share->header_ = std::string(cache->header());
  share->header_sha256_ = Sha256(share->header_);
  {
    absl::MutexLock lock(&share->mu_);
    share->manifest_ = std::make_shared<const TensorManifest>(cache->manifest());
  }
  share->cache_ = std::move(cache);
  return share;
}

ModelShare::~ModelShare() {
  stopping_ = true;
  if (computer_.joinable()) computer_.join();
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::shared_ptr<const TensorManifest>> ModelShare::Manifest() {
  absl::MutexLock lock(&mu_);
  if (manifest_ != nullptr) return manifest_;
  if (!manifest_status_.ok()) return manifest_status_;
  if (!computing_) {
    computing_ = true;
    computer_ = std::thread([this] { ComputeManifest(); });
  }
  const uint64_t total = std::max<uint64_t>(file_size_, 1);
  return absl::UnavailableError(
      absl::StrCat("computing the model's manifest (", hashed_.load() * 100 / total, "%)"));
}

void ModelShare::ComputeManifest() {
  spdlog::info("computing the tensor manifest of {} ({:.1f} MiB) for peers that fetch it", path_,
               file_size_ / 1048576.0);
  absl::StatusOr<TensorManifest> m = LoadOrComputeManifest(
      path_, *file_, fingerprint_, manifest_dir_,
      [this](uint64_t done, uint64_t) { hashed_ = done; }, [this] { return stopping_.load(); });
  absl::MutexLock lock(&mu_);
  if (m.ok()) {
    manifest_ = std::make_shared<const TensorManifest>(*std::move(m));
  } else {
    spdlog::error("cannot compute the tensor manifest: {}", m.status().ToString());
    manifest_status_ = m.status();
  }
}

std::vector<bool> ModelShare::Held() const {
  if (cache_ != nullptr) {
    std::vector<bool> held(cache_->file().tensors().size(), false);
    for (size_t i : cache_->Held()) held[i] = true;
    return held;
  }
  return std::vector<bool>(file_->tensors().size(), true);
}

absl::StatusOr<uint64_t> ModelShare::Chunks(bool header, size_t tensor) const {
  if (header) return ChunksOf(header_.size());
  const GgufFile& file = cache_ != nullptr ? cache_->file() : *file_;
  if (tensor >= file.tensors().size()) {
    return absl::OutOfRangeError(
        absl::StrCat("the model has ", file.tensors().size(), " tensors, not ", tensor + 1));
  }
  if (cache_ != nullptr && !cache_->Holds(tensor)) {
    return absl::NotFoundError(absl::StrCat("this node does not hold tensor ", tensor));
  }
  return ChunksOf(file.tensors()[tensor].n_bytes);
}

absl::Status ModelShare::ReadChunk(bool header, size_t tensor, uint64_t chunk,
                                   std::string* out) const {
  RINGLM_ASSIGN_OR_RETURN(uint64_t chunks, Chunks(header, tensor));
  if (chunk >= chunks) return absl::OutOfRangeError(absl::StrCat("no chunk ", chunk));
  if (header) {
    const uint64_t begin = chunk * kManifestChunkBytes;
    *out = header_.substr(begin, kManifestChunkBytes);
    return absl::OkStatus();
  }
  if (cache_ != nullptr) return cache_->ReadChunk(tensor, chunk, out);
  const GgufTensorInfo& t = file_->tensors()[tensor];
  const uint64_t begin = chunk * kManifestChunkBytes;
  out->resize(std::min<uint64_t>(kManifestChunkBytes, t.n_bytes - begin));
  return PreadFull(fd_, out->data(), out->size(), file_->data_offset() + t.offset + begin, path_);
}

bool ModelShare::BeginStream() {
  if (streams_.fetch_add(1) < kMaxStreams) return true;
  streams_.fetch_sub(1);
  return false;
}

void ModelShare::EndStream() { streams_.fetch_sub(1); }

void ServeGetModel(ModelShare* share, const v1::GetModelRequest& request, v1::GetModelReply* reply,
                   absl::Status* status) {
  if (share == nullptr) {
    *status = absl::UnavailableError("this node holds no model yet");
    return;
  }
  if (request.model_fingerprint() != share->fingerprint()) {
    *status = absl::NotFoundError("this node serves another model");
    return;
  }
  absl::StatusOr<std::shared_ptr<const TensorManifest>> manifest = share->Manifest();
  if (!manifest.ok()) {
    *status = manifest.status();
    return;
  }
  reply->set_model_fingerprint(share->fingerprint());
  reply->set_file_size(share->file_size());
  reply->set_header_size(share->header_size());
  reply->set_header_sha256(share->header_sha256());
  reply->set_manifest_digest((*manifest)->digest());
  if (request.with_manifest()) reply->set_manifest((*manifest)->Serialize());
  const std::vector<bool> held = share->Held();
  std::string bits((held.size() + 7) / 8, '\0');
  for (size_t i = 0; i < held.size(); ++i) {
    if (held[i]) bits[i / 8] = static_cast<char>(bits[i / 8] | (1 << (i % 8)));
  }
  reply->set_held(std::move(bits));
  *status = absl::OkStatus();
}

namespace {

// Streams the chunks of one tensor, one write at a time, reading each chunk
// when the previous write is done. Holds one of the share's stream slots.
class FetchTensorReactor : public grpc::ServerWriteReactor<v1::TensorChunk> {
 public:
  FetchTensorReactor(ModelShare* share, const v1::FetchTensorRequest& request, absl::Status refusal,
                     const ModelShareMetrics& metrics)
      : share_(share), request_(request), metrics_(metrics) {
    absl::Status s = refusal;
    if (s.ok() && share_ == nullptr) s = absl::UnavailableError("this node holds no model yet");
    if (s.ok() && request.model_fingerprint() != share_->fingerprint()) {
      s = absl::NotFoundError("this node serves another model");
    }
    if (s.ok() && !share_->BeginStream()) {
      if (metrics_.refused_streams != nullptr) metrics_.refused_streams->Increment();
      s = absl::ResourceExhaustedError("this node is serving as many fetches as it allows");
    }
    if (!s.ok()) {
      Finish(ToGrpc(s));
      return;
    }
    slot_ = true;
    absl::StatusOr<uint64_t> chunks = share_->Chunks(request.header(), request.tensor());
    if (!chunks.ok()) {
      Finish(ToGrpc(chunks.status()));
      return;
    }
    chunks_ = *chunks;
    next_ = request.first_chunk();
    WriteNext();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the fetcher went away"));
      return;
    }
    WriteNext();
  }

  void OnDone() override {
    if (slot_) share_->EndStream();
    delete this;
  }

 private:
  void WriteNext() {
    if (next_ >= chunks_) {
      Finish(grpc::Status::OK);
      return;
    }
    chunk_.set_chunk(next_);
    absl::Status s =
        share_->ReadChunk(request_.header(), request_.tensor(), next_, chunk_.mutable_data());
    if (!s.ok()) {
      Finish(ToGrpc(s));
      return;
    }
    if (metrics_.served_bytes != nullptr) metrics_.served_bytes->Increment(chunk_.data().size());
    ++next_;
    StartWrite(&chunk_);
  }

  ModelShare* const share_;
  const v1::FetchTensorRequest request_;
  const ModelShareMetrics metrics_;
  bool slot_ = false;
  uint64_t chunks_ = 0;
  uint64_t next_ = 0;
  v1::TensorChunk chunk_;
};

}  // namespace

grpc::ServerWriteReactor<v1::TensorChunk>* ServeFetchTensor(ModelShare* share,
                                                            const v1::FetchTensorRequest& request,
                                                            absl::Status refusal,
                                                            const ModelShareMetrics& metrics) {
  return new FetchTensorReactor(share, request, std::move(refusal), metrics);
}

}  // namespace ringlm
