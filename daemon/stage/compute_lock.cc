#include "daemon/stage/compute_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

// The directory exists (created now if need be) as a private one of ours.
absl::Status EnsurePrivateDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    return absl::InternalError(absl::StrCat("cannot stat ", dir, ": ", std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 0022) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(dir, " is not a directory of this user that only it may write into"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ComputeLock>> ComputeLock::Open(const std::string& path) {
  int fds[2];
  const std::string paths[2] = {path, path + ".waiting"};
  for (int i = 0; i < 2; ++i) {
    fds[i] = ::open(paths[i].c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fds[i] < 0) {
      const int err = errno;
      if (i == 1) ::close(fds[0]);
      return absl::InternalError(
          absl::StrCat("cannot open the compute lock ", paths[i], ": ", std::strerror(err)));
    }
  }
  return std::unique_ptr<ComputeLock>(new ComputeLock(fds[0], fds[1]));
}

absl::StatusOr<std::string> ComputeLock::DefaultPath() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  std::string dir;
  if (runtime != nullptr && runtime[0] == '/') {
    dir = absl::StrCat(runtime, "/ringlm");
  } else {
    dir = absl::StrCat("/tmp/ringlm-", ::geteuid());
  }
  if (absl::Status s = EnsurePrivateDir(dir); !s.ok()) return s;
  return dir + "/compute.lock";
}

bool ComputeLock::Acquire(const std::function<bool()>& stop) {
  if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) return true;
  // Waiting: say so until the turn comes (or the wait ends).
  ::flock(waiting_fd_.get(), LOCK_SH);
  const bool taken = Wait(stop);
  ::flock(waiting_fd_.get(), LOCK_UN);
  return taken;
}

bool ComputeLock::OthersWaiting() {
  if (::flock(waiting_fd_.get(), LOCK_EX | LOCK_NB) != 0) return true;
  ::flock(waiting_fd_.get(), LOCK_UN);
  return false;
}

bool ComputeLock::Wait(const std::function<bool()>& stop) {
  auto pause = std::chrono::microseconds(50);
  while (true) {
    if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) return true;
    if (errno != EWOULDBLOCK && errno != EINTR) {
      // Not for an open file in practice (ENOLCK at most): compute without
      // turns rather than not at all.
      if (!warned_)
        spdlog::warn("the compute lock fails ({}); computing without turns", std::strerror(errno));
      warned_ = true;
      return true;
    }
    if (stop()) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void ComputeLock::Release() { ::flock(fd_.get(), LOCK_UN); }

}  // namespace ringlm
