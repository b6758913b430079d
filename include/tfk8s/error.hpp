#pragma once
/// @file
/// The tfk8s error model: one exception hierarchy for everything the library reports.
/// See docs/adr/0001-error-model.md for why exceptions rather than StatusOr.

#include <cstddef>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfk8s {

/// What went wrong, as one enumerator per exception class (handy for switch statements and for
/// the Python bindings, which map each kind to one exception class).
enum class ErrorKind {
  kValidation,        ///< Client-side check failed before anything was sent.
  kConfig,            ///< Configuration could not be loaded or is inconsistent.
  kTransport,         ///< Connection, DNS, proxy or protocol failure (no HTTP status).
  kTls,               ///< TLS handshake or certificate verification failed.
  kCancelled,         ///< The operation was cancelled by the caller.
  kBadRequest,        ///< HTTP 400.
  kUnauthorized,      ///< HTTP 401.
  kForbidden,         ///< HTTP 403 other than quota.
  kQuotaExceeded,     ///< HTTP 403 "exceeded quota".
  kNotFound,          ///< HTTP 404.
  kMethodNotAllowed,  ///< HTTP 405.
  kAlreadyExists,     ///< HTTP 409, reason AlreadyExists.
  kConflict,          ///< HTTP 409, reason Conflict (stale resourceVersion and the like).
  kGone,              ///< HTTP 410 (resourceVersion too old: relist).
  kInvalid,           ///< HTTP 422.
  kTooManyRequests,   ///< HTTP 429.
  kTimeout,           ///< HTTP 504, reason Timeout, or a client-side deadline.
  kServerError,       ///< Any other 5xx.
  kWorkloadFailed,    ///< A workload failed or cannot start (TFCluster::Wait and the like).
  kUnknown,           ///< Any other status.
};

/// Stable name of a kind, e.g. "NotFound".
std::string_view ToString(ErrorKind kind);

/// One entry of a Kubernetes `Status.details.causes`.
struct StatusCause {
  std::string reason;   ///< e.g. "FieldValueInvalid".
  std::string message;  ///< Human-readable explanation.
  std::string field;    ///< Field path, e.g. "spec.replicas".
  bool operator==(const StatusCause&) const = default;
};

/// Base class of every tfk8s error.
class Error : public std::runtime_error {
 public:
  /// @param what the full, human-readable description (never contains secrets).
  Error(ErrorKind kind, std::string what, int http_code = 0, std::string reason = {},
        std::string server_message = {}, std::vector<StatusCause> causes = {});

  /// The full description; ends with " (after N attempts)" when the client tried N > 1 times.
  [[nodiscard]] const char* what() const noexcept override { return what_.c_str(); }

  /// The kind of the error.
  [[nodiscard]] ErrorKind kind() const noexcept { return kind_; }
  /// HTTP status code, 0 when no response was received.
  [[nodiscard]] int http_code() const noexcept { return http_code_; }
  /// Kubernetes `Status.reason` (e.g. "NotFound"), empty when unknown.
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }
  /// The server's `Status.message`, or the raw body for non-JSON responses (truncated).
  [[nodiscard]] const std::string& server_message() const noexcept { return server_message_; }
  /// Field causes from `Status.details.causes`.
  [[nodiscard]] const std::vector<StatusCause>& causes() const noexcept { return causes_; }
  /// Seconds the server asked us to wait (`Retry-After` or `details.retryAfterSeconds`).
  [[nodiscard]] std::optional<int> retry_after_seconds() const noexcept { return retry_after_; }
  /// Sets retry_after_seconds(); used by the client when building errors.
  void set_retry_after_seconds(std::optional<int> s) noexcept { retry_after_ = s; }
  /// How many times the client sent the request before giving up (1 when it was not retried;
  /// the error describes the last attempt).
  [[nodiscard]] int attempts() const noexcept { return attempts_; }
  /// Records the attempt count; for n > 1 what() gains the suffix " (after n attempts)".
  /// Used by the client's retry loop.
  void set_attempts(int n);

 private:
  std::string what_;
  int attempts_ = 1;
  ErrorKind kind_;
  int http_code_;
  std::string reason_;
  std::string server_message_;
  std::vector<StatusCause> causes_;
  std::optional<int> retry_after_;
};

/// A client-side check failed; nothing was sent to the server.
class ValidationError : public Error {
 public:
  /// @param field the offending field path (e.g. "spec.worker.replicas").
  /// @param value the offending value as text (never a secret).
  /// @param why   the rule that was broken.
  ValidationError(std::string field, std::string value, std::string why);
  /// Field path of the offending value.
  [[nodiscard]] const std::string& field() const noexcept { return field_; }
  /// The offending value as text.
  [[nodiscard]] const std::string& value() const noexcept { return value_; }

 private:
  std::string field_;
  std::string value_;
};

/// The configuration (kubeconfig, in-cluster files, exec plugin …) is missing or inconsistent.
class ConfigError : public Error {
 public:
  /// @param source the file or mechanism concerned (e.g. "/root/.kube/config").
  /// @param field  the field concerned (e.g. "users[admin].client-key-data"), may be empty.
  ConfigError(std::string source, std::string field, std::string why);
  /// The file or mechanism concerned.
  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  /// The field concerned, may be empty.
  [[nodiscard]] const std::string& field() const noexcept { return field_; }

