#include "model_store/model_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model_store/internal/file_io.h"
#include "model_store/internal/held_file.h"
#include "model_store/internal/manifest_size.h"
#include "security/crypto.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

namespace fio = model_store_internal;

// Bounds on what a peer may ask this node to create.
constexpr uint64_t kMaxFileSize = 2ull << 40;     // 2 TiB
constexpr uint64_t kMaxHeaderBytes = 1ull << 30;  // GGUF headers are MiBs at most
// Room wanted beyond the header and manifest (the held file, metadata).
constexpr uint64_t kCreateSlackBytes = 1ull << 20;

constexpr char kGgufName[] = "model.gguf";
constexpr char kManifestName[] = "manifest";
constexpr char kHeldName[] = "held";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

void RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) spdlog::warn("cannot remove '{}': {}", path, ec.message());
}

// DataLoss keeps its code; NotFound of a file that should be there becomes
// DataLoss (the folder is inconsistent); file-system errors keep theirs.
absl::Status AsCorrupt(const absl::Status& s, const std::string& dir) {
  const std::string msg = absl::StrCat("model cache '", dir, "': ", s.message());
  if (absl::IsNotFound(s) || absl::IsDataLoss(s) || absl::IsInvalidArgument(s)) {
    return absl::DataLossError(msg);
  }
  return absl::Status(s.code(), msg);
}

}  // namespace

std::string ModelCacheDir(const std::string& state_dir, std::string_view fingerprint) {
  return absl::StrCat(state_dir, "/models/", HexEncode(Sha256(fingerprint)).substr(0, 16));
}

absl::StatusOr<std::unique_ptr<ModelCache>> ModelCache::OpenGguf(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kGgufName);
  RINGLM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  if (file->data_offset() > kMaxHeaderBytes) {
    return absl::DataLossError(absl::StrCat("'", path, "' has a ", file->data_offset(),
                                            "-byte header, more than ", kMaxHeaderBytes));
  }
  std::unique_ptr<ModelCache> cache(new ModelCache());
  cache->dir_ = dir;
  cache->fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (cache->fd_ < 0) return fio::ErrnoError(errno, "cannot open", path);
  cache->header_.resize(file->data_offset());
  RINGLM_RETURN_IF_ERROR(
      fio::PreadFull(cache->fd_, cache->header_.data(), cache->header_.size(), 0, path));
  cache->file_ = std::move(file);
  return cache;
}

