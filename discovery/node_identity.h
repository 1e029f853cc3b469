// A node's persistent identity: the node id kept in the state directory so a
// restarted daemon comes back under the same name.
#ifndef RINGLM_DISCOVERY_NODE_IDENTITY_H_
#define RINGLM_DISCOVERY_NODE_IDENTITY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ringlm {

// Reads the node id from `<state_dir>/node_id`, or creates it: a random
// "node-" + 12 lowercase hex chars, written to a temporary file and then
// linked into place, so a reader never sees a partial file and two processes
// racing to create it agree on one id. Creates `state_dir` (and parents).
// A trailing newline is allowed. Errors: InvalidArgument for an empty
// state_dir, DataLoss for a file whose content is not a valid node id (see
// IsValidNodeId), other codes from the file system (errno mapped).
absl::StatusOr<std::string> LoadOrCreateNodeId(const std::string& state_dir);

// $XDG_STATE_HOME/ringlm when XDG_STATE_HOME is an absolute path, else
// $HOME/.local/state/ringlm (HOME from the password database when unset).
std::string DefaultStateDir();

// 64 random bits from the OS (std::random_device); for instance ids.
uint64_t RandomU64();

}  // namespace ringlm

#endif  // RINGLM_DISCOVERY_NODE_IDENTITY_H_
