#include "discovery/node_identity.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "discovery/announcement.h"

namespace ringlm {
namespace {

constexpr size_t kMaxIdFileBytes = 4096;

absl::Status ErrnoError(int err, const std::string& what) { return absl::ErrnoToStatus(err, what); }

// Reads a whole small file. NotFound when it does not exist.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("open ", path));
  std::string content;
  char buf[512];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return ErrnoError(err, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    content.append(buf, static_cast<size_t>(n));
    if (content.size() > kMaxIdFileBytes) {
      close(fd);
      return absl::DataLossError(
          absl::StrCat(path, " is corrupt: larger than ", kMaxIdFileBytes, " bytes"));
    }
  }
  close(fd);
  return content;
}

absl::StatusOr<std::string> ParseIdFile(const std::string& path, std::string_view content) {
  std::string_view id = content;
  if (!id.empty() && id.back() == '\n') id.remove_suffix(1);
  if (!IsValidNodeId(id)) {
    return absl::DataLossError(absl::StrCat(
        path, " is corrupt: content \"", absl::CHexEscape(std::string(content.substr(0, 80))),
        "\" is not a node id (1..64 bytes of [A-Za-z0-9._-]); fix or delete it"));
  }
  return std::string(id);
}

absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, absl::StrCat("write ", path));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

std::string NewNodeId() {
  return absl::StrCat("node-", absl::Hex(RandomU64() & 0xFFFFFFFFFFFFull, absl::kZeroPad12));
}

}  // namespace

uint64_t RandomU64() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

absl::StatusOr<std::string> LoadOrCreateNodeId(const std::string& state_dir) {
  if (state_dir.empty()) return absl::InvalidArgumentError("state directory is empty");
  const std::string path = state_dir + "/node_id";

  absl::StatusOr<std::string> content = ReadSmallFile(path);
  if (content.ok()) return ParseIdFile(path, *content);
  if (!absl::IsNotFound(content.status())) return content.status();

  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec) {
    return absl::ErrnoToStatus(ec.value(), absl::StrCat("create state directory ", state_dir));
  }

  const std::string id = NewNodeId();
  // Unique per call, so concurrent creators never share a temporary file.
  const std::string tmp =
      absl::StrCat(path, ".tmp.", getpid(), ".", absl::Hex(RandomU64(), absl::kZeroPad16));
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("create ", tmp));
  absl::Status written = WriteAll(fd, id + "\n", tmp);
  if (written.ok() && fsync(fd) != 0) written = ErrnoError(errno, absl::StrCat("fsync ", tmp));
  close(fd);
  if (!written.ok()) {
    unlink(tmp.c_str());
    return written;
  }
  // link() never replaces an existing file: if another process created the
  // id first, we take theirs.
  const int linked = link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  unlink(tmp.c_str());
  if (linked == 0) return id;
  if (link_errno != EEXIST) return ErrnoError(link_errno, absl::StrCat("link ", path));
  content = ReadSmallFile(path);
  if (!content.ok()) return content.status();
  return ParseIdFile(path, *content);
}

std::string DefaultStateDir() {
  const char* xdg = std::getenv("XDG_STATE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return absl::StrCat(xdg, "/ringlm");
  const char* home = std::getenv("HOME");
  std::string home_dir = home != nullptr ? home : "";
  if (home_dir.empty()) {
    struct passwd pw;
    struct passwd* result = nullptr;
    char buf[4096];
    if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &result) == 0 && result != nullptr &&
        result->pw_dir != nullptr) {
      home_dir = result->pw_dir;
    }
  }
  if (home_dir.empty()) home_dir.assign(1, '.');  // not = ".": GCC 12 -Wrestrict false positive
  return absl::StrCat(home_dir, "/.local/state/ringlm");
}

}  // namespace ringlm
