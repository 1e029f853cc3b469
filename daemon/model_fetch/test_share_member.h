// Test-only helpers for the model distribution tests: model files in temp
// folders (the bundled model, a model with tensors of several chunks, copies
// that rotted), and a member that serves one over real gRPC on loopback
// (Health, GetModel, FetchTensor, as NodeService does), in --insecure mode.
#ifndef RINGLM_DAEMON_MODEL_FETCH_TEST_SHARE_MEMBER_H_
#define RINGLM_DAEMON_MODEL_FETCH_TEST_SHARE_MEMBER_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/metrics.h"
#include "base/testing/temp_dir.h"
#include "daemon/model_fetch/model_share.h"
#include "daemon/rpc/proto_convert.h"
#include "daemon/rpc/test_grpc_server.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gtest/gtest.h"
#include "model_store/tensor_manifest.h"

namespace ringlm::testing {

inline const std::string& BundledModelPath() {
  static const std::string path = std::string(RINGLM_SHARED_DIR) + "/models/stories260K-f32.gguf";
  return path;
}

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.good()) ADD_FAILURE() << "cannot write " << path;
}

// `bytes` as model.gguf in a fresh temp folder of its own; returns the path.
inline std::string WriteModelCopy(const std::string& bytes, const std::string& prefix) {
  const std::string path = MakeTempDir(prefix) + "/model.gguf";
  WriteFileBytes(path, bytes);
  return path;
}

// A GGUF file whose first tensor spans three manifest chunks (4 + 4 + 1 MiB)
// and whose second is a few hundred bytes.
inline std::string MultiChunkModelBytes() {
  GgufWriter w;
  w.SetString("general.architecture", "test");
  std::string big(9 * 1048576, '\0');
  for (size_t i = 0; i < big.size() / 4; ++i) {
    const float f = static_cast<float>(i % 1000) / 1000.0f;
    std::memcpy(&big[i * 4], &f, 4);
  }
  EXPECT_TRUE(w.AddTensor("blk.0.big", {1024, 2304}, TensorType::kF32, big).ok());
  EXPECT_TRUE(w.AddTensor("small", {64}, TensorType::kF32, std::string(256, '\x3f')).ok());
  return w.ToBytes();
}

// Flips byte `offset` of the file at `path`, keeping its size and time of
// modification: to the manifest cache beside it, the file has not changed.
// A member with such a file serves the manifest of the bytes it once had.
inline void RotKeepingTheFileTime(const std::string& path, uint64_t offset) {
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  char byte = 0;
  ASSERT_EQ(::pread(fd, &byte, 1, static_cast<off_t>(offset)), 1);
  byte = static_cast<char>(byte ^ 0x40);
  ASSERT_EQ(::pwrite(fd, &byte, 1, static_cast<off_t>(offset)), 1);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::futimens(fd, times), 0);
  ::close(fd);
}

