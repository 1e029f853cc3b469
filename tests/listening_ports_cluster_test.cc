// A node's listening ports against those who hold no cluster key (issue
// 38, items 2 to 4; docs/security.md "Listening ports"), on one keyed
// ringlmd on loopback:
// - the gRPC port, flooded with 16 MiB messages by a TLS client without a
//   certificate, and held by connections that finish the TLS handshake (or
//   not even that) and then say nothing: the node refuses the messages
//   without buffering them, and closes the silent connections in seconds;
// - /metrics: on loopback unless --metrics-host says otherwise, and behind a
//   bearer token with --metrics-token-file.
#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "proto/ringlm.grpc.pb.h"
#include "security/cluster_key.h"
#include "security/tls_credentials.h"
#include "tests/daemon_harness.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using namespace std::chrono_literals;
using testing::LoopbackCluster;

constexpr size_t kFloodBytes = size_t{16} << 20;

// A /proc/<pid>/status field in MB (VmRSS, VmHWM), -1 if absent.
double StatusMb(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  }
  return -1;
}

// Resets the peak RSS of `pid` to its current RSS (Linux clear_refs 5);
// false where that is not allowed.
bool ResetPeakRss(pid_t pid) {
  std::ofstream out(absl::StrCat("/proc/", pid, "/clear_refs"));
  out << "5";
  out.flush();
  return out.good();
}

// The cluster CA, which an outsider may know: it is not secret.
std::string CaPem(const LoopbackCluster& cluster) {
  absl::StatusOr<ClusterKey> key = ClusterKey::LoadFile(cluster.key_file());
  if (!key.ok()) return "";
  absl::StatusOr<TlsIdentity> identity = MakeClientIdentity(*key);
  return identity.ok() ? identity->ca_pem : "";
}

// A channel of its own (its own TCP connection) to `address` over TLS that
// trusts the cluster CA but presents no certificate.
std::shared_ptr<grpc::Channel> NoCertificateChannel(const LoopbackCluster& cluster,
                                                    const std::string& address) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = CaPem(cluster);
  grpc::ChannelArguments args;
  AddChannelArgs(&args);
  args.SetMaxSendMessageSize(64 << 20);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(options), args);
}

// A StageStep that is well formed but for its 16 MiB of hidden state.
grpc::ByteBuffer HugeStageStep() {
  v1::StageStepRequest r;
  r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  r.set_request_id("flood");
  r.set_session_id("flood");
  r.set_origin("flood");
  r.set_stage_index(0);
  r.add_tokens(1);
  r.mutable_hidden()->set_dtype(v1::DTYPE_F32);
  r.mutable_hidden()->add_shape(1);
  r.mutable_hidden()->add_shape(64);
  r.mutable_hidden()->set_data(std::string(kFloodBytes, '\x7f'));
  const std::string bytes = r.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// 16 MiB of bytes that are not even a message.
grpc::ByteBuffer HugeJunk() {
  grpc::Slice slice(std::string(kFloodBytes, '\x01'));
  return grpc::ByteBuffer(&slice, 1);
}

struct FloodResult {
  int ok = 0;
  std::map<grpc::StatusCode, int> codes;
  double seconds = 0;
};

// Sends each (method, payload) at once, spread over `connections` TLS
// connections without a certificate, and waits for every answer.
FloodResult Flood(const LoopbackCluster& cluster,
                  const std::vector<std::pair<std::string, const grpc::ByteBuffer*>>& calls,
                  int connections) {
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  for (int i = 0; i < connections; ++i) {
    stubs.push_back(
        std::make_unique<grpc::GenericStub>(NoCertificateChannel(cluster, cluster.Address(0))));
  }
  absl::Mutex mu;
  FloodResult result;
  int pending = static_cast<int>(calls.size());
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ByteBuffer>> replies;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < calls.size(); ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(std::chrono::system_clock::now() + 30s);
    replies.push_back(std::make_unique<grpc::ByteBuffer>());
    stubs[i % stubs.size()]->UnaryCall(contexts.back().get(), calls[i].first, grpc::StubOptions(),
                                       calls[i].second, replies.back().get(), [&](grpc::Status s) {
                                         absl::MutexLock lock(&mu);
                                         ++result.codes[s.error_code()];
                                         if (s.ok()) ++result.ok;
                                         --pending;
                                       });
  }
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &pending));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string Codes(const FloodResult& r) {
  std::string out;
  for (const auto& [code, n] : r.codes) absl::StrAppend(&out, " code ", code, " x", n);
  return out;
}

class GrpcPortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoopbackCluster::Options options;
    options.memory_mb = {4000};
    cluster_ = std::make_unique<LoopbackCluster>(options);
    ASSERT_TRUE(testing::WaitFor([&] { return cluster_->AllFormed(); }, 30s)) << cluster_->Logs();
    pid_ = cluster_->node(0).pid();
    grpc_port_ = static_cast<uint16_t>(
        std::stoi(cluster_->Address(0).substr(cluster_->Address(0).rfind(':') + 1)));
  }

  std::unique_ptr<LoopbackCluster> cluster_;
  pid_t pid_ = 0;
  uint16_t grpc_port_ = 0;
};

TEST_F(GrpcPortTest, HugeMessagesFromAClientWithoutACertificateAreNotBuffered) {
  const grpc::ByteBuffer step = HugeStageStep(), junk = HugeJunk();
  const double rss_before = StatusMb(pid_, "VmRSS");
  const bool reset = ResetPeakRss(pid_);
  const double peak_before = reset ? StatusMb(pid_, "VmHWM") : rss_before;
  // 32 StageStep calls at once, as in issue 38, over 4 connections.
  std::vector<std::pair<std::string, const grpc::ByteBuffer*>> calls;
  for (int i = 0; i < 32; ++i) calls.emplace_back("/ringlm.v1.RingNode/StageStep", &step);
  FloodResult steps = Flood(*cluster_, calls, 4);
  const double peak_steps = StatusMb(pid_, "VmHWM");
  std::printf(
      "32 x 16 MiB StageStep without a certificate: %.2f s,%s; node RSS %.1f MB before, peak "
      "%.1f MB before, %.1f MB after (peak reset: %s)\n",
      steps.seconds, Codes(steps).c_str(), rss_before, peak_before, peak_steps,
      reset ? "yes" : "no");
  EXPECT_EQ(steps.ok, 0);
  EXPECT_LT(peak_steps - peak_before, 50.0);

  // Every other method too, the model's among them, and on one connection.
  calls.clear();
  for (const char* method : {"GetModel", "FetchTensor", "Generate", "DeliverToken", "Health",
                             "Topology", "Cancel", "DropSession", "AdoptPrefix"}) {
    for (int i = 0; i < 4; ++i) {
      calls.emplace_back(absl::StrCat("/ringlm.v1.RingNode/", method), &junk);
    }
  }
  FloodResult others = Flood(*cluster_, calls, 1);
  const double peak_others = StatusMb(pid_, "VmHWM");
  std::printf("%zu x 16 MiB to 9 other methods: %.2f s,%s; node peak %.1f MB\n", calls.size(),
              others.seconds, Codes(others).c_str(), peak_others);
  EXPECT_EQ(others.ok, 0);
  EXPECT_LT(peak_others - peak_before, 50.0);
  EXPECT_TRUE(cluster_->AllFormed()) << cluster_->Logs();
}

