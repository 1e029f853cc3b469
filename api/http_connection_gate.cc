#include "api/http_connection_gate.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <iterator>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "api/api_error.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

using Clock = std::chrono::steady_clock;

// How long a connection closed after an error answer keeps reading what the
// client still sends, so that it can read the answer.
constexpr std::chrono::milliseconds kAnswerLinger{500};

// Longest single sleep in poll(), so that waiting threads notice stop().
constexpr std::chrono::milliseconds kPollSlice{200};

// Set on the accept thread while it runs a connection inline because
// max_connections are open: process_and_close_socket then refuses it.
thread_local bool t_over_capacity = false;

int PollFd(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, timeout.count())));
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

std::chrono::milliseconds Until(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
  }
  return "Error";
}

// A whole response for a request the gate refuses, in OpenAI's error shape.
std::string ErrorResponse(int http_status, const absl::Status& status) {
  const std::string body = ToHttpError(status).body;
  return absl::StrCat("HTTP/1.1 ", http_status, " ", ReasonPhrase(http_status),
                      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                      http_status == 503 ? "\r\nRetry-After: 1" : "",
                      "\r\nConnection: close\r\n\r\n", body);
}

// Best-effort write of a short response on a fresh or idle socket.
void SendAll(int fd, std::string_view data, std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (Until(deadline).count() == 0 || PollFd(fd, POLLOUT, Until(deadline)) <= 0) return;
    } else {
      return;
    }
  }
}

// What the client may still send after our answer and the close.
struct Linger {
  std::chrono::milliseconds time{0};  // read for at most this long
  uint64_t max_bytes = 1 << 20;       // and at most this many bytes
};

// Closes after a response, reading (and dropping, through a small buffer)
// what the client still sends within `linger`, so that unread input does not
// turn the close into a reset that could destroy the response before the
// client reads it.
void CloseAfterResponse(int fd, Linger linger) {
  ::shutdown(fd, SHUT_WR);
  const Clock::time_point deadline = Clock::now() + linger.time;
  char sink[16 << 10];
  uint64_t drained = 0;
  while (drained < linger.max_bytes) {
    const ssize_t n = ::recv(fd, sink, std::min<uint64_t>(sizeof(sink), linger.max_bytes - drained),
                             MSG_DONTWAIT);
    if (n > 0) {
      drained += static_cast<size_t>(n);
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    if (Until(deadline).count() == 0 || PollFd(fd, POLLIN, Until(deadline)) <= 0) break;
  }
  ::close(fd);
}

void AddressOf(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), serv,
                    sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

// What the gate needs from a request's head before any body byte is read.
struct RequestHead {
  bool has_length = false;
  uint64_t content_length = 0;
  bool chunked = false;
  int reject_status = 0;  // not 0: answer this and close
  absl::Status reject;
};

RequestHead CheckHead(std::string_view block, size_t max_body_bytes) {
  RequestHead head;
  auto refuse = [&head](int http, absl::Status status) {
    head.reject_status = http;
    head.reject = std::move(status);
    return head;
  };
  bool first = true;
  bool expects_body = false;  // a method whose body httplib reads
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(block.data(), block.size()), "\r\n")) {
    if (first) {  // the request line, parsed by httplib; only the method matters here
      first = false;
      const absl::string_view method = line.substr(0, line.find(' '));
      expects_body = method == "POST" || method == "PUT" || method == "PATCH" ||
                     method == "DELETE" || method == "PRI";
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const absl::string_view name = absl::StripAsciiWhitespace(line.substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (absl::EqualsIgnoreCase(name, "Content-Length")) {
      uint64_t length = 0;
      if (value.empty() || !std::all_of(value.begin(), value.end(), absl::ascii_isdigit) ||
          !absl::SimpleAtoi(value, &length) || (head.has_length && length != head.content_length)) {
        return refuse(400, absl::InvalidArgumentError("Malformed Content-Length header"));
      }
      head.has_length = true;
      head.content_length = length;
    } else if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
      if (!absl::EqualsIgnoreCase(value, "chunked")) {
        return refuse(501, absl::UnimplementedError(
                               absl::StrCat("Transfer-Encoding '", value, "' is not supported")));
      }
      head.chunked = true;
    } else if (absl::EqualsIgnoreCase(name, "Content-Encoding")) {
      // httplib would inflate gzip and brotli bodies without any size bound.
      if (!value.empty() && !absl::EqualsIgnoreCase(value, "identity")) {
        return refuse(415, absl::InvalidArgumentError(
                               "Compressed request bodies (Content-Encoding) are not supported"));
      }
    }
  }
  // httplib would read such a body until the client closes.
  if (expects_body && !head.has_length && !head.chunked) {
    return refuse(411, absl::InvalidArgumentError(
                           "A request body needs a Content-Length (or chunked encoding)"));
  }
  if (head.has_length && head.content_length > max_body_bytes) {
    return refuse(413, absl::OutOfRangeError(
                           absl::StrCat("The request body is too large: ", head.content_length,
                                        " bytes; at most ", max_body_bytes, " are accepted")));
  }
  return head;
}

