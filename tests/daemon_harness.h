// Test harness for multi-process tests: starts real ringlmd processes,
// picks free loopback ports, runs commands, and waits for conditions.
#ifndef RINGLM_TESTS_DAEMON_HARNESS_H_
#define RINGLM_TESTS_DAEMON_HARNESS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/testing/temp_dir.h"  // MakeTempDir, for the tests that use the harness

namespace ringlm::testing {

// A child process whose stdout and stderr go to a log file. The destructor
// stops it (SIGTERM, then SIGKILL after 5 s) and reaps it, so no test leaves
// a process behind. Not thread-safe.
class ChildProcess {
 public:
  // `argv[0]` is the program path. `log_path` receives both output streams.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv,
                                                             const std::string& log_path);
  ~ChildProcess();

  void Signal(int sig);
  // True while the process has not exited (reaps it if it has).
  bool Running();
  // Waits for exit up to `timeout`; returns false if it is still running.
  bool Wait(std::chrono::milliseconds timeout);
  pid_t pid() const { return pid_; }
  std::string Log() const;

 private:
  ChildProcess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  pid_t pid_;
  std::string log_path_;
  bool reaped_ = false;
};

// Paths of the built binaries.
std::string RinglmdPath();
std::string RinglmPath();
std::string ModelPath(const std::string& file);  // in ../shared/models

// A loopback port that was free a moment ago, from below the kernel's
// ephemeral range (see daemon_harness.cc).
uint16_t FreeTcpPort();
uint16_t FreeUdpPort();

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout, and stderr when `merge_stderr`
};
// Runs a shell command line and captures its output.
CommandResult RunCommand(const std::string& command_line, bool merge_stderr = true);

// Polls `condition` every 50 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// Shell-quotes one argument.
std::string ShellQuote(const std::string& s);

}  // namespace ringlm::testing

#endif  // RINGLM_TESTS_DAEMON_HARNESS_H_
