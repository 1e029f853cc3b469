#include "api/host_check.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ringlm {
namespace {

struct HostPort {
  std::string host;              // normalized
  std::optional<uint16_t> port;  // absent when the value has none
};

// An IP address in its canonical text (so "[0:0::1]" equals "::1"), or the
// lower-cased name without one trailing dot.
std::string Canonical(std::string_view host) {
  std::string lower = absl::AsciiStrToLower(absl::string_view(host.data(), host.size()));
  in6_addr v6;
  if (inet_pton(AF_INET6, lower.c_str(), &v6) == 1) {
    char text[INET6_ADDRSTRLEN];
    if (inet_ntop(AF_INET6, &v6, text, sizeof(text)) != nullptr) return text;
  }
  if (!lower.empty() && lower.back() == '.') lower.pop_back();
  return lower;
}

std::optional<HostPort> SplitHostPort(std::string_view value) {
  absl::string_view v = absl::StripAsciiWhitespace(absl::string_view(value.data(), value.size()));
  absl::string_view host;
  absl::string_view port_text;
  bool has_port = false;
  if (absl::StartsWith(v, "[")) {
    const size_t close = v.find(']');
    if (close == absl::string_view::npos) return std::nullopt;
    host = v.substr(1, close - 1);
    absl::string_view rest = v.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return std::nullopt;
      port_text = rest.substr(1);
      has_port = true;
    }
  } else if (std::count(v.begin(), v.end(), ':') > 1) {
    host = v;  // a bare IPv6 address, which cannot carry a port
  } else if (const size_t colon = v.find(':'); colon != absl::string_view::npos) {
    host = v.substr(0, colon);
    port_text = v.substr(colon + 1);
    has_port = true;
  } else {
    host = v;
  }
  if (host.empty()) return std::nullopt;
  for (char c : host) {
    // Nothing that could end the authority or hide another host.
    if (c == '/' || c == '@' || c == '\\' || c == '?' || c == '#' ||
        std::isspace(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) < 0x20) {
      return std::nullopt;
    }
  }
  HostPort out;
  out.host = Canonical(std::string_view(host.data(), host.size()));
  if (out.host.empty()) return std::nullopt;
  if (has_port && !port_text.empty()) {
    uint32_t port = 0;
    if (port_text.size() > 5 ||
        !std::all_of(port_text.begin(), port_text.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(port_text, &port) || port > 65535) {
      return std::nullopt;
    }
    out.port = static_cast<uint16_t>(port);
  }
  return out;
}

uint16_t DefaultPort(std::string_view scheme) {
  if (scheme == "http") return 80;
  if (scheme == "https") return 443;
  return 0;
}

// The machine's interface addresses and host name, for a wildcard bind.
void AddOwnAddresses(absl::flat_hash_set<std::string>& hosts) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
      if (it->ifa_addr == nullptr) continue;
      char text[INET6_ADDRSTRLEN];
      const void* addr = nullptr;
      if (it->ifa_addr->sa_family == AF_INET) {
        addr = &reinterpret_cast<const sockaddr_in*>(it->ifa_addr)->sin_addr;
      } else if (it->ifa_addr->sa_family == AF_INET6) {
        addr = &reinterpret_cast<const sockaddr_in6*>(it->ifa_addr)->sin6_addr;
      } else {
        continue;
      }
      if (inet_ntop(it->ifa_addr->sa_family, addr, text, sizeof(text)) != nullptr) {
        hosts.insert(Canonical(text));
      }
    }
    freeifaddrs(list);
  }
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') {
    const std::string host = Canonical(name);
    hosts.insert(host);
    // "box.lan" is also reached as "box".
    if (const size_t dot = host.find('.'); dot != std::string::npos && dot > 0) {
      hosts.insert(host.substr(0, dot));
    }
  }
}

}  // namespace

