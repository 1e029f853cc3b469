#include "discovery/udp_socket.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringlm {
namespace {

absl::StatusOr<int> NewSocket() {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket(AF_INET, SOCK_DGRAM)");
  int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof(one)) != 0) {
    int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, "setsockopt(SO_BROADCAST)");
  }
  return fd;
}

std::string IpToString(const in_addr& addr) {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &addr, text, sizeof(text));
  return text;
}

}  // namespace

absl::StatusOr<UdpSocket> UdpSocket::BindAny(uint16_t port) {
  absl::StatusOr<int> fd = NewSocket();
  if (!fd.ok()) return fd.status();
  UdpSocket sock(*fd);
  int one = 1;
  for (int opt : {SO_REUSEADDR, SO_REUSEPORT}) {
    if (setsockopt(sock.fd_, SOL_SOCKET, opt, &one, sizeof(one)) != 0) {
      return absl::ErrnoToStatus(
          errno, opt == SO_REUSEADDR ? "setsockopt(SO_REUSEADDR)" : "setsockopt(SO_REUSEPORT)");
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(port);
  if (bind(sock.fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("bind UDP 0.0.0.0:", port));
  }
  return sock;
}

absl::StatusOr<UdpSocket> UdpSocket::Unbound() {
  absl::StatusOr<int> fd = NewSocket();
  if (!fd.ok()) return fd.status();
  return UdpSocket(*fd);
}

UdpSocket::UdpSocket(UdpSocket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

UdpSocket& UdpSocket::operator=(UdpSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

UdpSocket::~UdpSocket() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<uint16_t> UdpSocket::LocalPort() const {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::ErrnoToStatus(errno, "getsockname");
  }
  return ntohs(addr.sin_port);
}

absl::Status UdpSocket::SendTo(std::string_view data, std::string_view ipv4_sv,
                               uint16_t port) const {
  const std::string ipv4(ipv4_sv);
  std::optional<in_addr> ip = ParseIpv4(ipv4);
  if (!ip) return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", ipv4));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr = *ip;
  addr.sin_port = htons(port);
  ssize_t n;
  do {
    n = sendto(fd_, data.data(), data.size(), 0, reinterpret_cast<const sockaddr*>(&addr),
               sizeof(addr));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("sendto ", ipv4, ":", port));
  if (static_cast<size_t>(n) != data.size()) {
    return absl::InternalError(
        absl::StrCat("sendto ", ipv4, ":", port, " sent ", n, " of ", data.size(), " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<UdpSocket::Received>> UdpSocket::Receive(char* buf,
                                                                      size_t capacity) const {
  sockaddr_in from{};
  socklen_t from_len = sizeof(from);
  ssize_t n;
  do {
    // MSG_TRUNC: return the real size of an oversized datagram.
    n = recvfrom(fd_, buf, capacity, MSG_DONTWAIT | MSG_TRUNC, reinterpret_cast<sockaddr*>(&from),
                 &from_len);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::nullopt;
    return absl::ErrnoToStatus(errno, "recvfrom");
  }
  Received r;
  r.size = static_cast<size_t>(n);
  r.sender_ip = IpToString(from.sin_addr);
  r.sender_port = ntohs(from.sin_port);
  return r;
}

std::optional<in_addr> ParseIpv4(std::string_view ipv4) {
  in_addr addr{};
  if (inet_pton(AF_INET, std::string(ipv4).c_str(), &addr) != 1) return std::nullopt;
  return addr;
}

bool IsLoopbackIpv4(std::string_view ipv4) {
  std::optional<in_addr> addr = ParseIpv4(ipv4);
  return addr && (ntohl(addr->s_addr) >> 24) == 127;
}

std::vector<std::string> InterfaceBroadcastAddresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET) continue;
    if (!(ifa->ifa_flags & IFF_UP) || !(ifa->ifa_flags & IFF_BROADCAST) ||
        (ifa->ifa_flags & IFF_LOOPBACK) || ifa->ifa_broadaddr == nullptr ||
        ifa->ifa_broadaddr->sa_family != AF_INET) {
      continue;
    }
    const in_addr b = reinterpret_cast<const sockaddr_in*>(ifa->ifa_broadaddr)->sin_addr;
    const uint32_t host_order = ntohl(b.s_addr);
    if (host_order == INADDR_BROADCAST || host_order == INADDR_ANY || (host_order >> 24) == 127) {
      continue;
    }
    out.push_back(IpToString(b));
  }
  freeifaddrs(list);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace ringlm
