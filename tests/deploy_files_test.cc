// The files of deploy/ as an operator uses them:
//  - ringlmd.service parses as a systemd unit with the keys the docs promise,
//    and `systemd-analyze verify` accepts it where systemd is installed;
//  - local-cluster.sh starts a 3-node loopback cluster from the built binaries
//    that streams a chat completion, refuses to start over it, and `stop`
//    leaves no daemon behind;
//  - compose.yaml and the Dockerfile (Docker cannot run here) have the
//    expected shape.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"

#ifndef RINGLM_SOURCE_DIR
#define RINGLM_SOURCE_DIR RINGLM_BINARY_DIR "/.."
#endif

namespace ringlm {
namespace {

using namespace std::chrono_literals;
using testing::RunCommand;
using testing::ShellQuote;

std::string SourcePath(const std::string& relative) {
  return std::string(RINGLM_SOURCE_DIR) + "/" + relative;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// A systemd unit: section -> key -> every value the key was given, in order.
using Unit = std::map<std::string, std::map<std::string, std::vector<std::string>>>;

// Parses systemd's INI dialect: [Section] headers, Key=Value lines, '#' and
// ';' comments, trailing-backslash continuation lines. Fails the test on a
// line that is none of these or on a key outside any section.
Unit ParseUnit(const std::string& text) {
  Unit unit;
  std::string section;
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string line(absl::StripAsciiWhitespace(lines[i]));
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    while (!line.empty() && line.back() == '\\' && i + 1 < lines.size()) {
      line.pop_back();
      absl::StrAppend(&line, " ", absl::StripAsciiWhitespace(lines[++i]));
    }
    if (line.front() == '[') {
      EXPECT_EQ(line.back(), ']') << "bad section header: " << line;
      section = line.substr(1, line.size() - 2);
      unit[section];
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      ADD_FAILURE() << "line " << i + 1 << " is not Key=Value: " << line;
      continue;
    }
    EXPECT_FALSE(section.empty()) << "key outside a section: " << line;
    std::string key(absl::StripAsciiWhitespace(line.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(line.substr(eq + 1)));
    unit[section][key].push_back(value);
  }
  return unit;
}

// The last value of a key ("" when unset), as systemd reads most keys.
std::string Last(const Unit& unit, const std::string& section, const std::string& key) {
  auto s = unit.find(section);
  if (s == unit.end()) return "";
  auto k = s->second.find(key);
  if (k == s->second.end() || k->second.empty()) return "";
  return k->second.back();
}

// Every value of a list key (After=, Wants=, ...), split on spaces.
std::vector<std::string> ListValues(const Unit& unit, const std::string& section,
                                    const std::string& key) {
  std::vector<std::string> out;
  auto s = unit.find(section);
  if (s == unit.end()) return out;
  auto k = s->second.find(key);
  if (k == s->second.end()) return out;
  for (const std::string& v : k->second) {
    for (absl::string_view w : absl::StrSplit(v, ' ', absl::SkipEmpty())) out.emplace_back(w);
  }
  return out;
}

int CountOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

TEST(DeployFilesTest, SystemdUnitHasTheDocumentedKeys) {
  const std::string text = ReadFile(SourcePath("deploy/ringlmd.service"));
  ASSERT_FALSE(text.empty()) << "deploy/ringlmd.service is missing or empty";
  const Unit unit = ParseUnit(text);
  ASSERT_TRUE(unit.count("Unit"));
  ASSERT_TRUE(unit.count("Service"));
  ASSERT_TRUE(unit.count("Install"));

  EXPECT_FALSE(Last(unit, "Unit", "Description").empty());
  EXPECT_TRUE(Contains(ListValues(unit, "Unit", "After"), "network-online.target"));
  EXPECT_TRUE(Contains(ListValues(unit, "Unit", "Wants"), "network-online.target"));

  EXPECT_EQ(Last(unit, "Service", "Type"), "simple");
  const std::string exec = Last(unit, "Service", "ExecStart");
  std::vector<std::string> argv = absl::StrSplit(exec, ' ', absl::SkipEmpty());
  ASSERT_FALSE(argv.empty());
  EXPECT_TRUE(absl::EndsWith(argv[0], "/ringlmd")) << exec;
  EXPECT_EQ(argv[0][0], '/') << "ExecStart needs an absolute path: " << exec;
  auto model = std::find(argv.begin(), argv.end(), "--model");
  ASSERT_NE(model, argv.end()) << exec;
  ASSERT_NE(model + 1, argv.end()) << exec;
  EXPECT_EQ(*(model + 1), "${RINGLM_MODEL}") << exec;
  EXPECT_TRUE(absl::StrContains(exec, "--state-dir %S/ringlm")) << exec;
  EXPECT_TRUE(absl::StrContains(exec, "$RINGLMD_ARGS")) << exec;

  // The cluster key: root-only on disk, a private copy for the service.
  EXPECT_EQ(Last(unit, "Service", "LoadCredential"), "cluster.key:/etc/ringlm/cluster.key");
  EXPECT_EQ(Last(unit, "Service", "Environment"), "RINGLM_CLUSTER_KEY_FILE=%d/cluster.key");
  std::string env_file = Last(unit, "Service", "EnvironmentFile");
  EXPECT_EQ(absl::StripPrefix(env_file, "-"), "/etc/ringlm/ringlmd.env");
  EXPECT_EQ(Last(unit, "Service", "Restart"), "on-failure");
  EXPECT_EQ(Last(unit, "Service", "StateDirectory"), "ringlm");
  EXPECT_TRUE(Last(unit, "Service", "DynamicUser") == "yes" ||
              !Last(unit, "Service", "User").empty())
      << "the daemon must not run as root";
  EXPECT_EQ(Last(unit, "Service", "NoNewPrivileges"), "yes");
  EXPECT_EQ(Last(unit, "Service", "ProtectSystem"), "strict");
  EXPECT_EQ(Last(unit, "Service", "ProtectHome"), "yes");
  EXPECT_EQ(Last(unit, "Service", "AmbientCapabilities"), "");
  EXPECT_FALSE(Last(unit, "Service", "LimitMEMLOCK").empty());
  EXPECT_EQ(Last(unit, "Service", "KillSignal"), "SIGTERM");
  EXPECT_EQ(Last(unit, "Service", "TimeoutStopSec"), "10");

  EXPECT_TRUE(Contains(ListValues(unit, "Install", "WantedBy"), "multi-user.target"));
}

TEST(DeployFilesTest, EnvironmentFileDefinesModelAndArgs) {
  const std::string text = ReadFile(SourcePath("deploy/ringlmd.env"));
  ASSERT_FALSE(text.empty()) << "deploy/ringlmd.env is missing or empty";
  std::map<std::string, std::string> vars;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    ASSERT_NE(eq, absl::string_view::npos) << "not KEY=value: " << line;
    vars[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  EXPECT_TRUE(absl::EndsWith(vars["RINGLM_MODEL"], ".gguf")) << vars["RINGLM_MODEL"];
  EXPECT_TRUE(vars.count("RINGLMD_ARGS"));
  // Documented examples for a head and for a worker.
  EXPECT_TRUE(absl::StrContains(text, "--api-port 8080"));
  EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(text), "worker"));
}

TEST(DeployFilesTest, SystemdAnalyzeVerifyAcceptsTheUnit) {
  if (RunCommand("command -v systemd-analyze >/dev/null 2>&1").exit_code != 0) {
    GTEST_SKIP() << "systemd-analyze is not installed; the unit is checked by parsing only";
  }
  // As shipped: clean, or its only complaint is that the binary is not
  // installed at /usr/local/bin/ringlmd on this machine.
  testing::CommandResult shipped =
      RunCommand("systemd-analyze verify " + ShellQuote(SourcePath("deploy/ringlmd.service")));
  if (shipped.exit_code != 0) {
    for (absl::string_view line : absl::StrSplit(shipped.output, '\n', absl::SkipEmpty())) {
      EXPECT_TRUE(absl::StrContains(line, "/usr/local/bin/ringlmd") &&
                  absl::StrContains(line, "No such file or directory"))
          << "systemd-analyze verify: " << line;
    }
  }
  // With ExecStart pointing at the built binary, verify must pass outright.
  const std::string dir = testing::MakeTempDir("deploy-unit");
  const std::string unit_path = dir + "/ringlmd.service";
  WriteFile(unit_path, absl::StrReplaceAll(ReadFile(SourcePath("deploy/ringlmd.service")),
                                           {{"/usr/local/bin/ringlmd", testing::RinglmdPath()}}));
  testing::CommandResult built = RunCommand("systemd-analyze verify " + ShellQuote(unit_path));
  EXPECT_EQ(built.exit_code, 0) << built.output;
  EXPECT_EQ(built.output, "") << "systemd-analyze verify printed warnings";
}

// True while `pid` exists and is not a zombie.
bool Alive(pid_t pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (stat.empty()) return false;
  const size_t close = stat.rfind(')');
  return close == std::string::npos || stat.size() < close + 3 || stat[close + 2] != 'Z';
}

class LocalClusterTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // Whatever happened, stop what the script started.
    if (!run_dir_.empty()) RunCommand(Script() + " stop --run-dir " + ShellQuote(run_dir_));
  }
  static std::string Script() { return ShellQuote(SourcePath("deploy/local-cluster.sh")); }

