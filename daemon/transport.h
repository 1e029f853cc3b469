// How a node's ring logic reaches other nodes. The seam where tests inject
// faults; production uses GrpcTransport (node.cc), which short-cuts calls
// to this node itself.
#ifndef RINGLM_DAEMON_TRANSPORT_H_
#define RINGLM_DAEMON_TRANSPORT_H_

#include "absl/status/status.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// Every call has a deadline and returns Unavailable or DeadlineExceeded for
// an unreachable node. Thread-safe.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual absl::Status StageStep(const v1::PlanStage& to, const v1::StageStepRequest& request) = 0;
  virtual absl::Status DeliverToken(const v1::PlanStage& origin,
                                    const v1::DeliverTokenRequest& request,
                                    v1::DeliverTokenReply* reply) = 0;
  virtual absl::Status Cancel(const v1::PlanStage& to, const std::string& request_id) = 0;
  virtual absl::Status DropSession(const v1::PlanStage& to, const std::string& session_id) = 0;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_TRANSPORT_H_
