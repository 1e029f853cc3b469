// The connection gate over real loopback sockets: deadlines, size limits and
// the connection bound, with raw clients that misbehave on purpose.
#include "api/http_connection_gate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace ringlm {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A raw TCP client to 127.0.0.1.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  bool Send(const std::string& data) {
    return ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  }
  // Everything until the server closes, or `timeout` passes.
  std::string ReadUntilClosed(milliseconds timeout = milliseconds(10000)) {
    std::string out;
    const Clock::time_point deadline = Clock::now() + timeout;
    char buf[4096];
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  bool closed() const { return closed_; }
  // Sends `data` a byte per `interval` until the server answers (or closes).
  void Trickle(const std::string& data, milliseconds interval) {
    for (char ch : data) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 0) > 0 || !Send(std::string(1, ch))) return;
      std::this_thread::sleep_for(interval);
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
};

class GateTest : public ::testing::Test {
 protected:
  void Start(ConnectionLimits limits) {
    server_ = std::make_unique<GatedHttpServer>(limits);
    server_->Get("/hi", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("hello", "text/plain");
    });
    server_->Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(std::to_string(req.body.size()), "text/plain");
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    for (int i = 0; i < 5000 && !server_->is_running(); ++i)
      std::this_thread::sleep_for(milliseconds(1));
  }
  void TearDown() override {
    if (server_) {
      for (int i = 0; i < 5000 && !server_->is_running(); ++i)
        std::this_thread::sleep_for(milliseconds(1));
      server_->stop();
    }
    if (thread_.joinable()) thread_.join();
  }
  bool WaitForOpen(int n) {
    for (int i = 0; i < 500; ++i) {
      if (server_->open_connections() == n) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }

  std::unique_ptr<GatedHttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

TEST_F(GateTest, ServesNormalAndPipelinedRequests) {
  Start({});
  RawClient c(port_);
  ASSERT_TRUE(c.connected());
  // Two requests in one write; the second asks to close.
  ASSERT_TRUE(
      c.Send("GET /hi HTTP/1.1\r\nHost: x\r\n\r\n"
             "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n"
             "\r\nabc"));
  const std::string out = c.ReadUntilClosed();
  EXPECT_TRUE(StartsWith(out, "HTTP/1.1 200")) << out;
  EXPECT_NE(out.find("hello"), std::string::npos) << out;
  const size_t second = out.find("HTTP/1.1 200", 1);
  ASSERT_NE(second, std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 1), "3") << out;
  EXPECT_TRUE(c.closed());
}

