// More than one head: a 3-node keyed loopback cluster where nodes 0 and 1
// both serve the HTTP API (--api-port on each), on a random-weight model
// that seldom stops. Checks that `ringlm status` lists both heads, that the
// same greedy request gives the same reply from either head, that a client
// whose head is killed mid-stream gets the undisturbed reply by retrying on
// the other head, and that HAProxy with deploy/haproxy.cfg keeps serving
// once its health checks mark a killed head down (skipped without
// /usr/sbin/haproxy).
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon_harness.h"
#include "tests/loopback_cluster.h"

namespace ringlm {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::LoopbackCluster;

// Long enough that a kill lands mid-stream, short enough for CI.
constexpr int kStreamTokens = 1500;
constexpr char kHaproxy[] = "/usr/sbin/haproxy";

constexpr char kPrompt[] = "Once upon a time";

// The request every test sends: greedy, streamed, with its usage at the end.
std::string RequestBody(int max_tokens, const std::string& prompt = kPrompt) {
  return json{{"prompt", prompt},
              {"max_tokens", max_tokens},
              {"temperature", 0},
              {"stream", true},
              {"stream_options", {{"include_usage", true}}}}
      .dump();
}

// A streamed /v1/completions reply, from the complete SSE events of `raw`.
struct Completion {
  int status = 0;  // 0: no HTTP answer
  std::string text;
  std::string finish_reason;
  int chunks = 0;          // events with text
  bool done = false;       // "data: [DONE]" arrived
  int cached_tokens = -1;  // from the usage event; -1 without one
  int prompt_tokens = -1;
};

Completion ParseSse(const std::string& raw) {
  Completion c;
  size_t pos = 0;
  while ((pos = raw.find("data: ", pos)) != std::string::npos) {
    const size_t end = raw.find("\n\n", pos);
    if (end == std::string::npos) break;  // an event cut short
    const std::string payload = raw.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") {
      c.done = true;
      break;
    }
    const json chunk = json::parse(payload, nullptr, false);
    if (chunk.is_object() && chunk.contains("usage") && chunk["usage"].is_object()) {
      c.cached_tokens = chunk["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
      c.prompt_tokens = chunk["usage"]["prompt_tokens"].get<int>();
    }
    if (!chunk.is_object() || !chunk.contains("choices") || chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    if (choice.contains("text") && choice["text"].is_string() && choice["text"] != "") {
      c.text += choice["text"].get<std::string>();
      ++c.chunks;
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
      c.finish_reason = choice["finish_reason"];
    }
  }
  return c;
}

// POST /v1/completions on 127.0.0.1:`port`, read to the end (120 s at most).
Completion Complete(uint16_t port, int max_tokens, const std::string& prompt = kPrompt) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(120, 0);
  auto res = client.Post("/v1/completions", RequestBody(max_tokens, prompt), "application/json");
  if (!res) return {};
  Completion c = ParseSse(res->body);
  c.status = res->status;
  return c;
}

// GET `path` on 127.0.0.1:`port`: the status (0 without an answer) and body.
std::pair<int, std::string> Get(uint16_t port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  client.set_url_encode(false);  // "/stats;csv" as it is
  auto res = client.Get(path.c_str());
  if (!res) return {0, ""};
  return {res->status, res->body};
}

// A streamed request on a raw socket, so that the test can act between two
// reads: the head can be killed while the reply is coming in.
class RawStream {
 public:
  explicit RawStream(uint16_t port, const std::string& prompt = kPrompt) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval timeout{30, 0};  // no read blocks longer
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const std::string body = RequestBody(kStreamTokens, prompt);
    const std::string request = absl::StrCat(
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: ",
        body.size(), "\r\n\r\n", body);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
          ::send(fd_, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size());
  }
  ~RawStream() { ::close(fd_); }
  RawStream(const RawStream&) = delete;
  RawStream& operator=(const RawStream&) = delete;

  // Reads until `chunks` text events arrived; false when the stream ended
  // (or failed) first.
  bool ReadUntil(int chunks) {
    while (ok_ && ParseSse(raw_).chunks < chunks) ok_ = ReadSome();
    return ok_;
  }
  // Reads until the connection ends.
  void ReadToEnd() {
    while (ok_) ok_ = ReadSome();
  }
  Completion received() const { return ParseSse(raw_); }

 private:
  bool ReadSome() {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    raw_.append(buf, n);
    return true;
  }

