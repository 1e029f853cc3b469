// Errors at the HTTP edge. Inside the API everything is an absl::Status; the
// OpenAI error fields that have no absl equivalent (`param`, `code`) ride along
// as status payloads. ToHttpError is the one place that turns a status into an
// HTTP status and OpenAI's error JSON.
#ifndef RINGLM_API_API_ERROR_H_
#define RINGLM_API_API_ERROR_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace ringlm {

// InvalidArgument naming the offending request field, e.g.
// InvalidFieldError("temperature", "must be a number in [0, 2]").
absl::Status InvalidFieldError(std::string_view param, std::string_view message);

// Returns `status` with OpenAI's `code` (e.g. "context_length_exceeded",
// "model_not_found") and optionally `param` attached.
absl::Status WithOpenAiCode(absl::Status status, std::string_view code,
                            std::string_view param = {});

// Returns `status` with a hint for an HTTP Retry-After header (seconds > 0).
absl::Status WithRetryAfter(absl::Status status, int seconds);
// The attached hint in seconds; 0 when absent.
int RetryAfterSeconds(const absl::Status& status);

// The attached fields, or "" when absent.
std::string ErrorParam(const absl::Status& status);
std::string ErrorCode(const absl::Status& status);

struct HttpError {
  int http_status = 500;
  std::string body;     // {"error":{"message","type","param","code"}}
  int retry_after = 0;  // seconds for a Retry-After header; 0 = none
};

// The mapping (not OK statuses only):
//   InvalidArgument          400 invalid_request_error
//   Unauthenticated          401 authentication_error   (code invalid_api_key)
//   PermissionDenied         403 permission_error
//   NotFound                 404 invalid_request_error  (code model_not_found, or not_found)
//   OutOfRange               413 invalid_request_error  (code request_too_large): body too large
//   Unavailable              503 server_error           (code service_unavailable)
//   ResourceExhausted        503 server_error           (code server_overloaded), or
//                            429 requests               with code rate_limit_exceeded
//   (a hint attached with WithRetryAfter becomes retry_after on any status)
//   DeadlineExceeded         504 server_error           (code timeout)
//   anything else            500 server_error, logged
// `param` and `code` are JSON null when not attached (and no default applies).
HttpError ToHttpError(const absl::Status& status);

// What a client is told of an error that happened inside the cluster while
// its request ran: the same code and OpenAI fields, and a message that names
// no node, address or stage (those stay in the head's log).
absl::Status ClientFacing(const absl::Status& status);

}  // namespace ringlm

#endif  // RINGLM_API_API_ERROR_H_
