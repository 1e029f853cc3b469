// Turns at the cores for the daemons of one machine.
#ifndef RINGLM_DAEMON_STAGE_COMPUTE_LOCK_H_
#define RINGLM_DAEMON_STAGE_COMPUTE_LOCK_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/posix_file.h"

namespace ringlm {

// An exclusive lock on one file (flock(2)) that every daemon of a machine
// opens, so that stages whose thread pools span the same cores run their
// forward passes one at a time instead of at once. While one computes, the
// others' steps wait and join their next batch, so co-located stages run
// few large batches, not many small ones fighting for the cores. Across
// machines nobody shares the file and a turn is never waited for.
//
// The kernel releases the lock when its holder dies, so a crashed daemon
// never blocks the others. Only the user that owns the file's directory can
// take it (DefaultPath). One instance per holder; not thread-safe.
class ComputeLock {
 public:
  // Opens `path` and `path`.waiting, creating them with mode 0600. Their
  // directory must exist.
  static absl::StatusOr<std::unique_ptr<ComputeLock>> Open(const std::string& path);
  // $XDG_RUNTIME_DIR/ringlm/compute.lock, else /tmp/ringlm-<uid>/compute.lock.
  // Creates the directory with mode 0700, and refuses one that another user
  // owns or that others may write into.
  static absl::StatusOr<std::string> DefaultPath();

  // Takes the lock. While another holds it, tries again every 50 us, backing
  // off to every 1 ms. False, without the lock, once `stop()` is true. Should
  // flock itself fail, warns once and returns true: no turns, but no hang.
  bool Acquire(const std::function<bool()>& stop);
  void Release();
  // Whether another holder is waiting in Acquire now (waiters hold a shared
  // lock on the .waiting file while they wait).
  bool OthersWaiting();

 private:
  // Acquire's polling, once it found the lock taken.
  bool Wait(const std::function<bool()>& stop);
  ComputeLock(int fd, int waiting_fd) : fd_(fd), waiting_fd_(waiting_fd) {}
  UniqueFd fd_;
  UniqueFd waiting_fd_;
  bool warned_ = false;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_STAGE_COMPUTE_LOCK_H_
