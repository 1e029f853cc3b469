// Test-only: what the `ringlm` command tests share: running a command
// in-process with its output captured, the bundled model and references, a
// loopback port that refuses connections, and an in-process RingNode server
// to talk to.
#ifndef RINGLM_CLI_TEST_COMMANDS_H_
#define RINGLM_CLI_TEST_COMMANDS_H_

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "proto/ringlm.grpc.pb.h"

namespace ringlm::testing {

// A command's exit status and everything it wrote.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

using CommandFunction = int (*)(const std::vector<std::string>& args, std::ostream& out,
                                std::ostream& err);

// Calls `command(args, out, err)` with string streams.
CommandResult RunCommand(CommandFunction command, const std::vector<std::string>& args);

// $RINGLM_SHARED_DIR/models/stories260K-<variant>.gguf (variant f32 or q8_0).
std::string StoriesModel(const std::string& variant = "f32");

// ../shared/refs/stories260k_llamacpp.json: llama.cpp's ids and texts.
nlohmann::json StoriesReferences();

// A loopback TCP port with nothing listening on it: a socket bound to it but
// never listening, so a connection is refused at once and no other process
// can take the port while this object lives. Owns the socket. Not
// thread-safe (nothing changes after construction).
class RefusingPort {
 public:
  RefusingPort();
  ~RefusingPort();
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;

  std::string address() const;  // "127.0.0.1:PORT"

 private:
  int fd_ = -1;
  int port_ = 0;
};

// An in-process RingNode gRPC server on 127.0.0.1 at a port the kernel picks
// (plaintext, what the commands speak with --insecure) that answers Topology
// and Generate with what the test set; every other call is UNIMPLEMENTED.
// Records the last Generate request. Owns its server, which the destructor
// shuts down (waiting for calls in progress, which never block). Thread-safe.
class FakeRingNode final : public v1::RingNode::Service {
 public:
  FakeRingNode();
  ~FakeRingNode() override;

  std::string address() const { return address_; }

  void SetTopology(const v1::TopologyReply& reply);
  // Generate streams `events`, then ends the call with `status`.
  void SetGenerate(std::vector<v1::GenerateEvent> events, grpc::Status status = grpc::Status::OK);
  v1::GenerateRequest last_generate_request() const;

  grpc::Status Topology(grpc::ServerContext* context, const v1::TopologyRequest* request,
                        v1::TopologyReply* reply) override;
  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateEvent>* writer) override;

 private:
  mutable absl::Mutex mu_;
  v1::TopologyReply topology_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::GenerateEvent> events_ ABSL_GUARDED_BY(mu_);
  grpc::Status generate_status_ ABSL_GUARDED_BY(mu_);
  v1::GenerateRequest last_request_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace ringlm::testing

#endif  // RINGLM_CLI_TEST_COMMANDS_H_