  int fd_ = -1;
  bool ok_ = false;
  std::string raw_;  // headers and chunked SSE, as they came
};

// `ringlm status` against node 2 (no head) lists nodes 0 and 1 as the heads,
// at their API ports.
void ExpectStatusListsTheHeads(LoopbackCluster& cluster) {
  const json status = cluster.Status(2);  // a node that is no head
  ASSERT_TRUE(status.is_object()) << cluster.Logs();
  std::map<std::string, std::string> heads;
  for (const json& h : status["heads"]) heads[h["node_id"]] = h["api_address"];
  std::map<std::string, std::string> expected;
  for (size_t i : {0, 1}) {
    const json own = cluster.Status(i);
    ASSERT_TRUE(own.is_object());
    expected[own["node_id"]] = absl::StrCat("127.0.0.1:", cluster.api_port(i));
  }
  EXPECT_EQ(heads, expected) << status.dump(2);
  for (const json& n : status["nodes"]) {
    if (expected.count(n["node_id"]) == 0) {
      EXPECT_TRUE(n["api_address"].is_null()) << n.dump();
    }
  }
}

// Options for three nodes on a random-weight model written to a new folder
// named after `name` (it seldom stops, so a reply runs to max_tokens): node 0
// and `more_heads` serve the API, and health calls run every 500 ms, for
// fast failure detection on loopback.
void TinyModelHeads(const std::string& name, std::vector<size_t> more_heads,
                    LoopbackCluster::Options* options) {
  options->model = testing::MakeTempDir(name) + "/tiny.gguf";
  testing::CommandResult synth = testing::RunCommand(
      absl::StrCat(testing::RinglmPath(), " synth --preset tiny --type f32 --out ", options->model),
      false);
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  options->api = true;
  options->api_nodes = std::move(more_heads);
  options->extra_args = {"--ctx-size", "4096", "--announce-interval-ms", "500"};
}

// Three nodes on the tiny random-weight model; nodes 0 and 1 are heads. Node 0
// holds the most layers.
class HeadsClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoopbackCluster::Options options;
    TinyModelHeads("ringlm-heads", {1}, &options);
    if (HasFatalFailure()) return;
    cluster_ = std::make_unique<LoopbackCluster>(options);
    ASSERT_TRUE(testing::WaitFor([&] { return cluster_->AllFormed(); }, 30s)) << cluster_->Logs();
    for (size_t head : {0, 1}) {
      ASSERT_TRUE(testing::WaitFor(
          [&] { return Get(cluster_->api_port(head), "/health").first == 200; }, 30s))
          << "head " << head << "\n"
          << cluster_->Logs();
    }
  }

  // The reply of `head` once it serves again: retries while it answers
  // 503 (its cluster re-plans), for 30 s at most.
  Completion CompleteWhenServing(uint16_t port, int max_tokens) {
    Completion c;
    testing::WaitFor(
        [&] {
          c = Complete(port, max_tokens);
          return c.status != 503;
        },
        30s);
    return c;
  }

  std::unique_ptr<LoopbackCluster> cluster_;
};

