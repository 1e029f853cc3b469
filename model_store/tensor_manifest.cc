#include "model_store/tensor_manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model_store/internal/file_io.h"
#include "model_store/internal/manifest_size.h"
#include "security/crypto.h"

namespace ringlm {
namespace {

using model_store_internal::AbslView;

constexpr std::string_view kMagic = "RLMMANI1";
// Longest tensor name Parse accepts (GGUF names are short; this bounds a
// peer's claim before anything is compared or copied).
constexpr uint64_t kMaxNameBytes = 64ull << 10;
// Compute reports progress after about this many bytes.
constexpr uint64_t kProgressEveryBytes = 64ull << 20;

uint64_t ChunkCount(uint64_t size) {
  return (size + kManifestChunkBytes - 1) / kManifestChunkBytes;
}

void AppendU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void AppendU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Bounds-checked little-endian reads over untrusted bytes. Every failure is
// DataLoss with the byte offset.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  absl::Status Take(uint64_t n, std::string_view what, std::string_view* out) {
    if (n > remaining()) {
      return absl::DataLossError(absl::StrCat("manifest truncated at offset ", pos_, " reading ",
                                              AbslView(what), " (", n, " bytes, ", remaining(),
                                              " left)"));
    }
    *out = bytes_.substr(pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }
  absl::Status U32(std::string_view what, uint32_t* out) {
    uint64_t v = 0;
    RINGLM_RETURN_IF_ERROR(Le(4, what, &v));
    *out = static_cast<uint32_t>(v);
    return absl::OkStatus();
  }
  absl::Status U64(std::string_view what, uint64_t* out) { return Le(8, what, out); }

 private:
  absl::Status Le(uint32_t n, std::string_view what, uint64_t* out) {
    std::string_view b;
    RINGLM_RETURN_IF_ERROR(Take(n, what, &b));
    uint64_t v = 0;
    for (uint32_t i = 0; i < n; ++i)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
    *out = v;
    return absl::OkStatus();
  }

  std::string_view bytes_;
  uint64_t pos_ = 0;
};

absl::Status Mismatch(size_t index, const std::string& name, std::string_view field, uint64_t got,
                      uint64_t want) {
  return absl::DataLossError(absl::StrCat("manifest tensor ", index, " ('", name, "') has ",
                                          AbslView(field), " ", got, ", the file has ", want));
}

}  // namespace

uint64_t model_store_internal::SerializedManifestBytes(const GgufFile& file) {
  uint64_t n = kMagic.size() + 16;
  for (const GgufTensorInfo& t : file.tensors()) {
    n += 4 + t.name.size() + 24 + ChunkCount(t.n_bytes) * kSha256Bytes;
  }
  return n;
}

absl::StatusOr<TensorManifest> TensorManifest::Compute(const std::string& path,
                                                       const GgufFile& file,
                                                       const ByteProgress& progress,
                                                       const std::function<bool()>& cancelled) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return model_store_internal::ErrnoError(errno, "cannot open", path);
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return model_store_internal::ErrnoError(errno, "cannot stat", path);
  if (static_cast<uint64_t>(st.st_size) != file.file_size()) {
    return absl::FailedPreconditionError(absl::StrCat("'", path, "' is ", st.st_size,
                                                      " bytes, its parsed header says ",
                                                      file.file_size(), ": the file changed"));
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);  // a hint; failure is harmless

  uint64_t total = 0;
  uint64_t largest = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    total += t.n_bytes;
    largest = std::max(largest, t.n_bytes);
  }
  // One reusable buffer, no larger than a chunk or the largest tensor.
  std::string buffer(std::min(largest, kManifestChunkBytes), '\0');

  TensorManifest m;
  m.tensors_.reserve(file.tensors().size());
  uint64_t done = 0;
  uint64_t next_report = kProgressEveryBytes;
  for (const GgufTensorInfo& t : file.tensors()) {
    TensorDigest d;
    d.name = t.name;
    d.offset = file.data_offset() + t.offset;
    d.size = t.n_bytes;
    d.chunk_sha256.reserve(ChunkCount(d.size));
    for (uint64_t at = 0; at < d.size; at += kManifestChunkBytes) {
      if (cancelled && cancelled()) return absl::CancelledError("the manifest was not finished");
      const uint64_t n = std::min(kManifestChunkBytes, d.size - at);
      RINGLM_RETURN_IF_ERROR(
          model_store_internal::PreadFull(fd, buffer.data(), n, d.offset + at, path));
      d.chunk_sha256.push_back(Sha256(std::string_view(buffer.data(), n)));
      done += n;
      if (progress && done >= next_report) {
        progress(done, total);
        next_report = done + kProgressEveryBytes;
      }
    }
    m.tensors_.push_back(std::move(d));
  }
  if (progress) progress(done, total);
  m.digest_ = Sha256(m.Serialize());
  return m;
}

