#include "cli/test_commands.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "security/grpc_test_environment.h"

namespace ringlm::testing {

CommandResult RunCommand(CommandFunction command, const std::vector<std::string>& args) {
  std::ostringstream out, err;
  CommandResult r;
  r.exit_code = command(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::string StoriesModel(const std::string& variant) {
  return std::string(RINGLM_SHARED_DIR) + "/models/stories260K-" + variant + ".gguf";
}

nlohmann::json StoriesReferences() {
  std::ifstream in(std::string(RINGLM_SHARED_DIR) + "/refs/stories260k_llamacpp.json");
  EXPECT_TRUE(in.good()) << "no reference file under " << RINGLM_SHARED_DIR;
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

RefusingPort::RefusingPort() {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;  // any free port
  socklen_t len = sizeof(addr);
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ADD_FAILURE() << "cannot bind a loopback port";
    return;
  }
  port_ = ntohs(addr.sin_port);
}

RefusingPort::~RefusingPort() {
  if (fd_ >= 0) ::close(fd_);
}

std::string RefusingPort::address() const { return "127.0.0.1:" + std::to_string(port_); }

FakeRingNode::FakeRingNode() {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(this);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) ADD_FAILURE() << "cannot start the fake RingNode";
  address_ = "127.0.0.1:" + std::to_string(port);
}

FakeRingNode::~FakeRingNode() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
}

void FakeRingNode::SetTopology(const v1::TopologyReply& reply) {
  absl::MutexLock lock(&mu_);
  topology_ = reply;
}

void FakeRingNode::SetGenerate(std::vector<v1::GenerateEvent> events, grpc::Status status) {
  absl::MutexLock lock(&mu_);
  events_ = std::move(events);
  generate_status_ = std::move(status);
}

v1::GenerateRequest FakeRingNode::last_generate_request() const {
  absl::MutexLock lock(&mu_);
  return last_request_;
}

grpc::Status FakeRingNode::Topology(grpc::ServerContext*, const v1::TopologyRequest*,
                                    v1::TopologyReply* reply) {
  absl::MutexLock lock(&mu_);
  *reply = topology_;
  return grpc::Status::OK;
}

grpc::Status FakeRingNode::Generate(grpc::ServerContext*, const v1::GenerateRequest* request,
                                    grpc::ServerWriter<v1::GenerateEvent>* writer) {
  std::vector<v1::GenerateEvent> events;
  grpc::Status status;
  {
    absl::MutexLock lock(&mu_);
    last_request_ = *request;
    events = events_;
    status = generate_status_;
  }
  for (const v1::GenerateEvent& e : events) {
    if (!writer->Write(e)) break;
  }
  return status;
}

}  // namespace ringlm::testing