TEST_F(GateTest, SlowHeadersAreCutAtTheTotalDeadline) {
  ConnectionLimits limits;
  limits.header_timeout = milliseconds(600);
  Start(limits);
  RawClient c(port_);
  ASSERT_TRUE(c.connected());
  const Clock::time_point start = Clock::now();
  // One byte every 100 ms: each read is quick, the whole head never arrives.
  c.Trickle("GET /hi HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(40, 'a'), milliseconds(100));
  std::string got;
  got = c.ReadUntilClosed(milliseconds(5000));
  const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  EXPECT_TRUE(StartsWith(got, "HTTP/1.1 408")) << got;
  EXPECT_TRUE(c.closed());
  std::printf("slow head closed after %lld ms (deadline 600 ms)\n",
              static_cast<long long>(elapsed.count()));
  EXPECT_LT(elapsed.count(), 8000);
}

TEST_F(GateTest, IdleConnectionIsClosedSilently) {
  ConnectionLimits limits;
  limits.header_timeout = milliseconds(300);
  Start(limits);
  RawClient c(port_);
  ASSERT_TRUE(c.connected());
  EXPECT_EQ(c.ReadUntilClosed(milliseconds(5000)), "");
  EXPECT_TRUE(c.closed());
}

TEST_F(GateTest, ConnectionsPastTheBoundGet503AtOnce) {
  ConnectionLimits limits;
  limits.max_connections = 3;
  Start(limits);
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(idle.back()->connected());
  }
  ASSERT_TRUE(WaitForOpen(3));
  RawClient extra(port_);
  ASSERT_TRUE(extra.connected());
  const std::string out = extra.ReadUntilClosed();  // without sending anything
  EXPECT_TRUE(StartsWith(out, "HTTP/1.1 503")) << out;
  EXPECT_NE(out.find("server_overloaded"), std::string::npos) << out;
  EXPECT_TRUE(extra.closed());
  EXPECT_EQ(server_->refused_connections(), 1u);
  idle.clear();
  ASSERT_TRUE(WaitForOpen(0));
  httplib::Client client("127.0.0.1", port_);
  httplib::Result r = client.Get("/hi");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(GateTest, OversizedBodyIsRefusedFromContentLengthUnread) {
  ConnectionLimits limits;
  limits.max_body_bytes = 1000;
  Start(limits);
  RawClient c(port_);
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n"));
  const Clock::time_point start = Clock::now();
  const std::string out = c.ReadUntilClosed();
  EXPECT_TRUE(StartsWith(out, "HTTP/1.1 413")) << out;
  EXPECT_NE(out.find("request_too_large"), std::string::npos) << out;
  EXPECT_LT(Clock::now() - start, milliseconds(5000));  // not waiting for a GB
}

// A client that writes its whole body before reading (as most HTTP clients
// do) reads the 413: the body is read and dropped, not met with a reset.
TEST_F(GateTest, OversizedBodySentInFullStillGetsItsReadable413) {
  ConnectionLimits limits;
  limits.max_body_bytes = 1000;
  Start(limits);
  RawClient c(port_);
  const size_t kBody = 10 << 20;
  ASSERT_TRUE(c.Send(
      absl::StrCat("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: ", kBody, "\r\n\r\n")));
  // Blocks until the server has taken all of it (10 MB exceeds any socket buffer).
  ASSERT_TRUE(c.Send(std::string(kBody, 'x')));
  const std::string out = c.ReadUntilClosed();
  EXPECT_TRUE(StartsWith(out, "HTTP/1.1 413")) << out;
  EXPECT_NE(out.find("request_too_large"), std::string::npos) << out;
  EXPECT_TRUE(c.closed());
}

// The same through httplib's client, which fails on a broken pipe.
TEST_F(GateTest, OversizedBodyFromAnHttpClientGets413Json) {
  ConnectionLimits limits;
  limits.max_body_bytes = 1000;
  Start(limits);
  httplib::Client client("127.0.0.1", port_);
  httplib::Result r = client.Post("/echo", std::string(10 << 20, 'x'), "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 413);
  EXPECT_NE(r->body.find("request_too_large"), std::string::npos) << r->body;
}

TEST_F(GateTest, ChunkedBodyIsBoundedToo) {
  ConnectionLimits limits;
  limits.max_body_bytes = 1000;
  Start(limits);
  RawClient c(port_);
  std::string req = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  ASSERT_TRUE(c.Send(req));
  // 100 KB of 1 KB chunks: far past the limit plus framing.
  const std::string chunk = "400\r\n" + std::string(1024, 'a') + "\r\n";
  for (int i = 0; i < 100 && c.Send(chunk); ++i) {
  }
  const std::string out = c.ReadUntilClosed();
  EXPECT_TRUE(StartsWith(out, "HTTP/1.1 400")) << out;
}

TEST_F(GateTest, MalformedCompressedAndHugeHeadsAreRefused) {
  Start({});
  {
    RawClient c(port_);
    ASSERT_TRUE(
        c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: "
               "4\r\n\r\nabcd"));
    const std::string out = c.ReadUntilClosed();
    EXPECT_TRUE(StartsWith(out, "HTTP/1.1 415")) << out;
  }
  {
    RawClient c(port_);
    ASSERT_TRUE(
        c.Send("GET /hi HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(40 << 10, 'a') + "\r\n\r\n"));
    const std::string out = c.ReadUntilClosed();
    EXPECT_TRUE(StartsWith(out, "HTTP/1.1 431")) << out;
  }
  {
    RawClient c(port_);
    ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n"));
    EXPECT_TRUE(StartsWith(c.ReadUntilClosed(), "HTTP/1.1 400"));
  }
  {
    // Without a length httplib would read until the client closes.
    RawClient c(port_);
    ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\n\r\nabc"));
    EXPECT_TRUE(StartsWith(c.ReadUntilClosed(), "HTTP/1.1 411"));
  }
}

TEST_F(GateTest, BodiesInFlightAreBounded) {
  ConnectionLimits limits;
  limits.max_body_bytes = 1000;
  limits.max_body_bytes_in_flight = 1500;
  Start(limits);
  // The first body (1000 bytes, still arriving) holds its share...
  RawClient first(port_);
  ASSERT_TRUE(first.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab"));
  for (int i = 0; i < 500 && server_->body_bytes_in_flight() != 1000; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(server_->body_bytes_in_flight(), 1000u);
  // ...so a second one of 1000 would pass the bound: 503, unread.
  RawClient second(port_);
  ASSERT_TRUE(second.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"));
  const std::string out = second.ReadUntilClosed();
  EXPECT_TRUE(StartsWith(out, "HTTP/1.1 503")) << out;
  // A small one fits.
  httplib::Client client("127.0.0.1", port_);
  httplib::Result r = client.Post("/echo", std::string(400, 'x'), "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "400");
  // Once the first completes, its share is free again.
  ASSERT_TRUE(first.Send(std::string(998, 'c')));
  for (int i = 0; i < 500 && server_->body_bytes_in_flight() != 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  r = client.Post("/echo", std::string(1000, 'x'), "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "1000");
}

TEST_F(GateTest, SlowBodyIsCutAtTheBodyDeadline) {
  ConnectionLimits limits;
  limits.body_timeout = milliseconds(500);
  Start(limits);
  RawClient c(port_);
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"));
  const Clock::time_point start = Clock::now();
  c.Trickle(std::string(50, 'a'), milliseconds(100));  // would take 5 s
  std::string out;
  out = c.ReadUntilClosed(milliseconds(5000));
  EXPECT_TRUE(StartsWith(out, "HTTP/1.1 400")) << out;
  EXPECT_LT(Clock::now() - start, milliseconds(9000));
}

}  // namespace
}  // namespace ringlm
