// The daemon's one gRPC server, and the router that hands each call to the
// ring of the model the call names.
#ifndef RINGLM_DAEMON_RING_SERVER_H_
#define RINGLM_DAEMON_RING_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ringlm.grpc.pb.h"
#include "security/tls_credentials.h"

namespace ringlm {

struct RingServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 47801;  // 0 = any free port
  // A connection must finish its TLS handshake and send its HTTP/2 preface
  // within this, or it is closed.
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds(5)};
  // The largest message a call may bring (the largest step of any model).
  int max_message_bytes = 64 << 20;
  std::optional<TlsIdentity> identity;  // nullopt = insecure
  // Admits a Generate caller without a certificate (OutsiderGate).
  std::string api_key;
};

class ModelRouter;

// RingServer
//
// Purpose: one listening port for every model this daemon hosts. Each
// model's ring registers its RingNode service under its keys (the model's
// fingerprint and the names it is served under); a call goes to the service
// whose key its kModelMetadata names, a call naming none to the first
// service added (GetModel and FetchTensor: to the model their request
// names, if hosted), and a call naming a model this daemon does not host
// gets NOT_FOUND. Each service authenticates its callers itself.
// Security: with an identity, mutual TLS only, and a caller without a
// certificate is refused at its headers (OutsiderGate) unless it calls
// Generate with the API key.
// Ownership: owns the gRPC server; services are borrowed and must outlive
// Shutdown. Thread-safety: Add and Remove are thread-safe; calls arrive on
// gRPC's threads.
class RingServer {
 public:
  // Binds host:port; Unavailable when it cannot (the port is taken).
  static absl::StatusOr<std::unique_ptr<RingServer>> Start(const RingServerOptions& options);
  ~RingServer();

  uint16_t port() const { return port_; }
  // The largest message a call may bring (RingServerOptions).
  int max_message_bytes() const { return max_message_bytes_; }
  // Calls naming `fingerprint` or any of `names` go to `service` from now
  // on. AlreadyExists when one is taken (nothing is added then).
  absl::Status Add(const std::string& fingerprint, const std::vector<std::string>& names,
                   v1::RingNode::CallbackService* service);
  // The first name of every model added and not removed, in order.
  std::vector<std::string> ModelNames() const;
  // Calls naming `service`'s keys get NOT_FOUND from now on.
  void Remove(const v1::RingNode::CallbackService* service);
  // Stops taking calls and ends the ones running (2 s grace). Idempotent.
  void Shutdown();

 private:
  RingServer();

  std::unique_ptr<ModelRouter> router_;
  std::unique_ptr<grpc::Server> server_;
  uint16_t port_ = 0;
  int max_message_bytes_ = 0;
  bool shut_down_ = false;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_RING_SERVER_H_
