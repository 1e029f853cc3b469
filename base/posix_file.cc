#include "base/posix_file.h"

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"

namespace ringlm {

absl::Status PreadFull(int fd, void* out, uint64_t n, uint64_t offset, std::string_view path) {
  const std::string name(path);
  char* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot read '", name, "'"));
    }
    if (r == 0) {
      return absl::DataLossError(
          absl::StrCat("'", name, "' ends before offset ", offset + n, " (at ", offset, ")"));
    }
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return absl::OkStatus();
}

}  // namespace ringlm
