#include "model_store/internal/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace ringlm::model_store_internal {
namespace {

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting the error close() gives (for a written file).
  int Close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

}  // namespace

absl::Status ErrnoError(int err, std::string_view what, std::string_view path) {
  return absl::ErrnoToStatus(err, absl::StrCat(AbslView(what), " '", AbslView(path), "'"));
}

absl::Status PreadFull(int fd, void* out, uint64_t n, uint64_t offset, std::string_view path) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "cannot read", path);
    }
    if (r == 0) {
      return absl::DataLossError(absl::StrCat("'", AbslView(path), "' ends before offset ",
                                              offset + n, " (at ", offset, ")"));
    }
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return absl::OkStatus();
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
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
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
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
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
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
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
