// Small files holding secrets (the cluster key, a node's private key): read
// with an ssh-like permission check, written with mode 0600 and fsync. Internal
// to security/. Messages name the path but never contain file contents.
#ifndef RINGLM_SECURITY_INTERNAL_SECRET_FILE_H_
#define RINGLM_SECURITY_INTERNAL_SECRET_FILE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringlm::security_internal {

// The contents of the secret file at `path` (symlinks followed). `what` names
// it in messages ("cluster key file"). Errors:
//   NotFound           - no such file;
//   PermissionDenied   - the process may not read it;
//   FailedPrecondition - group or other permission bits are set (the message
//                        says `chmod 600 PATH`);
//   InvalidArgument    - not a regular file, or longer than `max_bytes`;
//   other errno codes  - from absl::ErrnoToStatus.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what,
                                           size_t max_bytes);

// Writes `contents` to `path` with mode 0600 (whatever the umask), fsyncing
// the file and its directory. The file appears whole or not at all: it is
// written to a temporary sibling first. With !overwrite an existing `path`
// gives AlreadyExists and is left untouched; with overwrite it is replaced.
// A missing directory gives NotFound.
absl::Status WriteSecretFile(const std::string& path, std::string_view contents, bool overwrite);

// Creates `path` and any missing parents with mode 0700. Existing
// directories are left as they are. FailedPrecondition when a component
// exists but is not a directory.
absl::Status MakePrivateDirs(const std::string& path);

}  // namespace ringlm::security_internal

#endif  // RINGLM_SECURITY_INTERNAL_SECRET_FILE_H_
