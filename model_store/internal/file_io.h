// Small POSIX file helpers for model_store: whole reads and writes that loop
// over short transfers and EINTR, and atomic replacement of a small file.
// Every function maps errno onto an absl::Status carrying the path.
#ifndef RINGLM_MODEL_STORE_INTERNAL_FILE_IO_H_
#define RINGLM_MODEL_STORE_INTERNAL_FILE_IO_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/posix_file.h"

namespace ringlm::model_store_internal {

// This abseil's string_view is its own type, not std::string_view, so
// absl::StrCat takes std::string_view pieces through this.
inline absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

// absl::ErrnoToStatus(err, "<what> '<path>'").
absl::Status ErrnoError(int err, std::string_view what, std::string_view path);

using ::ringlm::PreadFull;  // base/posix_file.h
// Writes all of `bytes` at `offset`.
absl::Status PwriteFull(int fd, std::string_view bytes, uint64_t offset, std::string_view path);

// The whole file at `path` into `out`. NotFound when it does not exist;
// DataLoss when it is larger than `max_bytes` (nothing is allocated for it).
absl::Status ReadSmallFile(const std::string& path, uint64_t max_bytes, std::string* out);

// Replaces `path` with `bytes` so that a reader sees the old or the new file,
// never a mix: a temp file in the same folder, fsync, rename, fsync of the
// folder. The temp file is removed on failure.
absl::Status WriteFileAtomic(const std::string& path, std::string_view bytes);

// fsync of a folder, so that a rename or create in it is durable.
absl::Status FsyncDir(const std::string& dir);

// mkdir -p with mode 0755.
absl::Status MakeDirs(const std::string& dir);

// The folder part of `path` ("." when it has none).
std::string DirName(const std::string& path);

}  // namespace ringlm::model_store_internal

#endif  // RINGLM_MODEL_STORE_INTERNAL_FILE_IO_H_