absl::StatusOr<std::unique_ptr<ModelCache>> ModelCache::Create(const std::string& requested_dir,
                                                               std::string_view header,
                                                               uint64_t file_size,
                                                               std::string_view manifest_bytes) {
  // "a/b/" must not make "a/b/.new-..." inside the folder it then replaces.
  std::string dir = requested_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (file_size > kMaxFileSize) {
    return absl::InvalidArgumentError(absl::StrCat("model file size ", file_size,
                                                   " is more than the ", kMaxFileSize, " allowed"));
  }
  if (header.size() > file_size || header.size() > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("model header of ", header.size(), " bytes for a file of ", file_size));
  }
  if (header.substr(0, 4) != "GGUF") return absl::DataLossError("model header is not GGUF");

  const std::string parent = fio::DirName(dir);
  RINGLM_RETURN_IF_ERROR(fio::MakeDirs(parent));
  struct statvfs vfs;
  if (::statvfs(parent.c_str(), &vfs) != 0) {
    return fio::ErrnoError(errno, "cannot statvfs", parent);
  }
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  const uint64_t need = header.size() + manifest_bytes.size() + kCreateSlackBytes;
  if (free_bytes < need) {
    return absl::ResourceExhaustedError(
        absl::StrCat("'", parent, "' has ", free_bytes, " bytes free, a model cache needs ", need));
  }

  // Build the folder beside `dir` and rename it into place, so a bad header
  // never replaces a good cache and a crash leaves no half-made one.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(dir, ".new-", ::getpid(), "-", counter.fetch_add(1));
  RemoveTree(tmp);
  RINGLM_RETURN_IF_ERROR(fio::MakeDirs(tmp));
  absl::StatusOr<std::unique_ptr<ModelCache>> made =
      [&]() -> absl::StatusOr<std::unique_ptr<ModelCache>> {
    const std::string gguf = absl::StrCat(tmp, "/", kGgufName);
    {
      const int fd = ::open(gguf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) return fio::ErrnoError(errno, "cannot create", gguf);
      absl::Status s = fio::PwriteFull(fd, header, 0, gguf);
      // The rest stays a hole: unheld tensors take no disk.
      if (s.ok() && ::ftruncate(fd, static_cast<off_t>(file_size)) != 0) {
        s = fio::ErrnoError(errno, "cannot size", gguf);
      }
      if (s.ok() && ::fsync(fd) != 0) s = fio::ErrnoError(errno, "cannot fsync", gguf);
      ::close(fd);
      RINGLM_RETURN_IF_ERROR(s);
    }
    absl::StatusOr<std::unique_ptr<ModelCache>> cache = OpenGguf(tmp);
    if (!cache.ok()) {
      if (absl::IsDataLoss(cache.status())) {
        return absl::DataLossError(absl::StrCat("bad model header: ", cache.status().message()));
      }
      return cache.status();
    }
    ModelCache& c = **cache;
    if (c.file_->data_offset() != header.size()) {
      return absl::DataLossError(absl::StrCat("model header is ", header.size(),
                                              " bytes but its data section starts at ",
                                              c.file_->data_offset()));
    }
    RINGLM_ASSIGN_OR_RETURN(c.manifest_, TensorManifest::Parse(manifest_bytes, *c.file_));
    RINGLM_RETURN_IF_ERROR(
        fio::WriteFileAtomic(absl::StrCat(tmp, "/", kManifestName), manifest_bytes));
    absl::MutexLock lock(&c.mu_);
    c.tensors_.resize(c.manifest_.tensors().size());
    for (size_t i = 0; i < c.tensors_.size(); ++i) {
      c.tensors_[i].written.assign(c.manifest_.tensors()[i].chunks(), false);
    }
    RINGLM_RETURN_IF_ERROR(c.SaveHeldLocked());
    return cache;
  }();
  if (made.ok()) {
    RemoveTree(dir);  // another model's (or a broken) cache
    if (::rename(tmp.c_str(), dir.c_str()) != 0) {
      made = fio::ErrnoError(errno, "cannot rename into place", tmp);
    } else {
      (*made)->dir_ = dir;  // fd_ and the mapping follow the renamed file
      if (absl::Status s = fio::FsyncDir(parent); !s.ok()) made = s;
    }
  }
  if (!made.ok()) RemoveTree(tmp);
  return made;
}

absl::StatusOr<std::unique_ptr<ModelCache>> ModelCache::Open(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("no model cache in '", dir, "'"));
  }
  const std::string manifest_path = absl::StrCat(dir, "/", kManifestName);
  const std::string held_path = absl::StrCat(dir, "/", kHeldName);
  const int present =
      Exists(absl::StrCat(dir, "/", kGgufName)) + Exists(manifest_path) + Exists(held_path);
  if (present == 0) return absl::NotFoundError(absl::StrCat("no model cache in '", dir, "'"));

  absl::StatusOr<std::unique_ptr<ModelCache>> opened = OpenGguf(dir);
  if (!opened.ok()) return AsCorrupt(opened.status(), dir);
  std::unique_ptr<ModelCache> cache = *std::move(opened);
  ModelCache& c = *cache;
  std::string bytes;
  if (absl::Status s = fio::ReadSmallFile(
          manifest_path, model_store_internal::SerializedManifestBytes(*c.file_), &bytes);
      !s.ok()) {
    return AsCorrupt(s, dir);
  }
  absl::StatusOr<TensorManifest> manifest = TensorManifest::Parse(bytes, *c.file_);
  if (!manifest.ok()) return AsCorrupt(manifest.status(), dir);
  c.manifest_ = *std::move(manifest);

  const size_t n = c.manifest_.tensors().size();
  if (absl::Status s = fio::ReadSmallFile(held_path, fio::MaxHeldBytes(n), &bytes); !s.ok()) {
    return AsCorrupt(s, dir);
  }
  absl::StatusOr<std::vector<fio::HeldEntry>> held = fio::ParseHeld(bytes, c.manifest_.digest(), n);
  if (!held.ok()) return AsCorrupt(held.status(), dir);

  absl::MutexLock lock(&c.mu_);
  c.tensors_.resize(n);
  for (size_t i = 0; i < n; ++i)
    c.tensors_[i].written.assign(c.manifest_.tensors()[i].chunks(), false);
  for (const fio::HeldEntry& e : *held) {
    TensorState& t = c.tensors_[e.tensor];
    t.held = true;
    t.last_used_ms = e.last_used_ms;
    t.written.assign(t.written.size(), true);
    c.last_stamp_ms_ = std::max(c.last_stamp_ms_, e.last_used_ms);
  }
  return cache;
}

