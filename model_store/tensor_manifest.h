// The SHA-256 of every chunk of every tensor of a GGUF file: what a node
// checks bytes fetched from a peer against before it writes, serves or
// computes with them.
#ifndef RINGLM_MODEL_STORE_TENSOR_MANIFEST_H_
#define RINGLM_MODEL_STORE_TENSOR_MANIFEST_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gguf/gguf_file.h"

namespace ringlm {

// Tensors are hashed, sent and verified in chunks of this many bytes (the
// last chunk of a tensor may be shorter).
inline constexpr uint64_t kManifestChunkBytes = 4ull << 20;

// Called while hashing or fetching: bytes done and bytes in all.
using ByteProgress = std::function<void(uint64_t done, uint64_t total)>;

// One tensor of the manifest, in the file's tensor-table order.
struct TensorDigest {
  std::string name;
  uint64_t offset = 0;                    // absolute byte offset in the file
  uint64_t size = 0;                      // bytes
  std::vector<std::string> chunk_sha256;  // 32 raw bytes per chunk

  uint64_t chunks() const { return chunk_sha256.size(); }
};

// An immutable list of TensorDigest, one per tensor of the file it was made
// for, with chunk_bytes() fixed at kManifestChunkBytes. Cheap to copy
// (shares nothing mutable); thread-safe to read.
class TensorManifest {
 public:
  // Hashes the tensor data of the GGUF file at `path`, whose parsed header
  // is `file`, reading with pread (not the mapping, so the bytes do not count
  // towards this process's resident memory). About one read of the file.
  // `cancelled`, polled between chunks, stops it with Cancelled.
  static absl::StatusOr<TensorManifest> Compute(const std::string& path, const GgufFile& file,
                                                const ByteProgress& progress = nullptr,
                                                const std::function<bool()>& cancelled = nullptr);
  // Parses Serialize() output from disk or from a peer (untrusted): bounded
  // lengths, then the same tensor count, names, offsets, sizes and chunk
  // counts as `file`'s tensor table. DataLoss naming the first difference.
  static absl::StatusOr<TensorManifest> Parse(std::string_view bytes, const GgufFile& file);

  // A versioned binary form: magic, chunk size, then per tensor its name,
  // offset, size and chunk hashes.
  std::string Serialize() const;
  // SHA-256 of Serialize(), 32 raw bytes: two manifests agree when their
  // digests do.
  const std::string& digest() const { return digest_; }
  uint64_t chunk_bytes() const { return kManifestChunkBytes; }
  const std::vector<TensorDigest>& tensors() const { return tensors_; }

  // Bytes in chunk `chunk` of tensor `tensor`. Precondition: both in range.
  uint64_t ChunkSize(size_t tensor, uint64_t chunk) const;
  // True when `bytes` is exactly chunk `chunk` of tensor `tensor` (length and
  // SHA-256); false also for an index out of range.
  bool ChunkMatches(size_t tensor, uint64_t chunk, std::string_view bytes) const;

 private:
  std::vector<TensorDigest> tensors_;
  std::string digest_;
};

// The manifest of the full model file at `path`, computed once and cached:
// beside the file as PATH.ringlm-manifest when its folder is writable, else
// in `fallback_dir` (created if needed). A cached manifest is used only when
// its recorded file size, modification time and fingerprint still match;
// otherwise it is computed again and rewritten (atomically: temp + rename).
absl::StatusOr<TensorManifest> LoadOrComputeManifest(
    const std::string& path, const GgufFile& file, std::string_view fingerprint,
    const std::string& fallback_dir, const ByteProgress& progress = nullptr,
    const std::function<bool()>& cancelled = nullptr);

}  // namespace ringlm

#endif  // RINGLM_MODEL_STORE_TENSOR_MANIFEST_H_