TEST_F(HeadsClusterTest, EitherHeadGivesTheSameReplyAndARetryAfterAKillTheUndisturbedOne) {
  ExpectStatusListsTheHeads(*cluster_);

  // (a) The same greedy request to each head: the same reply.
  const Completion reference = Complete(cluster_->api_port(0), kStreamTokens);
  ASSERT_EQ(reference.status, 200) << cluster_->Logs();
  ASSERT_TRUE(reference.done);
  EXPECT_EQ(reference.finish_reason, "length") << "the model stopped early: no stream to cut";
  const Completion other = Complete(cluster_->api_port(1), kStreamTokens);
  ASSERT_EQ(other.status, 200) << cluster_->Logs();
  EXPECT_TRUE(other.done);
  EXPECT_EQ(other.text, reference.text);
  EXPECT_EQ(other.finish_reason, reference.finish_reason);

  // (b) Head 0 killed mid-stream: its client's reply is cut short...
  RawStream stream(cluster_->api_port(0));
  ASSERT_TRUE(stream.ReadUntil(50)) << "the stream ended before 50 chunks\n" << cluster_->Logs();
  ASSERT_FALSE(stream.received().done);
  cluster_->KillNode(0);
  stream.ReadToEnd();
  const Completion cut = stream.received();
  std::printf("head 0 killed after %d chunks; its client got %d, and no [DONE]\n", 50, cut.chunks);
  EXPECT_FALSE(cut.done);
  EXPECT_LT(cut.text.size(), reference.text.size());
  EXPECT_EQ(reference.text.substr(0, cut.text.size()), cut.text);

  // ...and the same request retried on head 1 gives the undisturbed reply
  // (once the cluster re-planned without node 0's layers).
  const auto killed = std::chrono::steady_clock::now();
  const Completion retry = CompleteWhenServing(cluster_->api_port(1), kStreamTokens);
  std::printf("retry on head 1 answered %.2f s after the kill\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count());
  ASSERT_EQ(retry.status, 200) << cluster_->Logs();
  EXPECT_TRUE(retry.done);
  EXPECT_EQ(retry.text, reference.text);
  EXPECT_EQ(retry.finish_reason, reference.finish_reason);
}

// Node 2 serves the API but offers 1 MiB, too little for a layer: it holds
// none. Its death leaves the plan as it was, and the stages still hold its
// conversations, which the other head adopts by digest (AdoptPrefix).
class IdleHeadClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoopbackCluster::Options options;
    TinyModelHeads("ringlm-idle-head", {2}, &options);
    if (HasFatalFailure()) return;
    options.memory_mb = {4000, 2000, 1};
    cluster_ = std::make_unique<LoopbackCluster>(options);
    // Three nodes, and a plan over nodes 0 and 1, which are ready; node 2
    // is idle.
    auto formed = [&] {
      const json status = cluster_->Status(0);
      if (!status.is_object() || status["nodes"].size() != 3) return false;
      int ready = 0;
      int idle = 0;
      for (const json& n : status["nodes"]) {
        ready += n["state"] == "ready" ? 1 : 0;
        idle += n["state"] == "idle" ? 1 : 0;
      }
      return ready == 2 && idle == 1 && status["plan"]["stages"].size() == 2;
    };
    ASSERT_TRUE(testing::WaitFor(formed, 30s)) << cluster_->Logs();
    for (size_t head : {0, 2}) {
      ASSERT_TRUE(testing::WaitFor(
          [&] { return Get(cluster_->api_port(head), "/health").first == 200; }, 30s))
          << "head " << head << "\n"
          << cluster_->Logs();
    }
  }

  // True once no stage holds a session busy with a step.
  bool StagesIdle() {
    const json status = cluster_->Status(0);
    if (!status.is_object()) return false;
    for (const json& n : status["nodes"]) {
      if (n.contains("cache") && n["cache"]["busy_sessions"] != 0) return false;
    }
    return true;
  }

  std::unique_ptr<LoopbackCluster> cluster_;
};

TEST_F(IdleHeadClusterTest, ARetryOnTheOtherHeadGetsTheSameReplyFromTheStagesKv) {
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her friends, and every day she brought a red ball.";
  // The reply, from the head that will die; nothing of it is cached yet.
  const Completion reference = Complete(cluster_->api_port(2), kStreamTokens, prompt);
  ASSERT_EQ(reference.status, 200) << cluster_->Logs();
  ASSERT_TRUE(reference.done);
  EXPECT_EQ(reference.cached_tokens, 0);

  // The same request on that head again, cut by its death mid-stream.
  RawStream stream(cluster_->api_port(2), prompt);
  ASSERT_TRUE(stream.ReadUntil(50)) << "the stream ended before 50 chunks\n" << cluster_->Logs();
  cluster_->KillNode(2);
  stream.ReadToEnd();
  const Completion cut = stream.received();
  EXPECT_FALSE(cut.done);
  EXPECT_EQ(reference.text.substr(0, cut.text.size()), cut.text);

  // The stages stop the dead head's request at its next delivery. A retry
  // that came while its last step still ran would find the session busy
  // and start cold: still the same reply, but with nothing cached.
  ASSERT_TRUE(testing::WaitFor([&] { return StagesIdle(); }, 10s)) << cluster_->Logs();
  const auto killed = std::chrono::steady_clock::now();
  const Completion retry = Complete(cluster_->api_port(0), kStreamTokens, prompt);
  std::printf(
      "retry on head 0: %d of %d prompt tokens cached, answered %.2f s after the stages went "
      "idle\n",
      retry.cached_tokens, retry.prompt_tokens,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count());
  ASSERT_EQ(retry.status, 200) << cluster_->Logs();
  EXPECT_TRUE(retry.done);
  EXPECT_EQ(retry.text, reference.text);
  EXPECT_EQ(retry.finish_reason, reference.finish_reason);
  // All but the last prompt token: the stages held the whole prompt.
  EXPECT_GT(retry.cached_tokens, 0) << cluster_->Logs();
  EXPECT_EQ(retry.cached_tokens, retry.prompt_tokens - 1);
}

