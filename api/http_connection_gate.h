// An httplib::Server that bounds what one connection can hold: how long the
// request line and headers may take to arrive, how large they and the body
// may be, and how many connections may be open at once.
//
// Why: httplib 0.11.4 serves each connection on a thread of a fixed pool and
// reads headers with a per-read timeout only, so clients that send a header
// byte a second (slowloris) hold every pool thread and starve real requests.
// It also checks the body size only from Content-Length, and not for chunked
// bodies, and inflates gzip/brotli bodies without a bound.
//
// How (the one place that leans on httplib's internals): the private virtual
// process_and_close_socket is overridden. Each accepted connection runs on a
// thread of its own, up to max_connections; past that the accept thread
// answers 503 itself and closes, so waiting connections never block others.
// Per connection, before each request (also each further keep-alive
// request), the whole header block ("\r\n\r\n") must arrive within
// header_timeout and max_header_bytes, else the connection is closed (408 or
// 431 when something partial came); an idle kept-alive connection is closed
// after httplib's keep-alive timeout (5 s) if no next request begins. The head is then checked
// before any body byte is read: Content-Length over max_body_bytes -> 413 (the body is then
// read and dropped, up to max_discarded_body_bytes, so the client can read the answer), a
// Content-Encoding
// -> 415, and past max_body_bytes_in_flight -> 503. Only then does httplib's
// process_request parse and route it, over a
// Stream that bounds the body's bytes and time (body_timeout) and polls with
// poll(), not select(). Bytes read past one request stay buffered for the
// next (pipelining works).
#ifndef RINGLM_API_HTTP_CONNECTION_GATE_H_
#define RINGLM_API_HTTP_CONNECTION_GATE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "httplib.h"

namespace ringlm {

struct ConnectionLimits {
  // Request line and headers, in total (not per read), from the accept or
  // from the end of the previous response on a kept-alive connection.
  std::chrono::milliseconds header_timeout{10000};
  size_t max_header_bytes = 32 << 10;  // request line + headers + the blank line
  int max_connections = 512;           // open at once; more get 503 and are closed
  size_t max_body_bytes = 4 << 20;     // Content-Length above this gets 413 unread
  // Sum of the bodies being received or handled at once (by Content-Length;
  // a chunked body counts as max_body_bytes). A request that would pass it
  // gets 503 unread, so a flood of large bodies cannot exhaust memory.
  uint64_t max_body_bytes_in_flight = uint64_t{256} << 20;
  std::chrono::milliseconds body_timeout{60000};  // the whole body, once headers are in
  // A body over max_body_bytes but at most this large is read and dropped
  // (16 KiB at a time, never kept) after the 413, for at most
  // discard_timeout, so that a client that sends the whole body before
  // reading the answer gets the 413 rather than a reset connection. Larger
  // claims are closed on after a short linger, as before.
  uint64_t max_discarded_body_bytes = uint64_t{64} << 20;
  std::chrono::milliseconds discard_timeout{10000};
};

// Contract:
// - Use it as an httplib::Server (routes, handlers, bind, listen_after_bind,
//   stop). Do not replace `new_task_queue`: the constructor installs the
//   queue that owns the connection threads (joined when the accept loop ends,
//   i.e. after stop()). Handlers run on those threads.
// - Handlers must return in bounded time after stop() (the connection threads
//   themselves notice stop() within about 200 ms while waiting for input).
// - Thread-safe as httplib::Server is; open_connections() may be read from
//   any thread.
// - httplib's own read/write timeouts (set_read_timeout, set_write_timeout)
//   still bound each single read and write.
class GatedHttpServer : public httplib::Server {
 public:
  explicit GatedHttpServer(ConnectionLimits limits);
  ~GatedHttpServer() override;

  // Re-listens the bound socket with a longer accept queue than httplib's
  // fixed 5 (CPPHTTPLIB_LISTEN_BACKLOG), so a burst of connections is not
  // dropped by the kernel and retried seconds later. Call after bind; the
  // kernel caps it at net.core.somaxconn. False if not bound.
  bool SetListenBacklog(int backlog);

  // On a handler's thread: true when the client of the request being
  // handled has closed its side of the connection (or the connection broke),
  // so a long non-streaming answer can stop early. False off a connection
  // thread. A client that half-closes (shutdown(SHUT_WR)) after its request
  // counts as gone; HTTP clients do not do that.
  static bool CurrentClientGone();
  // Connections being served now (each on its own thread).
  int open_connections() const { return open_.load(); }
  // Connections refused with 503 because max_connections were open.
  uint64_t refused_connections() const { return refused_.load(); }
  // Body bytes reserved by requests being received or handled now.
  uint64_t body_bytes_in_flight() const { return body_bytes_in_flight_.load(); }

 private:
  class ConnectionThreads;

  bool process_and_close_socket(socket_t sock) override;
  // Answers 503 on the accept thread and closes, without waiting for input.
  void RefuseAndClose(socket_t sock);
  bool stopping() const { return svr_sock_ == INVALID_SOCKET; }

  const ConnectionLimits limits_;
  std::atomic<int> open_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> body_bytes_in_flight_{0};
};

}  // namespace ringlm

#endif  // RINGLM_API_HTTP_CONNECTION_GATE_H_
