#include "model_store/internal/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "base/posix_file.h"

namespace ringlm::model_store_internal {

absl::Status ErrnoError(int err, std::string_view what, std::string_view path) {
  return absl::ErrnoToStatus(err, absl::StrCat(AbslView(what), " '", AbslView(path), "'"));
}

absl::Status PwriteFull(int fd, std::string_view bytes, uint64_t offset, std::string_view path) {
  const char* p = bytes.data();
  uint64_t n = bytes.size();
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "cannot write", path);
    }
    p += w;
    n -= static_cast<uint64_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return absl::OkStatus();
}

absl::Status ReadSmallFile(const std::string& path, uint64_t max_bytes, std::string* out) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError(errno, "cannot open", path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoError(errno, "cannot stat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::DataLossError(absl::StrCat("'", path, "' is not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    return absl::DataLossError(
        absl::StrCat("'", path, "' is ", size, " bytes, more than the ", max_bytes, " allowed"));
  }
  out->resize(size);
  return PreadFull(fd.get(), out->data(), size, 0, path);
}

absl::Status WriteFileAtomic(const std::string& path, std::string_view bytes) {
  // pid + counter: unique among the processes and threads writing beside it.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
  absl::Status s = [&]() -> absl::Status {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0) return ErrnoError(errno, "cannot create", tmp);
    if (absl::Status w = PwriteFull(fd.get(), bytes, 0, tmp); !w.ok()) return w;
    if (::fsync(fd.get()) != 0) return ErrnoError(errno, "cannot fsync", tmp);
    if (fd.Close() != 0) return ErrnoError(errno, "cannot close", tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError(errno, "cannot rename", tmp);
    return absl::OkStatus();
  }();
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return FsyncDir(DirName(path));
}

absl::Status FsyncDir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError(errno, "cannot open folder", dir);
  if (::fsync(fd.get()) != 0) return ErrnoError(errno, "cannot fsync folder", dir);
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoError(ec.value(), "cannot create folder", dir);
  return absl::OkStatus();
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace ringlm::model_store_internal
