// Who made a node-to-node call, as the gRPC edge established it.
#ifndef RINGLM_DAEMON_RPC_CALLER_H_
#define RINGLM_DAEMON_RPC_CALLER_H_

#include <string>

namespace ringlm {

// The caller of one call. With a cluster key the identity comes from the
// caller's verified TLS certificate (and, for a node, the fingerprint pinned
// in the peer table); in --insecure mode it is only claimed (a metadata
// header), so the same rules run but prove nothing.
struct Caller {
  enum class Role { kNode, kClient };
  Role role = Role::kNode;
  std::string node_id;           // a node's id; a client's certificate name
  bool proven = false;           // false in insecure mode
  std::string spki_fingerprint;  // of the caller's certificate; empty when insecure

  static Caller Self(std::string id) { return Caller{Role::kNode, std::move(id), true, ""}; }
  bool is_node() const { return role == Role::kNode; }
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_RPC_CALLER_H_