absl::StatusOr<TensorManifest> TensorManifest::Parse(std::string_view bytes, const GgufFile& file) {
  Reader r(bytes);
  std::string_view magic;
  RINGLM_RETURN_IF_ERROR(r.Take(kMagic.size(), "magic", &magic));
  if (magic != kMagic) return absl::DataLossError("not a tensor manifest (bad magic)");
  uint64_t chunk_bytes = 0;
  RINGLM_RETURN_IF_ERROR(r.U64("chunk size", &chunk_bytes));
  if (chunk_bytes != kManifestChunkBytes) {
    return absl::DataLossError(
        absl::StrCat("manifest chunk size ", chunk_bytes, ", expected ", kManifestChunkBytes));
  }
  uint64_t count = 0;
  RINGLM_RETURN_IF_ERROR(r.U64("tensor count", &count));
  const std::vector<GgufTensorInfo>& infos = file.tensors();
  if (count != infos.size()) {
    return absl::DataLossError(
        absl::StrCat("manifest has ", count, " tensors, the file has ", infos.size()));
  }

  TensorManifest m;
  m.tensors_.reserve(infos.size());  // bounded by the file, not by the peer
  for (size_t i = 0; i < infos.size(); ++i) {
    const GgufTensorInfo& info = infos[i];
    uint32_t name_len = 0;
    RINGLM_RETURN_IF_ERROR(r.U32("name length", &name_len));
    if (name_len > kMaxNameBytes) {
      return absl::DataLossError(absl::StrCat("manifest tensor ", i, " name is ", name_len,
                                              " bytes, more than ", kMaxNameBytes));
    }
    std::string_view name;
    RINGLM_RETURN_IF_ERROR(r.Take(name_len, "tensor name", &name));
    if (name != info.name) {
      return absl::DataLossError(absl::StrCat("manifest tensor ", i, " is named '",
                                              AbslView(name.substr(0, 256)), "', the file has '",
                                              info.name, "'"));
    }
    TensorDigest d;
    d.name = info.name;
    uint64_t chunks = 0;
    RINGLM_RETURN_IF_ERROR(r.U64("tensor offset", &d.offset));
    RINGLM_RETURN_IF_ERROR(r.U64("tensor size", &d.size));
    RINGLM_RETURN_IF_ERROR(r.U64("chunk count", &chunks));
    const uint64_t want_offset = file.data_offset() + info.offset;
    if (d.offset != want_offset) return Mismatch(i, d.name, "offset", d.offset, want_offset);
    if (d.size != info.n_bytes) return Mismatch(i, d.name, "size", d.size, info.n_bytes);
    if (chunks != ChunkCount(d.size)) {
      return Mismatch(i, d.name, "chunk count", chunks, ChunkCount(d.size));
    }
    // chunks <= file size / 4 MiB + 1, so chunks * 32 cannot overflow.
    std::string_view hashes;
    RINGLM_RETURN_IF_ERROR(r.Take(chunks * kSha256Bytes, "chunk hashes", &hashes));
    d.chunk_sha256.reserve(chunks);
    for (uint64_t c = 0; c < chunks; ++c) {
      d.chunk_sha256.emplace_back(hashes.substr(c * kSha256Bytes, kSha256Bytes));
    }
    m.tensors_.push_back(std::move(d));
  }
  if (r.remaining() != 0) {
    return absl::DataLossError(
        absl::StrCat("manifest has ", r.remaining(), " trailing bytes at offset ", r.pos()));
  }
  // Every field was checked to be the one canonical encoding, so these bytes
  // are exactly what Serialize() would produce.
  m.digest_ = Sha256(bytes);
  return m;
}

std::string TensorManifest::Serialize() const {
  size_t size = kMagic.size() + 16;
  for (const TensorDigest& d : tensors_) {
    size += 4 + d.name.size() + 24 + d.chunk_sha256.size() * kSha256Bytes;
  }
  std::string out;
  out.reserve(size);
  out.append(kMagic);
  AppendU64(&out, kManifestChunkBytes);
  AppendU64(&out, tensors_.size());
  for (const TensorDigest& d : tensors_) {
    AppendU32(&out, static_cast<uint32_t>(d.name.size()));
    out.append(d.name);
    AppendU64(&out, d.offset);
    AppendU64(&out, d.size);
    AppendU64(&out, d.chunk_sha256.size());
    for (const std::string& h : d.chunk_sha256) out.append(h);
  }
  return out;
}

uint64_t TensorManifest::ChunkSize(size_t tensor, uint64_t chunk) const {
  const TensorDigest& d = tensors_[tensor];
  return std::min(kManifestChunkBytes, d.size - chunk * kManifestChunkBytes);
}

bool TensorManifest::ChunkMatches(size_t tensor, uint64_t chunk, std::string_view bytes) const {
  if (tensor >= tensors_.size() || chunk >= tensors_[tensor].chunks()) return false;
  if (bytes.size() != ChunkSize(tensor, chunk)) return false;
  return ConstantTimeEquals(Sha256(bytes), tensors_[tensor].chunk_sha256[chunk]);
}

}  // namespace ringlm
