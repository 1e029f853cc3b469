#include "daemon/rpc/transport.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/rpc/peer_client.h"

namespace ringlm {

MemberTransport::MemberTransport(std::string self_id, PeerClient* client, Resolver resolve)
    : self_id_(std::move(self_id)), client_(client), resolve_(std::move(resolve)) {}

void MemberTransport::Attach(LocalStage* stage, LocalOrigin* origin) {
  stage_ = stage;
  origin_ = origin;
}

absl::StatusOr<std::string> MemberTransport::Resolve(const std::string& node_id) const {
  if (std::optional<std::string> address = resolve_(node_id)) return *address;
  return absl::FailedPreconditionError(
      absl::StrCat("node ", node_id, " is not a proven member of the cluster"));
}

absl::Status MemberTransport::StageStep(const std::string& to,
                                        const v1::StageStepRequest& request) {
  if (to == self_id_) return stage_->Enqueue(request, Caller::Self(self_id_));
  RINGLM_ASSIGN_OR_RETURN(std::string address, Resolve(to));
  return client_->StageStep(address, request);
}

absl::Status MemberTransport::DeliverToken(const std::string& origin,
                                           const v1::DeliverTokenRequest& request,
                                           v1::DeliverTokenReply* reply) {
  if (origin == self_id_) {
    RINGLM_ASSIGN_OR_RETURN(bool stop, origin_->Deliver(request, self_id_));
    reply->set_cancel(stop);
    return absl::OkStatus();
  }
  RINGLM_ASSIGN_OR_RETURN(std::string address, Resolve(origin));
  return client_->DeliverToken(address, request, reply);
}

absl::Status MemberTransport::Cancel(const std::string& to, const std::string& request_id) {
  if (to == self_id_) return stage_->Cancel(request_id, Caller::Self(self_id_));
  RINGLM_ASSIGN_OR_RETURN(std::string address, Resolve(to));
  return client_->Cancel(address, request_id);
}

absl::Status MemberTransport::Rollback(const std::string& to, const v1::RollbackRequest& request) {
  if (to == self_id_) return stage_->Rollback(request, Caller::Self(self_id_));
  RINGLM_ASSIGN_OR_RETURN(std::string address, Resolve(to));
  return client_->Rollback(address, request);
}

absl::Status MemberTransport::DropSession(const std::string& to, const std::string& session_id) {
  if (to == self_id_) return stage_->DropSession(session_id, Caller::Self(self_id_)).status();
  RINGLM_ASSIGN_OR_RETURN(std::string address, Resolve(to));
  return client_->DropSession(address, session_id);
}

absl::StatusOr<uint32_t> MemberTransport::AdoptPrefix(const std::string& to,
                                                      const v1::AdoptPrefixRequest& request) {
  if (to == self_id_) return stage_->AdoptPrefix(request, Caller::Self(self_id_));
  RINGLM_ASSIGN_OR_RETURN(std::string address, Resolve(to));
  return client_->AdoptPrefix(address, request);
}

}  // namespace ringlm