// HAProxy's view of a server in `backend` from its stats CSV: "UP", "DOWN",
// ... or "" when the stats page does not answer.
std::string ServerStatus(uint16_t stats_port, const std::string& server) {
  auto [code, csv] = Get(stats_port, "/stats;csv");
  if (code != 200) return "";
  std::vector<std::string> lines = absl::StrSplit(csv, '\n');
  if (lines.empty()) return "";
  std::vector<std::string> header = absl::StrSplit(lines[0], ',');  // "# pxname,svname,..."
  size_t status_column = 0;
  while (status_column < header.size() && header[status_column] != "status") ++status_column;
  for (const std::string& line : lines) {
    std::vector<std::string> f = absl::StrSplit(line, ',');
    if (f.size() > status_column && f[0] == "ringlm_heads" && f[1] == server) {
      return f[status_column];
    }
  }
  return "";
}

TEST_F(HeadsClusterTest, HaproxyWithTheShippedConfigServesOnceAHeadIsDown) {
  if (::access(kHaproxy, X_OK) != 0) {
    GTEST_SKIP() << kHaproxy << " is not installed (deploy/install-deps.sh --test-tools)";
  }
  const uint16_t lb_port = testing::FreeTcpPort();
  const uint16_t stats_port = testing::FreeTcpPort();
  const std::string config = std::string(RINGLM_SOURCE_DIR) + "/deploy/haproxy.cfg";
  auto haproxy = testing::ChildProcess::Start(
      {"/usr/bin/env", absl::StrCat("RINGLM_LB_BIND=127.0.0.1:", lb_port),
       absl::StrCat("RINGLM_LB_STATS=127.0.0.1:", stats_port),
       absl::StrCat("RINGLM_HEAD1=127.0.0.1:", cluster_->api_port(0)),
       absl::StrCat("RINGLM_HEAD2=127.0.0.1:", cluster_->api_port(1)), kHaproxy, "-db", "-f",
       config},
      cluster_->dir() + "/haproxy.log");
  ASSERT_TRUE(haproxy.ok()) << haproxy.status();
  auto both_up = [&] {
    return ServerStatus(stats_port, "head1") == "UP" && ServerStatus(stats_port, "head2") == "UP";
  };
  ASSERT_TRUE(testing::WaitFor(both_up, 30s)) << (*haproxy)->Log();
  ASSERT_TRUE(testing::WaitFor([&] { return Get(lb_port, "/health").first == 200; }, 30s))
      << (*haproxy)->Log();

  constexpr int kTokens = 64;
  const Completion direct = Complete(cluster_->api_port(1), kTokens);
  ASSERT_EQ(direct.status, 200) << cluster_->Logs();
  for (int i = 0; i < 4; ++i) {
    const Completion through = Complete(lb_port, kTokens);
    ASSERT_EQ(through.status, 200) << (*haproxy)->Log() << cluster_->Logs();
    EXPECT_TRUE(through.done);
    EXPECT_EQ(through.text, direct.text);
  }

  // Head 0 dies: its health checks fail, HAProxy marks it down, and the
  // frontend serves from head 1 once that head's cluster re-planned.
  cluster_->KillNode(0);
  ASSERT_TRUE(testing::WaitFor([&] { return ServerStatus(stats_port, "head1") == "DOWN"; }, 30s))
      << (*haproxy)->Log();
  ASSERT_TRUE(testing::WaitFor([&] { return Get(lb_port, "/health").first == 200; }, 30s))
      << (*haproxy)->Log() << cluster_->Logs();
  for (int i = 0; i < 4; ++i) {
    const Completion through = Complete(lb_port, kTokens);
    ASSERT_EQ(through.status, 200) << (*haproxy)->Log() << cluster_->Logs();
    EXPECT_TRUE(through.done);
    EXPECT_EQ(through.text, direct.text);
  }
  (*haproxy)->Signal(SIGTERM);
  EXPECT_TRUE((*haproxy)->Wait(10s));
}

}  // namespace
}  // namespace ringlm