  std::string run_dir_;
};

TEST_F(LocalClusterTest, ThreeNodesStreamAChatCompletionAndStop) {
  run_dir_ = testing::MakeTempDir("local-cluster");
  const std::string model = testing::ModelPath("stories260K-f32.gguf");
  const std::string build_dir = RINGLM_BINARY_DIR;

  // Free ports a moment ago; the script checks them again and refuses busy
  // ones, and another process may still take one before a daemon binds it,
  // so retry a few times with fresh ones.
  testing::CommandResult up;
  uint16_t base = 0, api = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    base = testing::FreeUdpPort();
    do {  // not one of the gRPC ports base + 1..base + 3
      api = testing::FreeTcpPort();
    } while (api > base && api <= base + 3);
    up = RunCommand(absl::StrCat("RINGLMD_EXTRA_ARGS='--threads 1' ", Script(), " 3",
                                 " --build-dir ", ShellQuote(build_dir), " --model ",
                                 ShellQuote(model), " --base-port ", base, " --api-port ", api,
                                 " --run-dir ", ShellQuote(run_dir_)));
    // Lost a race for a port (the script's check, or a daemon's bind): again.
    if (up.exit_code == 0 || (!absl::StrContains(up.output, "ports in use") &&
                              !absl::StrContains(up.output, "is the port in use?"))) {
      break;
    }
  }
  ASSERT_EQ(up.exit_code, 0) << up.output;
  const std::string api_url = absl::StrCat("http://127.0.0.1:", api);
  EXPECT_TRUE(absl::StrContains(up.output, api_url + "/v1")) << up.output;
  EXPECT_TRUE(absl::StrContains(up.output, "web chat:  " + api_url + "/")) << up.output;
  EXPECT_TRUE(absl::StrContains(up.output, "curl -sN " + api_url + "/v1/chat/completions"))
      << up.output;
  EXPECT_TRUE(absl::StrContains(up.output, absl::StrCat("status --node 127.0.0.1:", base + 1)))
      << up.output;
  EXPECT_TRUE(absl::StrContains(up.output, "3 stage(s)")) << up.output;
  // It made a cluster key, private to its owner, and every node uses it.
  struct stat key_stat {};
  ASSERT_EQ(stat((run_dir_ + "/cluster.key").c_str(), &key_stat), 0) << up.output;
  EXPECT_EQ(key_stat.st_mode & 0777, 0600u);
  EXPECT_TRUE(absl::StrContains(up.output, "security: mutual TLS")) << up.output;

  std::vector<pid_t> pids;
  for (int k = 1; k <= 3; ++k) {
    const std::string pid_text = ReadFile(absl::StrCat(run_dir_, "/node", k, "/ringlmd.pid"));
    int pid = 0;
    ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(pid_text), &pid)) << pid_text;
    EXPECT_TRUE(Alive(pid)) << "node " << k;
    pids.push_back(pid);
  }

  // The README's request, streamed.
  testing::CommandResult chat = RunCommand(
      "curl -sN --max-time 60 " + api_url +
          "/v1/chat/completions -H 'Content-Type: application/json' -d " +
          ShellQuote(
              R"({"messages":[{"role":"user","content":"Hi"}],"stream":true,"max_tokens":8})"),
      false);
  EXPECT_EQ(chat.exit_code, 0) << chat.output;
  EXPECT_TRUE(absl::StartsWith(chat.output, "data: {")) << chat.output;
  EXPECT_TRUE(absl::StrContains(chat.output, "\"content\":")) << chat.output;
  EXPECT_TRUE(absl::StrContains(chat.output, "data: [DONE]")) << chat.output;

  // A second start over the running cluster is refused with a clear message,
  // and so is one on its ports from another run directory.
  testing::CommandResult again = RunCommand(absl::StrCat(
      Script(), " 3 --build-dir ", ShellQuote(build_dir), " --model ", ShellQuote(model),
      " --base-port ", base, " --api-port ", api, " --run-dir ", ShellQuote(run_dir_)));
  EXPECT_NE(again.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(again.output, "still running")) << again.output;
  const std::string other_dir = testing::MakeTempDir("local-cluster-other");
  testing::CommandResult busy = RunCommand(absl::StrCat(
      Script(), " 3 --build-dir ", ShellQuote(build_dir), " --model ", ShellQuote(model),
      " --base-port ", base, " --api-port ", api, " --run-dir ", ShellQuote(other_dir)));
  EXPECT_NE(busy.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(busy.output, "ports in use")) << busy.output;
  for (pid_t pid : pids) EXPECT_TRUE(Alive(pid)) << "a refused start touched pid " << pid;

  testing::CommandResult stop = RunCommand(Script() + " stop --run-dir " + ShellQuote(run_dir_));
  EXPECT_EQ(stop.exit_code, 0) << stop.output;
  for (pid_t pid : pids) {
    EXPECT_TRUE(testing::WaitFor([pid] { return !Alive(pid); }, 15s))
        << "pid " << pid << " still running";
  }
  for (int k = 1; k <= 3; ++k) {
    EXPECT_NE(access(absl::StrCat(run_dir_, "/node", k, "/ringlmd.pid").c_str(), F_OK), 0)
        << "pid file of node " << k << " left behind";
  }
}

