// Thin IPv4 UDP helpers for discovery: an owning socket, and the list of
// local broadcast addresses.
#ifndef RINGLM_DISCOVERY_UDP_SOCKET_H_
#define RINGLM_DISCOVERY_UDP_SOCKET_H_

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringlm {

// UdpSocket: an owned, non-blocking IPv4 UDP socket (closed on destruction).
// Move-only. Thread-safety: SendTo and Receive may run concurrently from
// different threads (the kernel serialises them); moving or destroying the
// socket must not race with either.
class UdpSocket {
 public:
  // A socket bound to 0.0.0.0:port with SO_REUSEADDR, SO_REUSEPORT and
  // SO_BROADCAST, so several processes on one host share the port and all
  // receive every broadcast. port 0 picks a free port.
  static absl::StatusOr<UdpSocket> BindAny(uint16_t port);
  // An unbound socket with SO_BROADCAST; the kernel picks the source port.
  static absl::StatusOr<UdpSocket> Unbound();

  UdpSocket(UdpSocket&& other) noexcept;
  UdpSocket& operator=(UdpSocket&& other) noexcept;
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;
  ~UdpSocket();

  int fd() const { return fd_; }
  // The bound port, in host order.
  absl::StatusOr<uint16_t> LocalPort() const;

  // Sends one datagram to ipv4:port. InvalidArgument for an unparsable
  // address; the errno mapped otherwise.
  absl::Status SendTo(std::string_view data, std::string_view ipv4, uint16_t port) const;

  struct Received {
    size_t size = 0;  // real datagram size; may exceed the buffer (then truncated)
    std::string sender_ip;
    uint16_t sender_port = 0;
  };
  // Receives one datagram without blocking into buf[0..capacity). nullopt
  // when none is queued; an error status for a socket error.
  absl::StatusOr<std::optional<Received>> Receive(char* buf, size_t capacity) const;

 private:
  explicit UdpSocket(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Parses dotted-quad IPv4. nullopt when not one.
std::optional<in_addr> ParseIpv4(std::string_view ipv4);
bool IsLoopbackIpv4(std::string_view ipv4);

// Broadcast addresses of every up, non-loopback IPv4 interface with
// IFF_BROADCAST (from getifaddrs), deduplicated and sorted. Never contains
// 255.255.255.255, 0.0.0.0 or a 127/8 address. Empty on error.
std::vector<std::string> InterfaceBroadcastAddresses();

}  // namespace ringlm

#endif  // RINGLM_DISCOVERY_UDP_SOCKET_H_