ModelCache::~ModelCache() {
  if (fd_ >= 0) ::close(fd_);
}

std::string ModelCache::gguf_path() const { return absl::StrCat(dir_, "/", kGgufName); }

bool ModelCache::Holds(size_t tensor) const {
  absl::MutexLock lock(&mu_);
  return tensor < tensors_.size() && tensors_[tensor].held;
}

std::vector<size_t> ModelCache::Held() const {
  absl::MutexLock lock(&mu_);
  std::vector<size_t> out;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].held) out.push_back(i);
  }
  return out;
}

uint64_t ModelCache::HeldBytes() const {
  absl::MutexLock lock(&mu_);
  uint64_t bytes = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].held) bytes += manifest_.tensors()[i].size;
  }
  return bytes;
}

absl::Status ModelCache::WriteChunk(size_t tensor, uint64_t chunk, std::string_view bytes) {
  const std::vector<TensorDigest>& digests = manifest_.tensors();
  if (tensor >= digests.size() || chunk >= digests[tensor].chunks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no chunk ", chunk, " of tensor ", tensor, " in the manifest"));
  }
  const TensorDigest& d = digests[tensor];
  // Hashing (the costly part) and writing run outside the lock.
  if (!manifest_.ChunkMatches(tensor, chunk, bytes)) {
    return absl::DataLossError(absl::StrCat("chunk ", chunk, " of tensor '", d.name, "' (",
                                            bytes.size(), " bytes) does not match the manifest"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (tensors_[tensor].held) return absl::OkStatus();  // the same bytes are there
  }
  RINGLM_RETURN_IF_ERROR(
      fio::PwriteFull(fd_, bytes, d.offset + chunk * manifest_.chunk_bytes(), gguf_path()));
  absl::MutexLock lock(&mu_);
  tensors_[tensor].written[chunk] = true;
  return absl::OkStatus();
}

uint64_t ModelCache::FirstMissingChunk(size_t tensor) const {
  absl::MutexLock lock(&mu_);
  if (tensor >= tensors_.size()) return 0;
  const TensorState& t = tensors_[tensor];
  if (t.held) return t.written.size();
  return std::find(t.written.begin(), t.written.end(), false) - t.written.begin();
}

absl::Status ModelCache::CommitTensor(size_t tensor) {
  if (tensor >= manifest_.tensors().size()) {
    return absl::InvalidArgumentError(absl::StrCat("no tensor ", tensor, " in the manifest"));
  }
  const std::string& name = manifest_.tensors()[tensor].name;
  auto missing = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    const std::vector<bool>& w = tensors_[tensor].written;
    const auto it = std::find(w.begin(), w.end(), false);
    if (it == w.end()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("chunk ", it - w.begin(), " of tensor '", name, "' is not written"));
  };
  {
    absl::MutexLock lock(&mu_);
    if (tensors_[tensor].held) return absl::OkStatus();
    RINGLM_RETURN_IF_ERROR(missing());
  }
  // Durable before it is recorded held: a crash must not leave a held
  // tensor whose bytes never reached the disk. (Syncs every tensor's pending
  // writes, which later commits then find already done.)
  if (::fdatasync(fd_) != 0) return fio::ErrnoError(errno, "cannot fdatasync", gguf_path());
  absl::MutexLock lock(&mu_);
  TensorState& t = tensors_[tensor];
  if (t.held) return absl::OkStatus();
  RINGLM_RETURN_IF_ERROR(missing());
  t.held = true;
  const int64_t previous = t.last_used_ms;
  t.last_used_ms = NextStampLocked();
  if (absl::Status s = SaveHeldLocked(); !s.ok()) {
    t.held = false;  // the bytes stay written; a later CommitTensor may succeed
    t.last_used_ms = previous;
    return s;
  }
  return absl::OkStatus();
}

void ModelCache::Touch(const std::vector<size_t>& tensors) {
  absl::MutexLock lock(&mu_);
  bool changed = false;
  for (size_t i : tensors) {
    if (i < tensors_.size() && tensors_[i].held) {
      tensors_[i].last_used_ms = NextStampLocked();
      changed = true;
    }
  }
  if (!changed) return;
  // Only the eviction order after a restart is at stake.
  if (absl::Status s = SaveHeldLocked(); !s.ok()) {
    spdlog::warn("cannot record tensor use: {}", std::string(s.message()));
  }
}

absl::StatusOr<size_t> ModelCache::Evict(uint64_t budget_bytes, const std::set<size_t>& keep) {
  absl::MutexLock lock(&mu_);
  uint64_t held_bytes = 0;
  std::vector<size_t> candidates;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].held) continue;
    held_bytes += manifest_.tensors()[i].size;
    if (!keep.contains(i)) candidates.push_back(i);
  }
  std::sort(candidates.begin(), candidates.end(), [this](size_t a, size_t b) {
    mu_.AssertHeld();
    return tensors_[a].last_used_ms != tensors_[b].last_used_ms
               ? tensors_[a].last_used_ms < tensors_[b].last_used_ms
               : a < b;
  });
  std::vector<size_t> victims;
  for (size_t i : candidates) {
    if (held_bytes <= budget_bytes) break;
    victims.push_back(i);
    held_bytes -= manifest_.tensors()[i].size;
  }
  if (victims.empty()) return 0;
  // Unrecord first, then punch: a crash in between leaves bytes nobody
  // claims, never a held tensor that reads as zeros.
  for (size_t i : victims) tensors_[i].held = false;
  if (absl::Status s = SaveHeldLocked(); !s.ok()) {
    for (size_t i : victims) tensors_[i].held = true;
    return s;
  }
  absl::Status first_error;
  for (size_t i : victims) {
    TensorState& t = tensors_[i];
    t.written.assign(t.written.size(), false);
    ++t.evictions;
    const TensorDigest& d = manifest_.tensors()[i];
    if (d.size > 0 && ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                  static_cast<off_t>(d.offset), static_cast<off_t>(d.size)) != 0) {
      // The tensor is no longer held either way; only its disk space stays.
      if (first_error.ok())
        first_error = fio::ErrnoError(errno, "cannot punch a hole in", gguf_path());
    }
  }
  RINGLM_RETURN_IF_ERROR(first_error);
  return victims.size();
}

