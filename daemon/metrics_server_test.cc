// MetricsServer on loopback: open without a token, 401 without the right
// bearer with one (the token file's rules: security/bearer_token_test.cc).
#include "daemon/metrics_server.h"

#include <httplib.h>

#include "gtest/gtest.h"

namespace ringlm {
namespace {

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Counter*> counter = registry_.AddCounter("ringlm_test_total", "a test counter");
    ASSERT_TRUE(counter.ok()) << counter.status();
    (*counter)->Increment(3);
  }

  // GET /metrics on `port` with `authorization` (none when empty): status
  // and body, or -1 when there is no answer.
  static std::pair<int, std::string> Get(uint16_t port, const std::string& authorization = "") {
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(5, 0);
    client.set_read_timeout(5, 0);
    httplib::Headers headers;
    if (!authorization.empty()) headers.emplace("Authorization", authorization);
    auto res = client.Get("/metrics", headers);
    if (!res) return {-1, ""};
    return {res->status, res->body};
  }

  std::function<std::string()> Render() {
    return [this] { return registry_.RenderPrometheusText(); };
  }

  MetricsRegistry registry_;
};

TEST_F(MetricsServerTest, WithoutATokenAnyLoopbackClientReads) {
  MetricsServer server(Render());
  ASSERT_TRUE(server.Start(kDefaultMetricsHost, 0).ok());
  auto [status, body] = Get(server.port());
  EXPECT_EQ(status, 200);
  EXPECT_NE(body.find("ringlm_test_total 3"), std::string::npos) << body;
}

TEST_F(MetricsServerTest, WithATokenOnlyTheRightBearerReads) {
  MetricsServer server(Render(), "s3cret-token");
  ASSERT_TRUE(server.Start(kDefaultMetricsHost, 0).ok());
  const uint16_t port = server.port();
  EXPECT_EQ(Get(port).first, 401);
  EXPECT_EQ(Get(port).second.find("ringlm_test_total"), std::string::npos);
  EXPECT_EQ(Get(port, "Bearer wrong-token!").first, 401);
  EXPECT_EQ(Get(port, "Bearer s3cret-toke").first, 401);    // a prefix
  EXPECT_EQ(Get(port, "Bearer s3cret-tokenX").first, 401);  // longer
  EXPECT_EQ(Get(port, "Basic s3cret-token").first, 401);
  EXPECT_EQ(Get(port, "s3cret-token").first, 401);
  auto [status, body] = Get(port, "Bearer s3cret-token");
  EXPECT_EQ(status, 200);
  EXPECT_NE(body.find("ringlm_test_total 3"), std::string::npos) << body;
  EXPECT_EQ(Get(port, "bearer s3cret-token").first, 200);  // the scheme in any case
}

TEST_F(MetricsServerTest, ABodyIsNotRead) {
  MetricsServer server(Render());
  ASSERT_TRUE(server.Start(kDefaultMetricsHost, 0).ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(5, 0);
  auto res = client.Post("/metrics", std::string(1 << 20, 'x'), "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
}

TEST_F(MetricsServerTest, TheDefaultHostIsLoopback) {
  EXPECT_STREQ(kDefaultMetricsHost, "127.0.0.1");
}

TEST_F(MetricsServerTest, ATakenPortIsAnError) {
  MetricsServer first(Render()), second(Render());
  ASSERT_TRUE(first.Start(kDefaultMetricsHost, 0).ok());
  absl::Status s = second.Start(kDefaultMetricsHost, first.port());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  // And it may start again elsewhere.
  EXPECT_TRUE(second.Start(kDefaultMetricsHost, 0).ok());
}

}  // namespace
}  // namespace ringlm
