// How a node's ring logic reaches other nodes. The seam where tests inject
// faults; production uses MemberTransport, which short-cuts calls to this
// node itself and otherwise calls authenticated members over gRPC.
#ifndef RINGLM_DAEMON_RPC_TRANSPORT_H_
#define RINGLM_DAEMON_RPC_TRANSPORT_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/rpc/caller.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

// Candidate prefixes in one AdoptPrefix call at most.
inline constexpr int kMaxAdoptClaims = 64;

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
  virtual absl::Status Rollback(const std::string& to, const v1::RollbackRequest& request) = 0;
  virtual absl::Status DropSession(const std::string& to, const std::string& session_id) = 0;
  // Positions of the offered prefix node `to` now holds in the caller's
  // session (AdoptPrefixReply.adopted).
  virtual absl::StatusOr<uint32_t> AdoptPrefix(const std::string& to,
                                               const v1::AdoptPrefixRequest& request) = 0;
};

class PeerClient;

// This node's own stage, as the transport reaches it without a network
// hop: the calls a peer would make over gRPC, with the caller already
// established. StageRuntime implements it. Thread-safe.
class LocalStage {
 public:
  virtual ~LocalStage() = default;
  virtual absl::Status Enqueue(v1::StageStepRequest request, const Caller& caller) = 0;
  virtual absl::Status Cancel(const std::string& request_id, const Caller& caller) = 0;
  virtual absl::Status Rollback(const v1::RollbackRequest& request, const Caller& caller) = 0;
  // True when a session was dropped.
  virtual absl::StatusOr<bool> DropSession(const std::string& session_id, const Caller& caller) = 0;
  virtual absl::StatusOr<uint32_t> AdoptPrefix(const v1::AdoptPrefixRequest& request,
                                               const Caller& caller) = 0;
};

// This node's own origin, as a stage of this node delivers a token to it.
// OriginRegistry implements it. Returns true when the sender should stop.
// Thread-safe.
class LocalOrigin {
 public:
  virtual ~LocalOrigin() = default;
  virtual absl::StatusOr<bool> Deliver(const v1::DeliverTokenRequest& delivery,
                                       const std::string& caller) = 0;
};

// The production Transport. A call to this node itself goes straight to its
// stage runtime or origin registry, as from Caller::Self; any other goes
// over `client` to the address `resolve` proves for that member (the
// cluster view's), and a node it does not know gets FailedPrecondition.
//
// Ownership: borrows everything; the client, the resolver's state and the
// attached runtime and registry must outlive every call. Attach once, before
// the first call (they are built after the transport, which they use).
// Thread-safe after Attach.
class MemberTransport : public Transport {
 public:
  using Resolver = std::function<std::optional<std::string>(const std::string& node_id)>;
  MemberTransport(std::string self_id, PeerClient* client, Resolver resolve);

  void Attach(LocalStage* stage, LocalOrigin* origin);

  // Where to call member `node_id`; FailedPrecondition for a non-member.
  absl::StatusOr<std::string> Resolve(const std::string& node_id) const;

  absl::Status StageStep(const std::string& to, const v1::StageStepRequest& request) override;
  absl::Status DeliverToken(const std::string& origin, const v1::DeliverTokenRequest& request,
                            v1::DeliverTokenReply* reply) override;
  absl::Status Cancel(const std::string& to, const std::string& request_id) override;
  absl::Status Rollback(const std::string& to, const v1::RollbackRequest& request) override;
  absl::Status DropSession(const std::string& to, const std::string& session_id) override;
  absl::StatusOr<uint32_t> AdoptPrefix(const std::string& to,
                                       const v1::AdoptPrefixRequest& request) override;

 private:
  const std::string self_id_;
  PeerClient* const client_;
  const Resolver resolve_;
  LocalStage* stage_ = nullptr;
  LocalOrigin* origin_ = nullptr;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_RPC_TRANSPORT_H_