// A TCP connection to 127.0.0.1:port, non-blocking; -1 on failure.
int Connect(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Completes a TLS handshake (ALPN h2, as a gRPC client offers) on `fd` and
// then sends nothing more: no HTTP/2 preface. False if the handshake fails.
bool HandshakeOnly(SSL_CTX* ctx, int fd) {
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  const bool ok = SSL_connect(ssl) == 1;
  // Dropped without close_notify; the socket stays open.
  SSL_free(ssl);
  return ok;
}

// Waits until the peer has closed every fd (read gives EOF or an error),
// reading and discarding whatever the server sends (its TLS records and
// HTTP/2 settings). Returns the seconds it took, or `limit` if some stay.
double WaitAllClosed(std::vector<int>& fds, std::chrono::seconds limit, int* still_open) {
  for (int fd : fds) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  const auto start = std::chrono::steady_clock::now();
  std::vector<bool> closed(fds.size(), false);
  size_t n_closed = 0;
  while (n_closed < fds.size() && std::chrono::steady_clock::now() - start < limit) {
    std::vector<pollfd> polls;
    std::vector<size_t> index;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!closed[i]) {
        polls.push_back({fds[i], POLLIN, 0});
        index.push_back(i);
      }
    }
    if (poll(polls.data(), polls.size(), 100) <= 0) continue;
    for (size_t k = 0; k < polls.size(); ++k) {
      if (polls[k].revents == 0) continue;
      char buf[4096];
      const ssize_t n = recv(polls[k].fd, buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        closed[index[k]] = true;
        ++n_closed;
      }
    }
  }
  *still_open = static_cast<int>(fds.size() - n_closed);
  for (int fd : fds) close(fd);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST_F(GrpcPortTest, HalfOpenTlsConnectionsAreClosedWithinSeconds) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  ASSERT_NE(ctx, nullptr);
  static const unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx, kAlpn, sizeof(kAlpn));
  std::vector<int> fds;
  int handshakes = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    const int fd = Connect(grpc_port_);
    if (fd < 0) continue;
    if (HandshakeOnly(ctx, fd)) ++handshakes;
    fds.push_back(fd);
  }
  SSL_CTX_free(ctx);
  const double opening =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(handshakes, 100) << "the TLS handshake itself must succeed";
  int still_open = 0;
  const double seconds = WaitAllClosed(fds, 20s, &still_open) + opening;
  std::printf(
      "100 half-open TLS connections (opened in %.2f s): %d still open, all closed after %.2f s\n",
      opening, still_open, seconds);
  EXPECT_EQ(still_open, 0);
  EXPECT_LE(seconds, 10.0);
  EXPECT_TRUE(cluster_->AllFormed()) << cluster_->Logs();
}

TEST_F(GrpcPortTest, TcpConnectionsThatNeverStartTlsAreClosedWithinSeconds) {
  std::vector<int> fds;
  for (int i = 0; i < 20; ++i) {
    const int fd = Connect(grpc_port_);
    if (fd >= 0) fds.push_back(fd);
  }
  ASSERT_EQ(fds.size(), 20u);
  int still_open = 0;
  const double seconds = WaitAllClosed(fds, 20s, &still_open);
  std::printf("20 silent TCP connections: %d still open, all closed after %.2f s\n", still_open,
              seconds);
  EXPECT_EQ(still_open, 0);
  EXPECT_LE(seconds, 10.0);
}

// The IPv4 addresses (hex, as /proc/net/tcp writes them: 127.0.0.1 is
// "0100007F") on which `pid` listens at TCP `port`.
std::vector<std::string> ListeningAddresses(pid_t pid, uint16_t port) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/net/tcp"));
  std::string line;
  std::vector<std::string> found;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 4 || f[3] != "0A") continue;  // LISTEN
    std::vector<std::string> local = absl::StrSplit(f[1], ':');
    if (local.size() == 2 && std::stoul(local[1], nullptr, 16) == port) found.push_back(local[0]);
  }
  return found;
}

// GET /metrics at host:port with `authorization` (none when empty); the
// status, or -1 when nothing answers.
int MetricsStatus(const std::string& host, uint16_t port, const std::string& authorization = "") {
  httplib::Client client(host, port);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  httplib::Headers headers;
  if (!authorization.empty()) headers.emplace("Authorization", authorization);
  auto res = client.Get("/metrics", headers);
  return res ? res->status : -1;
}