// One connection's socket as an httplib::Stream: buffered reads bounded per
// request in bytes and time, poll() instead of select() (no FD_SETSIZE
// limit), MSG_NOSIGNAL writes. Used by one thread at a time.
class ConnectionStream final : public httplib::Stream {
 public:
  enum class Wait { kReady, kIdle, kPartial, kTooLarge, kClosed, kStopped };

  ConnectionStream(int fd, std::chrono::milliseconds read_timeout,
                   std::chrono::milliseconds write_timeout, std::function<bool()> stopping)
      : fd_(fd),
        read_timeout_(read_timeout),
        write_timeout_(write_timeout),
        stopping_(std::move(stopping)) {}

  // Waits until the buffer holds a whole header block (through "\r\n\r\n"),
  // at most `max_bytes` long, by `deadline`; gives up at `idle_deadline`
  // (<= deadline) if not one byte has come by then (kIdle).
  Wait WaitForHeaderBlock(Clock::time_point deadline, Clock::time_point idle_deadline,
                          size_t max_bytes, size_t& block_bytes) {
    buf_.erase(0, pos_);  // what earlier requests consumed
    pos_ = 0;
    size_t scan = 0;
    for (;;) {
      const size_t end = buf_.find("\r\n\r\n", scan);
      if (end != std::string::npos) {
        block_bytes = end + 4;
        return block_bytes > max_bytes ? Wait::kTooLarge : Wait::kReady;
      }
      if (buf_.size() >= max_bytes) return Wait::kTooLarge;
      scan = buf_.size() >= 3 ? buf_.size() - 3 : 0;
      if (stopping_()) return Wait::kStopped;
      const std::chrono::milliseconds left = Until(buf_.empty() ? idle_deadline : deadline);
      if (left.count() == 0) return buf_.empty() ? Wait::kIdle : Wait::kPartial;
      const int ready = PollFd(fd_, POLLIN, std::min(left, kPollSlice));
      if (ready < 0) return Wait::kClosed;
      if (ready == 0) continue;
      const ssize_t n = Receive(max_bytes - buf_.size());
      if (n == 0) return Wait::kClosed;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return Wait::kClosed;
    }
  }

  // Bounds the reads of the request whose head is buffered: at most
  // `max_bytes` from now on, and none after `deadline`.
  void BeginRequest(uint64_t max_bytes, Clock::time_point deadline) {
    consumed_ = 0;
    limit_ = max_bytes;
    deadline_ = deadline;
  }
  uint64_t consumed() const { return consumed_; }
  // The buffered bytes not yet consumed (after WaitForHeaderBlock: the head first).
  std::string_view unread() const { return std::string_view(buf_).substr(pos_); }

  bool is_readable() const override {
    return pos_ < buf_.size() || PollFd(fd_, POLLIN, std::chrono::milliseconds(0)) > 0;
  }
  bool is_writable() const override {
    return PollFd(fd_, POLLOUT, write_timeout_) > 0 && PeerStillOpen();
  }

  ssize_t read(char* ptr, size_t size) override {
    if (consumed_ >= limit_) return -1;  // over the request's budget
    size = static_cast<size_t>(std::min<uint64_t>(size, limit_ - consumed_));
    if (pos_ == buf_.size()) {
      buf_.clear();
      pos_ = 0;
      const Clock::time_point until = std::min(deadline_, Clock::now() + read_timeout_);
      for (;;) {
        if (stopping_()) return -1;
        const std::chrono::milliseconds left = Until(until);
        if (left.count() == 0) return -1;
        const int ready = PollFd(fd_, POLLIN, std::min(left, kPollSlice));
        if (ready < 0) return -1;
        if (ready == 0) continue;
        const ssize_t n = Receive(kReadChunk);
        if (n == 0) return 0;
        if (n > 0) break;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
      }
    }
    const size_t n = std::min(size, buf_.size() - pos_);
    std::memcpy(ptr, buf_.data() + pos_, n);
    pos_ += n;
    consumed_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    for (;;) {
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      AddressOf(addr, len, ip, port);
    }
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      AddressOf(addr, len, ip, port);
    }
  }
  socket_t socket() const override { return fd_; }

 private:
  static constexpr size_t kReadChunk = 16 << 10;

  // Appends up to `max` bytes from the socket to the buffer.
  ssize_t Receive(size_t max) {
    const size_t old = buf_.size();
    buf_.resize(old + std::min(max, kReadChunk));
    const ssize_t n = ::recv(fd_, buf_.data() + old, buf_.size() - old, 0);
    buf_.resize(old + static_cast<size_t>(std::max<ssize_t>(0, n)));
    return n;
  }

  // Like httplib's is_socket_alive: false once the client has hung up.
  bool PeerStillOpen() const {
    if (PollFd(fd_, POLLIN, std::chrono::milliseconds(0)) <= 0) return true;
    char byte;
    const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
  }

  const int fd_;
  const std::chrono::milliseconds read_timeout_;
  const std::chrono::milliseconds write_timeout_;
  const std::function<bool()> stopping_;
  std::string buf_;  // bytes read from the socket; [pos_, size) not yet consumed
  size_t pos_ = 0;
  uint64_t consumed_ = 0;
  uint64_t limit_ = 0;
  Clock::time_point deadline_ = Clock::time_point::max();
};

