#include "api/api_error.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

constexpr char kParamUrl[] = "ringlm.api/param";
constexpr char kCodeUrl[] = "ringlm.api/code";
constexpr char kRetryAfterUrl[] = "ringlm.api/retry_after";

std::string Payload(const absl::Status& status, const char* url) {
  auto payload = status.GetPayload(url);
  return payload ? std::string(*payload) : std::string();
}

}  // namespace

absl::Status InvalidFieldError(std::string_view param, std::string_view message) {
  absl::Status status = absl::InvalidArgumentError(std::string(message));
  status.SetPayload(kParamUrl, absl::Cord(std::string(param)));
  return status;
}

absl::Status WithOpenAiCode(absl::Status status, std::string_view code, std::string_view param) {
  if (status.ok()) return status;
  status.SetPayload(kCodeUrl, absl::Cord(std::string(code)));
  if (!param.empty()) status.SetPayload(kParamUrl, absl::Cord(std::string(param)));
  return status;
}

absl::Status WithRetryAfter(absl::Status status, int seconds) {
  if (status.ok() || seconds <= 0) return status;
  status.SetPayload(kRetryAfterUrl, absl::Cord(std::to_string(seconds)));
  return status;
}

int RetryAfterSeconds(const absl::Status& status) {
  int seconds = 0;
  if (!absl::SimpleAtoi(Payload(status, kRetryAfterUrl), &seconds) || seconds < 0) return 0;
  return seconds;
}

std::string ErrorParam(const absl::Status& status) { return Payload(status, kParamUrl); }
std::string ErrorCode(const absl::Status& status) { return Payload(status, kCodeUrl); }

absl::Status ClientFacing(const absl::Status& status) {
  if (status.ok()) return status;
  absl::string_view message;
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
      message = "a node of the cluster stopped answering during the request; try again";
      break;
    case absl::StatusCode::kDeadlineExceeded:
      message = "the cluster made no progress on the request in time";
      break;
    case absl::StatusCode::kResourceExhausted:
      message = "the cluster ran out of capacity for the request";
      break;
    case absl::StatusCode::kCancelled:
      message = "the request was cancelled";
      break;
    default:
      message = "the cluster could not complete the request";
      break;
  }
  absl::Status out(status.code(), message);
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

HttpError ToHttpError(const absl::Status& status) {
  int http = 500;
  std::string type = "server_error";
  std::string code = ErrorCode(status);
  std::string default_code;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      http = 400;
      type = "invalid_request_error";
      break;
    case absl::StatusCode::kUnauthenticated:
      http = 401;
      type = "authentication_error";
      default_code = "invalid_api_key";
      break;
    case absl::StatusCode::kPermissionDenied:
      http = 403;
      type = "permission_error";
      break;
    case absl::StatusCode::kNotFound:
      http = 404;
      type = "invalid_request_error";
      default_code = "not_found";
      break;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
      http = 409;  // e.g. a model name taken, no memory left for a model
      type = "invalid_request_error";
      break;
    case absl::StatusCode::kOutOfRange:
      http = 413;
      type = "invalid_request_error";
      default_code = "request_too_large";
      break;
    case absl::StatusCode::kUnavailable:
      http = 503;
      default_code = "service_unavailable";
      break;
    case absl::StatusCode::kResourceExhausted:
      if (code == "rate_limit_exceeded") {
        http = 429;
        type = "requests";
      } else {
        http = 503;
        default_code = "server_overloaded";
      }
      break;
    case absl::StatusCode::kDeadlineExceeded:
      http = 504;
      default_code = "timeout";
      break;
    default:
      spdlog::error("api: unexpected error: {}", status.ToString());
      break;
  }
  if (code.empty()) code = default_code;
  const std::string param = ErrorParam(status);
  nlohmann::json error = {
      {"message", std::string(status.message())},
      {"type", type},
      {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
      {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)},
  };
  return HttpError{http,
                   nlohmann::json{{"error", error}}.dump(-1, ' ', false,
                                                         nlohmann::json::error_handler_t::replace),
                   RetryAfterSeconds(status)};
}

}  // namespace ringlm
