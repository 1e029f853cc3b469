// How a node's ring logic reaches other nodes. The seam where tests inject
// faults; production uses Node (node.cc), which short-cuts calls to this
// node itself and otherwise calls authenticated members over gRPC.
#ifndef RINGLM_DAEMON_TRANSPORT_H_
#define RINGLM_DAEMON_TRANSPORT_H_

#include <string>

#include "absl/status/status.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// Every call names its target by node id only: the transport dials the
// address it has verified for that member, never one taken from a request.
// Every call has a deadline and returns Unavailable or DeadlineExceeded for
// an unreachable node, FailedPrecondition for a node that is not an
// authenticated member. Thread-safe.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual absl::Status StageStep(const std::string& to, const v1::StageStepRequest& request) = 0;
  virtual absl::Status DeliverToken(const std::string& origin,
                                    const v1::DeliverTokenRequest& request,
                                    v1::DeliverTokenReply* reply) = 0;
  virtual absl::Status Cancel(const std::string& to, const std::string& request_id) = 0;
  virtual absl::Status DropSession(const std::string& to, const std::string& session_id) = 0;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_TRANSPORT_H_
