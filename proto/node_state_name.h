// NodeState as people read it, shared by the CLI and the daemon's API.
#ifndef RINGLM_PROTO_NODE_STATE_NAME_H_
#define RINGLM_PROTO_NODE_STATE_NAME_H_

#include <string>

#include "proto/ringlm.pb.h"

namespace ringlm {

// "starting", "ready", "idle", "no-fit", "fetching", else "unknown".
inline std::string StateName(v1::NodeState s) {
  switch (s) {
    case v1::NODE_STATE_STARTING:
      return "starting";
    case v1::NODE_STATE_READY:
      return "ready";
    case v1::NODE_STATE_IDLE:
      return "idle";
    case v1::NODE_STATE_NO_FIT:
      return "no-fit";
    case v1::NODE_STATE_FETCHING:
      return "fetching";
    default:
      return "unknown";
  }
}

}  // namespace ringlm

#endif  // RINGLM_PROTO_NODE_STATE_NAME_H_