 private:
  std::string source_;
  std::string field_;
};

/// No usable HTTP response: connection refused, DNS, proxy, reset, timeout before a response.
class TransportError : public Error {
 public:
  /// @param sent_request whether any request bytes may have reached the server.
  TransportError(std::string what, bool sent_request, ErrorKind kind = ErrorKind::kTransport);
  /// Whether the server may have seen the request (writes are then never retried).
  [[nodiscard]] bool sent_request() const noexcept { return sent_request_; }

 private:
  bool sent_request_;
};

/// A server answer could not be decoded: not JSON, or a field of the wrong JSON type (e.g. a
/// string where an object belongs). Replaces nlohmann::json exceptions at the decode boundary.
class DecodeError : public TransportError {
 public:
  /// @param field the JSON path concerned (e.g. "metadata.resourceVersion"), may be empty.
  DecodeError(std::string what, std::string field);
  /// The JSON path concerned, may be empty.
  [[nodiscard]] const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

/// A response body or a single watch/log line is larger than the configured limit
/// (ClientConfig::max_response_bytes / max_stream_line_bytes): the transfer was stopped
/// instead of buffering without bound. Not retried.
class ResponseTooLarge : public TransportError {
 public:
  /// @param limit_name the configuration field ("max_response_bytes" …).
  ResponseTooLarge(std::string what, std::string limit_name, std::size_t limit_bytes);
  /// The configuration field whose limit was exceeded.
  [[nodiscard]] const std::string& limit_name() const noexcept { return limit_name_; }
  /// The limit, in bytes.
  [[nodiscard]] std::size_t limit_bytes() const noexcept { return limit_bytes_; }

 private:
  std::string limit_name_;
  std::size_t limit_bytes_;
};

/// TLS handshake or certificate verification failed.
class TlsError : public TransportError {
 public:
  /// @param what description including the server address.
  explicit TlsError(std::string what);
};

/// The operation was cancelled (watch stopped, log stream closed by the caller).
class CancelledError : public Error {
 public:
  /// @param what what was cancelled.
  explicit CancelledError(std::string what);
};

/// Base of errors built from an HTTP response of the API server.
class ApiError : public Error {
 public:
  using Error::Error;
};

#define TFK8S_DECLARE_API_ERROR(Name)                                                   \
  /** API error: see ErrorKind. */                                                      \
  class Name : public ApiError { /* NOLINT(bugprone-macro-parentheses): a class name */ \
   public:                                                                              \
    using ApiError::ApiError;                                                           \
  };
TFK8S_DECLARE_API_ERROR(BadRequest)
TFK8S_DECLARE_API_ERROR(Unauthorized)
TFK8S_DECLARE_API_ERROR(Forbidden)
TFK8S_DECLARE_API_ERROR(NotFound)
TFK8S_DECLARE_API_ERROR(MethodNotAllowed)
TFK8S_DECLARE_API_ERROR(AlreadyExists)
TFK8S_DECLARE_API_ERROR(Conflict)
TFK8S_DECLARE_API_ERROR(Gone)
TFK8S_DECLARE_API_ERROR(Invalid)
TFK8S_DECLARE_API_ERROR(TooManyRequests)
TFK8S_DECLARE_API_ERROR(Timeout)
TFK8S_DECLARE_API_ERROR(ServerError)
#undef TFK8S_DECLARE_API_ERROR

/// A 403 caused by a ResourceQuota. A Forbidden, so `catch (Forbidden&)` sees it too.
class QuotaExceeded : public Forbidden {
 public:
  /// @param resources the quota resources named in the message (e.g. "requests.nvidia.com/gpu").
  QuotaExceeded(std::string what, std::string reason, std::string server_message,
                std::vector<StatusCause> causes, std::vector<std::string> resources);
  /// Resources that were exceeded, parsed from the server message.
  [[nodiscard]] const std::vector<std::string>& resources() const noexcept { return resources_; }

 private:
  std::vector<std::string> resources_;
};

/// Parses the resource names out of an apiserver "exceeded quota" message, e.g.
/// "exceeded quota: q, requested: requests.cpu=2, used: requests.cpu=0, limited: requests.cpu=1"
/// gives {"requests.cpu"}. Empty when the message is not a quota message.
std::vector<std::string> ParseQuotaExceededResources(std::string_view message);

/// What a stored exception says: a tfk8s::Error's kind() and what(); for any other
/// std::exception kUnknown and its what(); for anything else kUnknown and "unknown error".
/// For reports made after the fact (an informer's last_error(), a Fleet's OnError).
std::pair<ErrorKind, std::string> DescribeError(const std::exception_ptr& error);

/// Builds the typed error for an HTTP response (status code and body; the body may be a
/// Kubernetes `Status` object or anything else). `context` (e.g. "GET pods/foo") prefixes what().
/// Never throws; returns a heap-allocated exception wrapped in an exception_ptr.
std::exception_ptr MakeApiError(int http_code, std::string_view body, std::string_view context,
                                std::optional<int> retry_after_seconds = std::nullopt);

/// Throws the typed error MakeApiError() builds.
[[noreturn]] void ThrowApiError(int http_code, std::string_view body, std::string_view context,
                                std::optional<int> retry_after_seconds = std::nullopt);

}  // namespace tfk8s
