#include "security/internal/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/posix_file.h"
#include "security/crypto.h"

namespace ringlm::security_internal {
namespace {

absl::Status ErrnoStatus(int err, const std::string& action, const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrCat(action, " ", path));
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::Status SyncDir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus(errno, "cannot open directory", dir);
  if (::fsync(fd.get()) != 0) return ErrnoStatus(errno, "cannot fsync directory", dir);
  return absl::OkStatus();
}

// Writes all of `contents` to the new file `fd` (named `path` in messages),
// forces mode 0600 and fsyncs.
absl::Status FillAndSync(UniqueFd& fd, std::string_view contents, const std::string& path) {
  if (::fchmod(fd.get(), 0600) != 0) return ErrnoStatus(errno, "cannot chmod", path);
  while (!contents.empty()) {
    const ssize_t n = ::write(fd.get(), contents.data(), contents.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus(errno, "cannot write", path);
    contents.remove_prefix(static_cast<size_t>(n));
  }
  if (::fsync(fd.get()) != 0) return ErrnoStatus(errno, "cannot fsync", path);
  if (fd.Close() != 0) return ErrnoStatus(errno, "cannot close", path);
  return absl::OkStatus();
}

absl::Status AlreadyExists(const std::string& path) {
  return absl::AlreadyExistsError(absl::StrCat(path, " already exists; not overwriting it"));
}

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what,
                                           size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(what, " ", path, " does not exist"));
    if (err == EACCES || err == EPERM) {
      return absl::PermissionDeniedError(absl::StrCat("cannot read ", what, " ", path));
    }
    return ErrnoStatus(err, absl::StrCat("cannot open ", what), path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "cannot stat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is not a regular file"));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s %s is accessible by group or others (mode %04o); "
                        "refusing to use it. Run: chmod 600 %s",
                        what, path, st.st_mode & 07777, path));
  }
  if (static_cast<size_t>(st.st_size) > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " is too large (", st.st_size, " bytes)"));
  }
  std::string contents;
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "cannot read", path);
    if (n == 0) break;
    contents.append(buf, static_cast<size_t>(n));
    if (contents.size() > max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is too large"));
    }
  }
  return contents;
}

absl::Status WriteSecretFile(const std::string& path, std::string_view contents, bool overwrite) {
  struct stat st;
  if (!overwrite && ::lstat(path.c_str(), &st) == 0) return AlreadyExists(path);
  const std::string dir = DirName(path);
  const std::string tmp = absl::StrCat(path, ".tmp-", HexEncode(RandomBytes(6)));
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd.get() < 0) return ErrnoStatus(errno, "cannot create", tmp);
    if (absl::Status s = FillAndSync(fd, contents, tmp); !s.ok()) {
      ::unlink(tmp.c_str());
      return s;
    }
  }
  if (overwrite) {
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      return ErrnoStatus(err, "cannot rename into place", path);
    }
    return SyncDir(dir);
  }
  // link() publishes the complete file only if `path` does not exist yet, so
  // two racing writers cannot clobber each other.
  const int link_rc = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (link_rc != 0) {
    if (err == EEXIST) return AlreadyExists(path);
    if (err != EPERM && err != ENOTSUP && err != EOPNOTSUPP && err != EMLINK) {
      return ErrnoStatus(err, "cannot link into place", path);
    }
    // A file system without hard links: create in place instead. A crash
    // mid-write can then leave a short file, which readers report.
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd.get() < 0) {
      if (errno == EEXIST) return AlreadyExists(path);
      return ErrnoStatus(errno, "cannot create", path);
    }
    if (absl::Status s = FillAndSync(fd, contents, path); !s.ok()) return s;
  }
  return SyncDir(dir);
}

absl::Status MakePrivateDirs(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty directory path");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(path, " exists but is not a directory"));
  }
  const std::string parent = DirName(path);
  if (parent != path && parent != "." && parent != "/") {
    if (absl::Status s = MakePrivateDirs(parent); !s.ok()) return s;
  }
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, "cannot create directory", path);
  }
  return absl::OkStatus();
}

}  // namespace ringlm::security_internal