std::chrono::milliseconds Millis(time_t sec, time_t usec) {
  return std::chrono::milliseconds(static_cast<int64_t>(sec) * 1000 + usec / 1000);
}

}  // namespace

// httplib's task queue: one thread per connection up to the bound; past it
// the task runs inline on the accept thread with t_over_capacity set.
// Finished threads are joined at the next enqueue and at shutdown.
class GatedHttpServer::ConnectionThreads final : public httplib::TaskQueue {
 public:
  ConnectionThreads(int max_threads, std::atomic<int>& open)
      : max_threads_(std::max(1, max_threads)), open_(open) {}
  ~ConnectionThreads() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    {
      absl::MutexLock lock(&mu_);
      ReapLocked();
      if (running_ < max_threads_) {
        auto it = threads_.emplace(threads_.end());
        // Shared, so that the task survives a thread that fails to start.
        auto task = std::make_shared<std::function<void()>>(std::move(fn));
        try {
          *it = std::thread([this, it, task] {
            (*task)();
            absl::MutexLock done_lock(&mu_);
            --running_;
            open_.fetch_sub(1);
            finished_.push_back(it);
          });
          ++running_;
          open_.fetch_add(1);
          return;
        } catch (const std::system_error& e) {
          threads_.erase(it);
          fn = std::move(*task);
          spdlog::warn("api: cannot start a connection thread: {}", e.what());
        }
      }
    }
    t_over_capacity = true;
    fn();
    t_over_capacity = false;
  }

  void shutdown() override {
    std::list<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      threads.swap(threads_);
      finished_.clear();
    }
    for (std::thread& t : threads) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it : finished_) {
      it->join();  // it has left fn() and only returns now
      threads_.erase(it);
    }
    finished_.clear();
  }

  const int max_threads_;
  std::atomic<int>& open_;
  absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  std::list<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::list<std::thread>::iterator> finished_ ABSL_GUARDED_BY(mu_);
};

GatedHttpServer::GatedHttpServer(ConnectionLimits limits) : limits_(limits) {
  new_task_queue = [this] { return new ConnectionThreads(limits_.max_connections, open_); };
  set_payload_max_length(limits_.max_body_bytes);
}

GatedHttpServer::~GatedHttpServer() = default;

bool GatedHttpServer::SetListenBacklog(int backlog) {
  const socket_t sock = svr_sock_;
  return sock != INVALID_SOCKET && ::listen(sock, std::max(1, backlog)) == 0;
}

void GatedHttpServer::RefuseAndClose(socket_t sock) {
  const uint64_t refused = refused_.fetch_add(1) + 1;
  if ((refused & (refused - 1)) == 0) {  // 1, 2, 4, 8, ...: do not flood the log
    spdlog::warn("api: {} connection(s) refused so far: {} are open (the limit)", refused,
                 limits_.max_connections);
  }
  SendAll(sock,
          ErrorResponse(503, absl::ResourceExhaustedError(
                                 absl::StrCat("The server has ", limits_.max_connections,
                                              " open connections (the limit); retry later"))),
          std::chrono::milliseconds(0));
  CloseAfterResponse(sock, Linger{});  // never wait on the accept thread
}

namespace {
// The connection whose request this thread handles (CurrentClientGone).
thread_local socket_t current_socket = INVALID_SOCKET;
}  // namespace

