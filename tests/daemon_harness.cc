#include "tests/daemon_harness.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace ringlm::testing {

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return absl::InternalError(absl::StrCat("cannot open ", log_path));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    // Die with the test process, so a crashed test leaves no daemon behind.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    execv(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, log_path));
}

ChildProcess::~ChildProcess() {
  if (!Running()) return;
  Signal(SIGTERM);
  if (!Wait(std::chrono::seconds(5))) {
    Signal(SIGKILL);
    Wait(std::chrono::seconds(5));
  }
}

void ChildProcess::Signal(int sig) {
  if (!reaped_) kill(pid_, sig);
}

bool ChildProcess::Running() {
  if (reaped_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) reaped_ = true;
  return !reaped_;
}

bool ChildProcess::Wait(std::chrono::milliseconds timeout) {
  return WaitFor([this] { return !Running(); }, timeout);
}

std::string ChildProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string RinglmdPath() { return std::string(RINGLM_BINARY_DIR) + "/daemon/ringlmd"; }
std::string RinglmPath() { return std::string(RINGLM_BINARY_DIR) + "/cli/ringlm"; }
std::string ModelPath(const std::string& file) {
  return std::string(RINGLM_SHARED_DIR) + "/models/" + file;
}

namespace {

// Test ports come from below the kernel's ephemeral range (32768-60999 by
// default): a port handed to a daemon is free when picked but bound only
// later, and in that window any outgoing connection or port-0 bind of a
// concurrent test could take a port from the ephemeral range (a daemon once
// failed to bind its API port so). Each process starts at its own offset.
constexpr uint16_t kFirstTestPort = 10000;
constexpr uint16_t kTestPorts = 22000;  // up to 31999

// Whether `port` can be bound on loopback now.
bool CanBind(int type, uint16_t port) {
  const int fd = socket(AF_INET, type, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// Never hands out one port twice in a process (two listeners of one test,
// a gRPC server and a metrics server say, would share it, SO_REUSEPORT
// splitting the calls), and walks on from the last one given.
uint16_t FreePort(int type) {
  static absl::Mutex mu;
  static auto* given = new std::set<std::pair<int, uint16_t>>();
  static uint32_t next = static_cast<uint32_t>(getpid()) * 7919u;
  absl::MutexLock lock(&mu);
  for (uint32_t attempt = 0; attempt < kTestPorts; ++attempt) {
    const auto port = static_cast<uint16_t>(kFirstTestPort + next++ % kTestPorts);
    if (given->count({type, port}) == 0 && CanBind(type, port)) {
      given->insert({type, port});
      return port;
    }
  }
  return 0;
}

}  // namespace

uint16_t FreeTcpPort() { return FreePort(SOCK_STREAM); }
uint16_t FreeUdpPort() { return FreePort(SOCK_DGRAM); }

CommandResult RunCommand(const std::string& command_line, bool merge_stderr) {
  CommandResult r;
  FILE* pipe = popen((command_line + (merge_stderr ? " 2>&1" : "")).c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace ringlm::testing