absl::Status ModelCache::ReadChunk(size_t tensor, uint64_t chunk, std::string* out) const {
  const std::vector<TensorDigest>& digests = manifest_.tensors();
  if (tensor >= digests.size() || chunk >= digests[tensor].chunks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no chunk ", chunk, " of tensor ", tensor, " in the manifest"));
  }
  const TensorDigest& d = digests[tensor];
  auto not_held = [&] {
    return absl::NotFoundError(absl::StrCat("tensor '", d.name, "' is not held"));
  };
  uint64_t evictions = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!tensors_[tensor].held) return not_held();
    evictions = tensors_[tensor].evictions;
  }
  out->resize(manifest_.ChunkSize(tensor, chunk));
  RINGLM_RETURN_IF_ERROR(fio::PreadFull(fd_, out->data(), out->size(),
                                        d.offset + chunk * manifest_.chunk_bytes(), gguf_path()));
  // An Evict during the read may have punched the range: do not serve zeros.
  absl::MutexLock lock(&mu_);
  if (!tensors_[tensor].held || tensors_[tensor].evictions != evictions) return not_held();
  return absl::OkStatus();
}

uint64_t ModelCache::DiskBytes() const {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return 0;
  uint64_t bytes = 0;
  while (const dirent* e = ::readdir(d)) {
    struct stat st;
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
      bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  ::closedir(d);
  return bytes;
}

absl::Status ModelCache::SaveHeldLocked() {
  std::vector<fio::HeldEntry> held;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].held) held.push_back(fio::HeldEntry{i, tensors_[i].last_used_ms});
  }
  return fio::WriteFileAtomic(absl::StrCat(dir_, "/", kHeldName),
                              fio::SerializeHeld(manifest_.digest(), held));
}

int64_t ModelCache::NextStampLocked() {
  last_stamp_ms_ = std::max(NowMs(), last_stamp_ms_ + 1);
  return last_stamp_ms_;
}

}  // namespace ringlm