bool GatedHttpServer::CurrentClientGone() {
  if (current_socket == INVALID_SOCKET) return false;
  pollfd p{current_socket, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

bool GatedHttpServer::process_and_close_socket(socket_t sock) {
  if (t_over_capacity) {
    RefuseAndClose(sock);
    return false;
  }
  const std::chrono::milliseconds write_timeout = Millis(write_timeout_sec_, write_timeout_usec_);
  ConnectionStream stream(sock, Millis(read_timeout_sec_, read_timeout_usec_), write_timeout,
                          [this] { return stopping(); });
  // Body budget for chunked or length-less bodies: the limit plus framing.
  const uint64_t open_body_budget =
      limits_.max_body_bytes + std::max<uint64_t>(64 << 10, limits_.max_body_bytes / 8);
  bool ret = false;
  Linger linger;
  std::string refusal;
  for (size_t served = 0; served < keep_alive_max_count_; ++served) {
    // A kept-alive connection may idle for keep_alive_timeout (httplib's 5 s)
    // before the next request starts; the head then has header_timeout.
    size_t block_bytes = 0;
    const Clock::time_point now = Clock::now();
    const Clock::time_point deadline = now + limits_.header_timeout;
    const Clock::time_point idle_deadline =
        served == 0 ? deadline
                    : std::min(deadline, now + std::chrono::seconds(keep_alive_timeout_sec_));
    const ConnectionStream::Wait wait =
        stream.WaitForHeaderBlock(deadline, idle_deadline, limits_.max_header_bytes, block_bytes);
    if (wait == ConnectionStream::Wait::kPartial) {
      refusal = ErrorResponse(408, absl::DeadlineExceededError(
                                       absl::StrCat("The request headers did not arrive within ",
                                                    limits_.header_timeout.count(), " ms")));
    } else if (wait == ConnectionStream::Wait::kTooLarge) {
      refusal = ErrorResponse(
          431, absl::InvalidArgumentError(absl::StrCat("The request line and headers exceed ",
                                                       limits_.max_header_bytes, " bytes")));
      linger.time = kAnswerLinger;
    }
    if (wait != ConnectionStream::Wait::kReady) break;

    const RequestHead head =
        CheckHead(stream.unread().substr(0, block_bytes), limits_.max_body_bytes);
    if (head.reject_status != 0) {
      refusal = ErrorResponse(head.reject_status, head.reject);
      if (head.reject_status == 413 && head.content_length <= limits_.max_discarded_body_bytes) {
        // A client sends the whole body before it reads the answer: read
        // and drop the rest of it, so that the close does not reset the
        // connection and destroy the 413 before the client sees it.
        const uint64_t buffered = stream.unread().size() - block_bytes;
        linger.time = limits_.discard_timeout;
        linger.max_bytes = head.content_length - std::min<uint64_t>(buffered, head.content_length);
        break;
      }
      linger.time = kAnswerLinger;  // let the client read it before the close
      break;
    }
    // What httplib may read: exactly the Content-Length, or for a chunked
    // body the limit plus framing (httplib checks no size there itself).
    const uint64_t body_budget = head.chunked      ? open_body_budget
                                 : head.has_length ? head.content_length
                                                   : 0;
    // The body's memory, reserved for as long as httplib holds the request.
    const uint64_t reserved = head.chunked ? limits_.max_body_bytes : body_budget;
    if (body_bytes_in_flight_.fetch_add(reserved) + reserved > limits_.max_body_bytes_in_flight) {
      body_bytes_in_flight_.fetch_sub(reserved);
      refusal = ErrorResponse(
          503, absl::ResourceExhaustedError("The server is receiving too many request bodies at "
                                            "once; retry later"));
      linger.time = kAnswerLinger;
      break;
    }
    absl::Cleanup release = [this, reserved] { body_bytes_in_flight_.fetch_sub(reserved); };
    stream.BeginRequest(block_bytes + body_budget, Clock::now() + limits_.body_timeout);
    const bool last = served + 1 == keep_alive_max_count_;
    bool connection_closed = false;
    current_socket = sock;
    ret = process_request(stream, last, connection_closed, nullptr);
    current_socket = INVALID_SOCKET;
    std::move(release).Invoke();
    // A body left unread (a handler answered without it, or its read
    // failed) or one whose end is not known exactly would be parsed as the
    // next request: close instead, after a linger so the answer is read.
    const bool body_read_exactly = !head.chunked && stream.consumed() == block_bytes + body_budget;
    if (!body_read_exactly) linger.time = kAnswerLinger;
    if (!ret || connection_closed || last || !body_read_exactly) break;
  }
  if (!refusal.empty()) SendAll(sock, refusal, write_timeout);
  CloseAfterResponse(sock, linger);
  return ret;
}

}  // namespace ringlm
