// POSIX file helpers: a descriptor owned by a scope, and whole reads.
#ifndef RINGLM_BASE_POSIX_FILE_H_
#define RINGLM_BASE_POSIX_FILE_H_

#include <unistd.h>

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace ringlm {

// Closes the descriptor it holds (if >= 0) when it goes out of scope. Not
// copyable. Not thread-safe (one owner).
class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  // Closes now and returns what close() says: for a written file, close can
  // report a failed write-back.
  int Close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

// Reads exactly `n` bytes at `offset` of `fd` into `out`, over short reads
// and EINTR. The errno text with `path` on failure; DataLoss when the file
// ends first.
absl::Status PreadFull(int fd, void* out, uint64_t n, uint64_t offset, std::string_view path);

}  // namespace ringlm

#endif  // RINGLM_BASE_POSIX_FILE_H_
