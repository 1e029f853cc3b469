// The head's memory under prompts too large for the model's context, on a
// real ringlmd (issue 38): each is refused with 400 context_length_exceeded
// before it is tokenized, so a flood of them costs the head little, and a
// body over the limit gets a 413 the client can read.
#include <httplib.h>
#include <sys/types.h>

#include <csignal>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon_harness.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::LoopbackCluster;

constexpr uint64_t kMiB = 1 << 20;

// A field of /proc/<pid>/status in KiB ("VmHWM", "VmRSS"), as bytes; 0 when
// it cannot be read.
uint64_t ProcStatusBytes(pid_t pid, const std::string& field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::string value = line.substr(field.size() + 1);
    value = value.substr(0, value.find("kB"));
    uint64_t kib = 0;
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t") + 1);
    return absl::SimpleAtoi(value, &kib) ? kib * 1024 : 0;
  }
  return 0;
}

// One node that is also the head, with stories260K's own context (128).
class ApiMemoryClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A server that closes on a body it will not read is a failed request
    // here, not a SIGPIPE that ends the test.
    std::signal(SIGPIPE, SIG_IGN);
    LoopbackCluster::Options o;
    o.api = true;
    o.memory_mb = {4000};
    cluster_ = std::make_unique<LoopbackCluster>(o);
    ASSERT_TRUE(testing::WaitFor([&] { return cluster_->AllFormed(); }, 30s)) << cluster_->Logs();
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          httplib::Client c("127.0.0.1", cluster_->api_port());
          httplib::Result r = c.Get("/health");
          return r && r->status == 200;
        },
        30s))
        << cluster_->Logs();
  }

  std::unique_ptr<httplib::Client> Client() const {
    auto client = std::make_unique<httplib::Client>("127.0.0.1", cluster_->api_port());
    client->set_connection_timeout(10s);
    client->set_read_timeout(60s);
    client->set_write_timeout(60s);
    return client;
  }

  std::unique_ptr<LoopbackCluster> cluster_;
};

TEST_F(ApiMemoryClusterTest, PromptsTooLongForTheContextAreRefusedWithoutGrowingTheHead) {
  const pid_t head = cluster_->node(0).pid();
  // One ordinary request first, so that what it sets up is in the baseline.
  httplib::Result warm = Client()->Post(
      "/v1/chat/completions",
      json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4}}.dump(),
      "application/json");
  ASSERT_TRUE(warm) << httplib::to_string(warm.error());
  ASSERT_EQ(warm->status, 200) << warm->body;
  const uint64_t peak_before = ProcStatusBytes(head, "VmHWM");
  ASSERT_GT(peak_before, 0u);

  // 8 at once, chat and text, each ~4 MB of prompt in a body under the 4 MiB
  // limit: millions of tokens, were they tokenized.
  constexpr int kRequests = 8;
  std::string text;
  while (text.size() < 4'000'000) text += "Once upon a time there was a cat. ";
  text.resize(4'000'000);
  std::vector<std::string> paths;
  std::vector<std::string> bodies;
  for (int i = 0; i < kRequests; ++i) {
    if (i % 2 == 0) {
      paths.push_back("/v1/chat/completions");
      bodies.push_back(json{{"messages", {{{"role", "user"}, {"content", text}}}}}.dump());
    } else {
      paths.push_back("/v1/completions");
      bodies.push_back(json{{"prompt", text}}.dump());
    }
  }
  std::vector<int> statuses(kRequests, -1);
  std::vector<std::string> answers(kRequests);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      httplib::Result r = Client()->Post(paths[i].c_str(), bodies[i], "application/json");
      if (!r) return;
      statuses[i] = r->status;
      answers[i] = r->body;
    });
  }
  for (std::thread& t : threads) t.join();

  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(statuses[i], 400) << paths[i] << ": " << answers[i].substr(0, 300);
    const json error = json::parse(answers[i], nullptr, false);
    ASSERT_TRUE(error.contains("error")) << answers[i].substr(0, 300);
    EXPECT_EQ(error["error"]["code"], "context_length_exceeded") << answers[i];
  }
  const uint64_t peak_after = ProcStatusBytes(head, "VmHWM");
  const uint64_t rss_after = ProcStatusBytes(head, "VmRSS");
  std::cout << "head VmHWM " << peak_before / kMiB << " MiB before, " << peak_after / kMiB
            << " MiB after; VmRSS after " << rss_after / kMiB << " MiB\n";
  EXPECT_LT(peak_after - peak_before, 100 * kMiB)
      << "head peak RSS grew from " << peak_before / kMiB << " to " << peak_after / kMiB << " MiB";
  // The head still serves.
  httplib::Result after = Client()->Post(
      "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 4}}.dump(),
      "application/json");
  ASSERT_TRUE(after) << httplib::to_string(after.error());
  EXPECT_EQ(after->status, 200) << after->body;
}

// A client that sends a 10 MB body before it reads reads the 413's JSON, not
// a broken pipe.
TEST_F(ApiMemoryClusterTest, OversizedBodyGetsAReadable413) {
  httplib::Result r = Client()->Post(
      "/v1/completions", json{{"prompt", std::string(10'000'000, 'x')}}.dump(), "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 413) << r->body;
  const json error = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(error.contains("error")) << r->body;
  EXPECT_EQ(error["error"]["code"], "request_too_large") << r->body;
}

}  // namespace
}  // namespace ringlm
