// Test-only: a real gRPC server in the test process, on 127.0.0.1 at a port
// the kernel picks, in plaintext (what PeerClient speaks in --insecure mode),
// so tests of the node-to-node calls run the whole wire path without a
// cluster key. Include security/grpc_test_environment.h in one file of the
// binary as well.
#ifndef RINGLM_DAEMON_RPC_TEST_GRPC_SERVER_H_
#define RINGLM_DAEMON_RPC_TEST_GRPC_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "daemon/rpc/peer_client.h"

namespace ringlm::testing {

// Serves `service` (borrowed; it must outlive this object) until Shutdown or
// destruction. A service that holds calls open must finish them before then:
// Shutdown waits for every call to end. Not thread-safe.
class TestGrpcServer {
 public:
  explicit TestGrpcServer(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.SetMaxReceiveMessageSize(kMaxModelMessageBytes);
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
  }
  ~TestGrpcServer() { Shutdown(); }
  TestGrpcServer(const TestGrpcServer&) = delete;
  TestGrpcServer& operator=(const TestGrpcServer&) = delete;

  // Stops listening and waits for the calls in progress (calls still open
  // after a few seconds are cancelled).
  void Shutdown() {
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_->Wait();
    server_.reset();
  }

  bool started() const { return server_ != nullptr && port_ > 0; }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace ringlm::testing

#endif  // RINGLM_DAEMON_RPC_TEST_GRPC_SERVER_H_
