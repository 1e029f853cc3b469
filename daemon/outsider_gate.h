// The gRPC port's gate for callers without a cluster certificate.
#ifndef RINGLM_DAEMON_OUTSIDER_GATE_H_
#define RINGLM_DAEMON_OUTSIDER_GATE_H_

#include <grpcpp/grpcpp.h>

#include <string>

namespace ringlm {

// OutsiderGate
//
// Purpose: refuses, at a call's headers and before gRPC reads its message,
// every call from a peer without a verified cluster certificate, except
// Generate with "authorization: Bearer <api_key>" (when an API key is set).
// gRPC 1.51 reads a message whole, up to its length prefix, before the
// message size limit refuses it; this keeps outsiders' bytes unread. The
// service checks every call again (node_service.cc): the gate only moves
// the refusal of outsiders ahead of their messages.
// Ownership: installed on the server's TLS credentials
// (SetAuthMetadataProcessor); secure mode only.
// Thread-safety: thread-safe; Process never blocks (runs inline in gRPC).
class OutsiderGate : public grpc::AuthMetadataProcessor {
 public:
  explicit OutsiderGate(std::string api_key) : api_key_(std::move(api_key)) {}

  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed, OutputMetadata* response) override;

 private:
  const std::string api_key_;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_OUTSIDER_GATE_H_