TEST_F(LocalClusterTest, MissingBinariesSayHowToBuild) {
  const std::string dir = testing::MakeTempDir("local-cluster-nobin");
  testing::CommandResult r = RunCommand(absl::StrCat(
      Script(), " 2 --build-dir ", ShellQuote(dir + "/nowhere"), " --run-dir ", ShellQuote(dir)));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.output, "binaries not found")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "ninja -C")) << r.output;
}

TEST_F(LocalClusterTest, ADaemonThatExitsEarlyShowsItsLog) {
  run_dir_ = testing::MakeTempDir("local-cluster-bad");
  const std::string bad_model = run_dir_ + "/not-a-model.gguf";
  WriteFile(bad_model, "this is not a GGUF file\n");
  testing::CommandResult r = RunCommand(
      absl::StrCat(Script(), " 2 --build-dir ", ShellQuote(RINGLM_BINARY_DIR), " --model ",
                   ShellQuote(bad_model), " --base-port ", testing::FreeUdpPort(), " --api-port ",
                   testing::FreeTcpPort(), " --run-dir ", ShellQuote(run_dir_)));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.output, "exited during startup")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "GGUF")) << "the log tail is missing:\n" << r.output;
}

TEST(DeployFilesTest, ComposeRunsThreeRinglmdServices) {
  const std::string text = ReadFile(SourcePath("deploy/compose.yaml"));
  ASSERT_FALSE(text.empty()) << "deploy/compose.yaml is missing or empty";
  // Service names: the keys indented by two spaces under the top-level
  // `services:` key.
  std::vector<std::string> services;
  bool in_services = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "#")) continue;
    if (line[0] != ' ') {
      in_services = absl::StartsWith(line, "services:");
      continue;
    }
    if (in_services && absl::StartsWith(line, "  ") && line.size() > 2 && line[2] != ' ' &&
        absl::EndsWith(line, ":")) {
      services.emplace_back(line.substr(2, line.size() - 3));
    }
  }
  EXPECT_EQ(services.size(), 3u) << absl::StrJoin(services, ", ");
  // Every service runs the image built from the Dockerfile, whose entry point
  // is ringlmd, with its own --memory-mb; one publishes the API.
  EXPECT_TRUE(absl::StrContains(text, "dockerfile: deploy/Dockerfile"));
  EXPECT_EQ(CountOf(text, "\"--memory-mb\""), 3) << "one --memory-mb per service expected";
  EXPECT_TRUE(absl::StrContains(text, "\"--api-port\", \"8080\""));
  EXPECT_TRUE(absl::StrContains(text, "8080:8080"));
  EXPECT_TRUE(absl::StrContains(text, "/models"));
  EXPECT_TRUE(absl::StrContains(text, "driver: bridge"));
}

TEST(DeployFilesTest, DockerfileReusesInstallDeps) {
  const std::string text = ReadFile(SourcePath("deploy/Dockerfile"));
  ASSERT_FALSE(text.empty()) << "deploy/Dockerfile is missing or empty";
  EXPECT_TRUE(absl::StrContains(text, "FROM debian:bookworm"));
  bool runs_install_deps = false, entrypoint_ringlmd = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "RUN ") && absl::StrContains(line, "deploy/install-deps.sh")) {
      runs_install_deps = true;
    }
    if (absl::StartsWith(line, "ENTRYPOINT ") && absl::StrContains(line, "ringlmd")) {
      entrypoint_ringlmd = true;
    }
  }
  EXPECT_TRUE(runs_install_deps);
  EXPECT_TRUE(entrypoint_ringlmd);
  EXPECT_TRUE(absl::StrContains(text, "CMAKE_BUILD_TYPE=Release"));
}

}  // namespace
}  // namespace ringlm