// Waits (up to a minute) until the share's manifest is ready or failed.
inline absl::Status AwaitManifest(ModelShare& share) {
  absl::Status s;
  for (int i = 0; i < 60000; ++i) {
    s = share.Manifest().status();
    if (!absl::IsUnavailable(s)) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return s;
}

// Waits (up to a minute) until no FetchTensor stream holds a slot of the
// share. A stream gives its slot back in the reactor's OnDone, which gRPC
// may run after the client has already seen the stream end; tests that make
// many calls in a row wait for it, or they could be refused spuriously.
inline bool AwaitNoStreams(ModelShare& share) {
  for (int i = 0; i < 60000; ++i) {
    int taken = 0;
    while (taken < ModelShare::kMaxStreams && share.BeginStream()) ++taken;
    for (int j = 0; j < taken; ++j) share.EndStream();
    if (taken == ModelShare::kMaxStreams) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// A RingNode service of a member that serves a model: Health answers its node
// id and the fingerprint of `get_share` (empty without one); GetModel and
// FetchTensor are the production handlers over `get_share` and `fetch_share`
// (the same share unless a test makes a member that lies). Thread-safe.
class ShareService final : public v1::RingNode::CallbackService {
 public:
  ShareService(std::string node_id, ModelShare* share)
      : node_id_(std::move(node_id)), get_share_(share), fetch_share_(share) {
    metrics_.served_bytes = *registry_.AddCounter("served_bytes", "bytes served");
    metrics_.refused_streams = *registry_.AddCounter("refused_streams", "streams refused");
  }

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx,
                                   const v1::HealthRequest* /*request*/,
                                   v1::HealthReply* reply) override {
    absl::MutexLock lock(&mu_);
    reply->set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    reply->set_node_id(node_id_);
    reply->set_grpc_port(port_);
    if (get_share_ != nullptr) reply->set_model_fingerprint(get_share_->fingerprint());
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* ctx,
                                     const v1::GetModelRequest* request,
                                     v1::GetModelReply* reply) override {
    absl::Status s;
    {
      absl::MutexLock lock(&mu_);
      ++get_model_calls_;
      ServeGetModel(get_share_, *request, reply, &s);
    }
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  grpc::ServerWriteReactor<v1::TensorChunk>* FetchTensor(
      grpc::CallbackServerContext* /*ctx*/, const v1::FetchTensorRequest* request) override {
    absl::MutexLock lock(&mu_);
    ++fetch_calls_;
    return ServeFetchTensor(fetch_share_, *request, refusal_, metrics_);
  }

  void set_port(int port) {
    absl::MutexLock lock(&mu_);
    port_ = static_cast<uint32_t>(port);
  }
  void set_fetch_share(ModelShare* share) {
    absl::MutexLock lock(&mu_);
    fetch_share_ = share;
  }
  // What the gRPC edge decided about the caller (e.g. PermissionDenied).
  void set_refusal(absl::Status refusal) {
    absl::MutexLock lock(&mu_);
    refusal_ = std::move(refusal);
  }
  int get_model_calls() const {
    absl::MutexLock lock(&mu_);
    return get_model_calls_;
  }
  // Waits until `n` GetModel calls were answered (up to a minute); false if
  // fewer came by then.
  bool AwaitGetModelCalls(int n) const {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return get_model_calls_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
  }
  int fetch_calls() const {
    absl::MutexLock lock(&mu_);
    return fetch_calls_;
  }
  double served_bytes() const { return metrics_.served_bytes->Value(); }
  double refused_streams() const { return metrics_.refused_streams->Value(); }

 private:
  const std::string node_id_;
  MetricsRegistry registry_;
  ModelShareMetrics metrics_;
  mutable absl::Mutex mu_;
  ModelShare* get_share_ ABSL_GUARDED_BY(mu_);
  ModelShare* fetch_share_ ABSL_GUARDED_BY(mu_);
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
  uint32_t port_ ABSL_GUARDED_BY(mu_) = 0;
  int get_model_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int fetch_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

// A member with the full file at `path` (in a folder of its own), serving it
// under `fingerprint` once its manifest is ready (the constructor waits for
// it; ok() says whether it started). Owns the file, the share, the service
// and the server on loopback; the destructor stops the server first. Not
// thread-safe; its share and service are.
class ShareMember {
 public:
  ShareMember(std::string node_id, const std::string& path, std::string fingerprint) {
    absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return;
    file_ = *std::move(file);
    absl::StatusOr<std::unique_ptr<ModelShare>> share =
        ModelShare::ForFile(path, *file_, std::move(fingerprint), MakeTempDir("share-state"));
    EXPECT_TRUE(share.ok()) << share.status();
    if (!share.ok()) return;
    share_ = *std::move(share);
    EXPECT_TRUE(AwaitManifest(*share_).ok());
    service_ = std::make_unique<ShareService>(std::move(node_id), share_.get());
    server_ = std::make_unique<TestGrpcServer>(service_.get());
    EXPECT_TRUE(server_->started());
    service_->set_port(server_->port());
  }
  ~ShareMember() {
    server_.reset();
    service_.reset();
    share_.reset();
  }

  bool ok() const { return server_ != nullptr && server_->started(); }
  std::string address() const { return server_->address(); }
  ModelShare& share() { return *share_; }
  ShareService& service() { return *service_; }
  const GgufFile& file() const { return *file_; }
  const TensorManifest& manifest() { return **share_->Manifest(); }

 private:
  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<ModelShare> share_;
  std::unique_ptr<ShareService> service_;
  std::unique_ptr<TestGrpcServer> server_;
};

}  // namespace ringlm::testing

#endif  // RINGLM_DAEMON_MODEL_FETCH_TEST_SHARE_MEMBER_H_
