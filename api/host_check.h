// Who may talk to the API from a browser: the Host header check against DNS
// rebinding, the Origin check against cross-site requests (blind CSRF), and
// the CORS answers for origins the operator allowed.
//
// Why both checks: a web page on evil.example that rebinds its name to
// 127.0.0.1 reaches the API as "Host: evil.example:8080", which the Host
// check refuses. A page that posts straight to http://127.0.0.1:8080 sends a
// valid Host, but its browser adds "Origin: https://evil.example", which the
// Origin check refuses unless that origin was allowed. Clients that are not
// browsers (curl, SDKs) send no Origin and are unaffected.
#ifndef RINGLM_API_HOST_CHECK_H_
#define RINGLM_API_HOST_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace ringlm {

// True for "localhost", 127.0.0.0/8, "::1" (with or without brackets).
bool IsLoopbackHost(std::string_view host);
// True for the addresses that bind every interface: "0.0.0.0", "::", "".
bool IsWildcardHost(std::string_view host);

// The warning to log when the API is bound to `host` (ApiOptions.host), or ""
// when there is nothing to warn about (a loopback address, or an API key).
std::string ExposureWarning(std::string_view host, bool has_api_key);

// The host part of a Host header value or of a host list entry, normalized:
// lower case, brackets and port removed, one trailing '.' dropped
// ("[::1]:8080" -> "::1", "Example.COM.:80" -> "example.com"). A bare IPv6
// address ("::1") is taken whole. nullopt when the port is not a number or the
// value is empty or malformed.
std::optional<std::string> HostOfHeader(std::string_view value);

// Decides on the Host and Origin headers of each request.
//
// Contract: built once from the options at ApiServer::Start, then immutable,
// so any number of HTTP threads may call it concurrently. It reads the
// machine's interface addresses (getifaddrs) and host name once, at
// construction, and only when bound to a wildcard address; addresses added
// later are not known until the next start (list them in allowed_hosts).
class HostCheck {
 public:
  // `bound_host`: ApiOptions.host. `allowed_hosts`: extra Host names or
  // addresses, any port ("*" accepts every Host, e.g. behind a proxy that
  // checks it). `cors_origins`: origins such as "https://app.example:8443"
  // whose pages may call the API ("*" = every origin; empty = CORS off).
  HostCheck(std::string_view bound_host, const std::vector<std::string>& allowed_hosts,
            const std::vector<std::string>& cors_origins);

  // Whether a request with this Host header value may be served: localhost,
  // 127.0.0.1, [::1], ::1, the bound host, the allowed hosts, and, when bound
  // to a wildcard, the machine's interface addresses and host name; any port.
  // An absent Host (HTTP/1.0) is allowed: pass nullopt.
  bool HostAllowed(std::optional<std::string_view> host_header) const;

  enum class OriginVerdict {
    kNoOrigin,    // no Origin header: not a cross-site browser request
    kSameOrigin,  // the page was served by this API (scheme/host/port of Host)
    kAllowed,     // a listed CORS origin: answer with CORS headers
    kDenied,      // any other origin, including "null": refuse with 403
  };
  // `origin`: the Origin header (nullopt when absent). `host_header`: the
  // request's Host header, for the same-origin test.
  OriginVerdict CheckOrigin(std::optional<std::string_view> origin,
                            std::optional<std::string_view> host_header) const;

  bool cors_enabled() const { return cors_any_ || !cors_origins_.empty(); }

 private:
  struct Origin {
    std::string scheme;
    std::string host;
    uint16_t port = 0;
    bool operator==(const Origin&) const = default;
  };
  static std::optional<Origin> ParseOrigin(std::string_view value);

  bool any_host_ = false;
  absl::flat_hash_set<std::string> hosts_;
  bool cors_any_ = false;
  std::vector<Origin> cors_origins_;
};

}  // namespace ringlm

#endif  // RINGLM_API_HOST_CHECK_H_