// One keyed ringlmd whose gRPC server binds 127.0.0.2 (still loopback, but
// not the address /metrics binds by default), with `extra` flags.
class MetricsPortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("metrics-port");
    absl::StatusOr<ClusterKey> key = ClusterKey::Generate();
    ASSERT_TRUE(key.ok());
    ASSERT_TRUE(key->WriteFile(dir_ + "/cluster.key", false).ok());
    metrics_port_ = testing::FreeTcpPort();
  }

  absl::StatusOr<std::unique_ptr<testing::ChildProcess>> StartNode(
      const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {testing::RinglmdPath(),
                                     "--model",
                                     testing::ModelPath("stories260K-f32.gguf"),
                                     "--cluster-key",
                                     dir_ + "/cluster.key",
                                     "--grpc-host",
                                     "127.0.0.2",
                                     "--grpc-port",
                                     std::to_string(testing::FreeTcpPort()),
                                     "--metrics-port",
                                     std::to_string(metrics_port_),
                                     "--discovery-port",
                                     std::to_string(testing::FreeUdpPort()),
                                     "--loopback-only",
                                     "--memory-mb",
                                     "2000",
                                     "--threads",
                                     "1",
                                     "--state-dir",
                                     dir_ + "/state"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return testing::ChildProcess::Start(argv, dir_ + "/node.log");
  }

  // Writes `token` to a file with `mode`.
  std::string TokenFile(const std::string& token, mode_t mode) {
    const std::string path = dir_ + "/metrics.token";
    std::ofstream(path) << token;
    chmod(path.c_str(), mode);
    return path;
  }

  std::string dir_;
  uint16_t metrics_port_ = 0;
};

TEST_F(MetricsPortTest, MetricsListenOnLoopbackOnlyByDefault) {
  auto node = StartNode({});
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_TRUE(
      testing::WaitFor([&] { return MetricsStatus("127.0.0.1", metrics_port_) == 200; }, 30s))
      << (*node)->Log();
  EXPECT_EQ(ListeningAddresses((*node)->pid(), metrics_port_),
            std::vector<std::string>{"0100007F"});
  // Not on the gRPC host, as before issue 38.
  EXPECT_EQ(MetricsStatus("127.0.0.2", metrics_port_), -1);
}

TEST_F(MetricsPortTest, WithATokenFileMetricsNeedTheToken) {
  const std::string token = "4f1c2a9e0b7d36a5c8e2f1d0b9a87c6e";
  auto node = StartNode(
      {"--metrics-host", "127.0.0.2", "--metrics-token-file", TokenFile(token + "\n", 0600)});
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_TRUE(testing::WaitFor(
      [&] { return MetricsStatus("127.0.0.2", metrics_port_, "Bearer " + token) == 200; }, 30s))
      << (*node)->Log();
  EXPECT_EQ(ListeningAddresses((*node)->pid(), metrics_port_),
            std::vector<std::string>{"0200007F"});
  EXPECT_EQ(MetricsStatus("127.0.0.2", metrics_port_), 401);
  EXPECT_EQ(MetricsStatus("127.0.0.2", metrics_port_, "Bearer " + token + "0"), 401);
  EXPECT_EQ(MetricsStatus("127.0.0.1", metrics_port_, "Bearer " + token), -1);
}

TEST_F(MetricsPortTest, AReadableOrEmptyTokenFileIsRefusedAtStart) {
  for (const auto& [contents, mode, says] :
       {std::tuple<std::string, mode_t, std::string>{"secret", 0644, "chmod 600"},
        {"\n", 0600, "is empty"}}) {
    auto node = StartNode({"--metrics-token-file", TokenFile(contents, mode)});
    ASSERT_TRUE(node.ok()) << node.status();
    EXPECT_TRUE((*node)->Wait(10s)) << "it must refuse to start";
    EXPECT_NE((*node)->Log().find(says), std::string::npos) << (*node)->Log();
  }
}

}  // namespace
}  // namespace ringlm
