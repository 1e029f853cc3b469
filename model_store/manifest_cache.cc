// LoadOrComputeManifest: the manifest of a full model file, cached on disk.
//
// Cache file: magic "RLMMCAC1", u64 file size, i64 mtime (ns since the
// epoch), u32 fingerprint length, the fingerprint, then the manifest's
// Serialize() bytes, and last the SHA-256 of everything before it (so a
// damaged cache is recomputed, not trusted); little-endian.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model_store/internal/file_io.h"
#include "model_store/internal/manifest_size.h"
#include "model_store/tensor_manifest.h"
#include "security/crypto.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

namespace fio = model_store_internal;

constexpr std::string_view kCacheMagic = "RLMMCAC1";

struct FileId {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileId&) const = default;
};

absl::StatusOr<FileId> StatFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return fio::ErrnoError(errno, "cannot stat", path);
  return FileId{static_cast<uint64_t>(st.st_size),
                static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

std::string CacheHeader(const FileId& id, std::string_view fingerprint) {
  std::string out(kCacheMagic);
  auto le = [&out](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  le(id.size, 8);
  le(static_cast<uint64_t>(id.mtime_ns), 8);
  le(fingerprint.size(), 4);
  out.append(fingerprint);
  return out;
}

// The cached manifest at `cache_path` if it is there and still describes the
// file; nullopt (with the reason logged) otherwise.
std::optional<TensorManifest> TryLoad(const std::string& cache_path, const GgufFile& file,
                                      const FileId& id, std::string_view fingerprint) {
  const std::string header = CacheHeader(id, fingerprint);
  std::string bytes;
  const absl::Status read = fio::ReadSmallFile(
      cache_path, header.size() + fio::SerializedManifestBytes(file) + kSha256Bytes, &bytes);
  if (!read.ok()) {
    if (!absl::IsNotFound(read)) {
      spdlog::warn("ignoring manifest cache: {}", std::string(read.message()));
    }
    return std::nullopt;
  }
  std::string_view body(bytes);
  if (body.size() < kSha256Bytes || Sha256(body.substr(0, body.size() - kSha256Bytes)) !=
                                        body.substr(body.size() - kSha256Bytes)) {
    spdlog::warn("ignoring damaged manifest cache '{}'", cache_path);
    return std::nullopt;
  }
  body.remove_suffix(kSha256Bytes);
  if (body.substr(0, header.size()) != header) {
    spdlog::info("manifest cache '{}' is stale (file size, time or fingerprint changed)",
                 cache_path);
    return std::nullopt;
  }
  absl::StatusOr<TensorManifest> m = TensorManifest::Parse(body.substr(header.size()), file);
  if (!m.ok()) {
    spdlog::warn("ignoring manifest cache '{}': {}", cache_path, std::string(m.status().message()));
    return std::nullopt;
  }
  return *std::move(m);
}

// Writable for this process, and not marked read-only: root passes access()
// for any folder, but a model folder chmod'ed 0555 still means "leave alone".
bool FolderWritable(const std::string& dir) {
  struct stat st;
  if (::access(dir.c_str(), W_OK) != 0 || ::stat(dir.c_str(), &st) != 0) return false;
  return (st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) != 0;
}

}  // namespace

absl::StatusOr<TensorManifest> LoadOrComputeManifest(const std::string& path, const GgufFile& file,
                                                     std::string_view fingerprint,
                                                     const std::string& fallback_dir,
                                                     const ByteProgress& progress,
                                                     const std::function<bool()>& cancelled) {
  RINGLM_ASSIGN_OR_RETURN(const FileId before, StatFile(path));
  const std::string beside = path + ".ringlm-manifest";
  const std::string fallback =
      fallback_dir.empty()
          ? std::string()
          : absl::StrCat(fallback_dir, "/", HexEncode(Sha256(fingerprint)).substr(0, 16), "-",
                         before.size, ".manifest");
  for (const std::string& candidate : {beside, fallback}) {
    if (candidate.empty()) continue;
    if (std::optional<TensorManifest> m = TryLoad(candidate, file, before, fingerprint)) {
      return *std::move(m);
    }
  }

  RINGLM_ASSIGN_OR_RETURN(TensorManifest m,
                          TensorManifest::Compute(path, file, progress, cancelled));
  RINGLM_ASSIGN_OR_RETURN(const FileId after, StatFile(path));
  if (after != before) {
    spdlog::warn("'{}' changed while it was hashed; not caching its manifest", path);
    return m;
  }
  std::string bytes = CacheHeader(before, fingerprint) + m.Serialize();
  bytes += Sha256(bytes);
  if (FolderWritable(fio::DirName(path))) {
    const absl::Status s = fio::WriteFileAtomic(beside, bytes);
    if (s.ok()) return m;
    spdlog::warn("cannot cache the manifest beside the model: {}", std::string(s.message()));
  }
  if (fallback.empty()) return m;
  absl::Status s = fio::MakeDirs(fallback_dir);
  if (s.ok()) s = fio::WriteFileAtomic(fallback, bytes);
  if (!s.ok()) {
    // Only a cost: the next start hashes the file again.
    spdlog::warn("cannot cache the manifest: {}", std::string(s.message()));
  }
  return m;
}

}  // namespace ringlm