bool IsLoopbackHost(std::string_view host) {
  std::optional<HostPort> hp = SplitHostPort(host);
  if (!hp) return false;
  if (hp->host == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, hp->host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, hp->host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    // ::ffff:127.x.y.z
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

bool IsWildcardHost(std::string_view host) {
  if (absl::StripAsciiWhitespace(absl::string_view(host.data(), host.size())).empty()) return true;
  std::optional<HostPort> hp = SplitHostPort(host);
  return hp && (hp->host == "0.0.0.0" || hp->host == "::");
}

std::string ExposureWarning(std::string_view host, bool has_api_key) {
  if (has_api_key || IsLoopbackHost(host)) return "";
  const std::string where = IsWildcardHost(host)
                                ? absl::StrCat("every interface (\"", std::string(host), "\")")
                                : std::string(host);
  return absl::StrCat("api: bound to ", where,
                      " with no API key: anyone who can reach it can use the model. Set an API "
                      "key (--api-key) or bind a loopback address (--api-host 127.0.0.1)");
}

std::optional<std::string> HostOfHeader(std::string_view value) {
  std::optional<HostPort> hp = SplitHostPort(value);
  if (!hp) return std::nullopt;
  return std::move(hp->host);
}

HostCheck::HostCheck(std::string_view bound_host, const std::vector<std::string>& allowed_hosts,
                     const std::vector<std::string>& cors_origins) {
  for (const char* local : {"localhost", "127.0.0.1", "::1"}) hosts_.insert(local);
  if (IsWildcardHost(bound_host)) {
    AddOwnAddresses(hosts_);
  } else if (std::optional<std::string> bound = HostOfHeader(bound_host)) {
    hosts_.insert(*std::move(bound));
  }
  for (const std::string& entry : allowed_hosts) {
    if (absl::StripAsciiWhitespace(entry) == "*") {
      any_host_ = true;
    } else if (std::optional<std::string> host = HostOfHeader(entry)) {
      hosts_.insert(*std::move(host));
    }
  }
  for (const std::string& entry : cors_origins) {
    if (absl::StripAsciiWhitespace(entry) == "*") {
      cors_any_ = true;
    } else if (std::optional<Origin> origin = ParseOrigin(entry)) {
      cors_origins_.push_back(*std::move(origin));
    }
  }
}

bool HostCheck::HostAllowed(std::optional<std::string_view> host_header) const {
  if (!host_header.has_value()) return true;  // HTTP/1.0 sends none
  if (any_host_) return true;
  std::optional<std::string> host = HostOfHeader(*host_header);
  return host && hosts_.contains(*host);
}

std::optional<HostCheck::Origin> HostCheck::ParseOrigin(std::string_view value) {
  absl::string_view v = absl::StripAsciiWhitespace(absl::string_view(value.data(), value.size()));
  const size_t sep = v.find("://");
  if (sep == absl::string_view::npos || sep == 0) return std::nullopt;  // also "null"
  Origin origin;
  origin.scheme = absl::AsciiStrToLower(v.substr(0, sep));
  absl::string_view authority = v.substr(sep + 3);
  if (absl::EndsWith(authority, "/")) authority.remove_suffix(1);  // tolerated in the options
  std::optional<HostPort> hp = SplitHostPort(std::string_view(authority.data(), authority.size()));
  if (!hp) return std::nullopt;
  origin.host = std::move(hp->host);
  origin.port = hp->port.value_or(DefaultPort(origin.scheme));
  return origin;
}

HostCheck::OriginVerdict HostCheck::CheckOrigin(std::optional<std::string_view> origin_header,
                                                std::optional<std::string_view> host_header) const {
  if (!origin_header.has_value()) return OriginVerdict::kNoOrigin;
  std::optional<Origin> origin = ParseOrigin(*origin_header);
  if (!origin) return OriginVerdict::kDenied;  // "null", or malformed
  if (host_header.has_value()) {
    std::optional<HostPort> host = SplitHostPort(*host_header);
    if (host && host->host == origin->host &&
        host->port.value_or(DefaultPort(origin->scheme)) == origin->port) {
      return OriginVerdict::kSameOrigin;
    }
  }
  if (cors_any_) return OriginVerdict::kAllowed;
  if (std::find(cors_origins_.begin(), cors_origins_.end(), *origin) != cors_origins_.end()) {
    return OriginVerdict::kAllowed;
  }
  return OriginVerdict::kDenied;
}

}  // namespace ringlm
