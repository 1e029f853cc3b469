// Bearer tokens (RFC 6750): the API key of the HTTP API and of the gRPC
// Generate call, and the /metrics token. One parser and one file rule for
// all of them.
#ifndef RINGLM_SECURITY_BEARER_TOKEN_H_
#define RINGLM_SECURITY_BEARER_TOKEN_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ringlm {

// True when the Authorization header value `header` is "Bearer <token>"
// with exactly `token`: the scheme in any case, then spaces or tabs, the
// token, optional trailing spaces or tabs. Compared in constant time. An
// empty `token` never matches.
bool BearerMatches(std::string_view header, std::string_view token);

// The token in the file at `path`, without surrounding whitespace; `what`
// names the file in messages ("metrics token file"). Refused, with the
// reason and never the contents, when the file is missing, not a regular
// file, accessible by group or others (as the cluster key: `chmod 600`),
// over 4 KiB, empty, or holds a byte a header cannot carry (outside
// '!'..'~').
absl::StatusOr<std::string> ReadBearerTokenFile(const std::string& path, const std::string& what);

}  // namespace ringlm

#endif  // RINGLM_SECURITY_BEARER_TOKEN_H_
