#include "tfk8s/error.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <array>
#include <string_view>
#include <utility>

#include "util/json_parse.hpp"

namespace tfk8s {

std::string_view ToString(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kValidation:
      return "ValidationError";
    case ErrorKind::kConfig:
      return "ConfigError";
    case ErrorKind::kTransport:
      return "TransportError";
    case ErrorKind::kTls:
      return "TlsError";
    case ErrorKind::kCancelled:
      return "Cancelled";
    case ErrorKind::kBadRequest:
      return "BadRequest";
    case ErrorKind::kUnauthorized:
      return "Unauthorized";
    case ErrorKind::kForbidden:
      return "Forbidden";
    case ErrorKind::kQuotaExceeded:
      return "QuotaExceeded";
    case ErrorKind::kNotFound:
      return "NotFound";
    case ErrorKind::kMethodNotAllowed:
      return "MethodNotAllowed";
    case ErrorKind::kAlreadyExists:
      return "AlreadyExists";
    case ErrorKind::kConflict:
      return "Conflict";
    case ErrorKind::kGone:
      return "Gone";
    case ErrorKind::kInvalid:
      return "Invalid";
    case ErrorKind::kTooManyRequests:
      return "TooManyRequests";
    case ErrorKind::kTimeout:
      return "Timeout";
    case ErrorKind::kServerError:
      return "ServerError";
    case ErrorKind::kWorkloadFailed:
      return "WorkloadFailed";
    case ErrorKind::kUnknown:
      return "Unknown";
  }
  return "Unknown";
}

Error::Error(ErrorKind kind, std::string what, int http_code, std::string reason,
             std::string server_message, std::vector<StatusCause> causes)
    : std::runtime_error(what),
      what_(std::move(what)),
      kind_(kind),
      http_code_(http_code),
      reason_(std::move(reason)),
      server_message_(std::move(server_message)),
      causes_(std::move(causes)) {}

void Error::set_attempts(int n) {
  if (n <= attempts_) return;
  static constexpr std::string_view kSuffix = " attempts)";
  // Replace an earlier suffix rather than stacking them.
  if (attempts_ > 1) {
    auto at = what_.rfind(" (after ");
    if (at != std::string::npos) what_.erase(at);
  }
  attempts_ = n;
  what_ += fmt::format(" (after {}{}", n, kSuffix);
}

namespace {

// The value as it appears in a message: control characters, quotes and backslashes escaped, so
// a hostile value (a newline, say) cannot break the one-line message or forge another line.
std::string QuoteForMessage(std::string_view value) {
  std::string out;
  out.reserve(value.size() + 2);
  out.push_back('"');
  for (unsigned char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace

ValidationError::ValidationError(std::string field, std::string value, std::string why)
    : Error(ErrorKind::kValidation,
            fmt::format("invalid {} {}: {}", field, QuoteForMessage(value), why), 0, "Invalid", why,
            {StatusCause{"FieldValueInvalid", why, field}}),
      field_(std::move(field)),
      value_(std::move(value)) {}

ConfigError::ConfigError(std::string source, std::string field, std::string why)
    : Error(ErrorKind::kConfig, field.empty() ? fmt::format("{}: {}", source, why)
                                              : fmt::format("{}: {}: {}", source, field, why)),
      source_(std::move(source)),
      field_(std::move(field)) {}

TransportError::TransportError(std::string what, bool sent_request, ErrorKind kind)
    : Error(kind, std::move(what)), sent_request_(sent_request) {}

DecodeError::DecodeError(std::string what, std::string field)
    : TransportError(std::move(what), /*sent_request=*/true), field_(std::move(field)) {}

ResponseTooLarge::ResponseTooLarge(std::string what, std::string limit_name,
                                   std::size_t limit_bytes)
    : TransportError(std::move(what), /*sent_request=*/true),
      limit_name_(std::move(limit_name)),
      limit_bytes_(limit_bytes) {}

TlsError::TlsError(std::string what)
    : TransportError(std::move(what), /*sent_request=*/false, ErrorKind::kTls) {}

CancelledError::CancelledError(std::string what) : Error(ErrorKind::kCancelled, std::move(what)) {}

QuotaExceeded::QuotaExceeded(std::string what, std::string reason, std::string server_message,
                             std::vector<StatusCause> causes, std::vector<std::string> resources)
    : Forbidden(ErrorKind::kQuotaExceeded, std::move(what), 403, std::move(reason),
                std::move(server_message), std::move(causes)),
      resources_(std::move(resources)) {}

namespace {

// Trims ASCII whitespace and trailing punctuation that separates list items.
std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == ',')) {
    s.remove_suffix(1);
  }
  return s;
}

// The apiserver's quota admission message lists "limited: a=1,b=2" last (older servers) or
// "requested: a=1, used: a=0, limited: a=1". We take the names from "limited:" when present,
// else from "requested:", since those are exactly the resources that did not fit.
std::vector<std::string> NamesAfter(std::string_view message, std::string_view marker) {
  std::vector<std::string> names;
  auto pos = message.find(marker);
  if (pos == std::string_view::npos) return names;
  std::string_view rest = message.substr(pos + marker.size());
  // The list ends at the next "label:" section (", used:", ", limited:") or the end.
  for (std::string_view stop : {", used:", ", limited:", ", requested:"}) {
    auto s = rest.find(stop);
    if (s != std::string_view::npos) rest = rest.substr(0, s);
  }
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view item = Trim(rest.substr(0, comma));
    auto eq = item.find('=');
    if (eq != std::string_view::npos) {
      std::string name(Trim(item.substr(0, eq)));
      if (!name.empty()) names.push_back(std::move(name));
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return names;
}

ErrorKind KindFor(int http_code, std::string_view reason) {
  if (reason == "AlreadyExists") return ErrorKind::kAlreadyExists;
  if (reason == "Expired" || reason == "Gone") return ErrorKind::kGone;
  switch (http_code) {
    case 400:
      return ErrorKind::kBadRequest;
    case 401:
      return ErrorKind::kUnauthorized;
    case 403:
      return ErrorKind::kForbidden;
    case 404:
      return ErrorKind::kNotFound;
    case 405:
      return ErrorKind::kMethodNotAllowed;
    case 409:
      return ErrorKind::kConflict;
    case 410:
      return ErrorKind::kGone;
    case 422:
      return ErrorKind::kInvalid;
    case 429:
      return ErrorKind::kTooManyRequests;
    case 504:
      return ErrorKind::kTimeout;
    default:
      break;
  }
  if (reason == "Timeout" || reason == "ServerTimeout") return ErrorKind::kTimeout;
  if (http_code >= 500) return ErrorKind::kServerError;
  return ErrorKind::kUnknown;
}

template <typename T>
std::exception_ptr Make(ErrorKind kind, std::string what, int code, std::string reason,
                        std::string message, std::vector<StatusCause> causes,
                        std::optional<int> retry_after) {
  T error(kind, std::move(what), code, std::move(reason), std::move(message), std::move(causes));
  error.set_retry_after_seconds(retry_after);
  return std::make_exception_ptr(std::move(error));
}

}  // namespace

std::vector<std::string> ParseQuotaExceededResources(std::string_view message) {
  if (message.find("exceeded quota") == std::string_view::npos) return {};
  auto names = NamesAfter(message, "limited: ");
  if (names.empty()) names = NamesAfter(message, "requested: ");
  return names;
}

std::pair<ErrorKind, std::string> DescribeError(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  } catch (const std::exception& e) {
    return {ErrorKind::kUnknown, e.what()};
  } catch (...) {
    return {ErrorKind::kUnknown, "unknown error"};
  }
}

std::exception_ptr MakeApiError(int http_code, std::string_view body, std::string_view context,
                                std::optional<int> retry_after_seconds) {
  std::string reason;
  std::string message;
  std::vector<StatusCause> causes;
  bool is_status = false;
  try {
    // Too deep is handled like text that is not JSON: the raw body (truncated) is the message.
    auto j = internal::ParseJson(body, context);
    if (j.is_object() && j.value("kind", "") == "Status") {
      is_status = true;
      reason = j.value("reason", "");
      message = j.value("message", "");
      if (auto d = j.find("details"); d != j.end() && d->is_object()) {
        if (auto c = d->find("causes"); c != d->end() && c->is_array()) {
          for (const auto& cause : *c) {
            if (!cause.is_object()) continue;
            causes.push_back(StatusCause{cause.value("reason", ""), cause.value("message", ""),
                                         cause.value("field", "")});
          }
        }
        if (!retry_after_seconds) {
          if (auto r = d->find("retryAfterSeconds"); r != d->end() && r->is_number_integer()) {
            retry_after_seconds = r->get<int>();
          }
        }
      }
      if (auto code = j.find("code");
          code != j.end() && code->is_number_integer() && http_code == 0) {
        http_code = code->get<int>();
      }
    }
  } catch (const nlohmann::json::exception&) {
    // A field of an unexpected type (value() on a number and the like).
  } catch (const DecodeError&) {
    // Nested too deeply (ParseJson); not JSON at all gives a discarded value above instead.
    // Proxies, load balancers and some server paths answer with plain text or HTML.
  }
  if (!is_status) {
    constexpr std::size_t kMaxBody = 512;
    message = std::string(body.substr(0, kMaxBody));
    if (body.size() > kMaxBody) message += "…";
  }

  ErrorKind kind = KindFor(http_code, reason);
  std::string what =
      fmt::format("{}: {} ({}{}{})", context, message.empty() ? "no message" : message, http_code,
                  reason.empty() ? "" : " ", reason);
  for (const auto& cause : causes) {
    if (!cause.field.empty()) what += fmt::format("; {}: {}", cause.field, cause.message);
  }

  if (kind == ErrorKind::kForbidden && message.find("exceeded quota") != std::string::npos) {
    QuotaExceeded error(std::move(what), std::move(reason), message, std::move(causes),
                        ParseQuotaExceededResources(message));
    error.set_retry_after_seconds(retry_after_seconds);
    return std::make_exception_ptr(std::move(error));
  }

  auto ra = retry_after_seconds;
  switch (kind) {
    case ErrorKind::kBadRequest:
      return Make<BadRequest>(kind, what, http_code, reason, message, causes, ra);
    case ErrorKind::kUnauthorized:
      return Make<Unauthorized>(kind, what, http_code, reason, message, causes, ra);
    case ErrorKind::kForbidden:
      return Make<Forbidden>(kind, what, http_code, reason, message, causes, ra);
    case ErrorKind::kNotFound:
      return Make<NotFound>(kind, what, http_code, reason, message, causes, ra);
    case ErrorKind::kMethodNotAllowed:
      return Make<MethodNotAllowed>(kind, what, http_code, reason, message, causes, ra);
    case ErrorKind::kAlreadyExists:
      return Make<AlreadyExists>(kind, what, http_code, reason, message, causes, ra);
    case ErrorKind::kConflict:
      return Make<Conflict>(kind, what, http_code, reason, message, causes, ra);
    case ErrorKind::kGone:
      return Make<Gone>(kind, what, http_code, reason, message, causes, ra);
    case ErrorKind::kInvalid:
      return Make<Invalid>(kind, what, http_code, reason, message, causes, ra);
    case ErrorKind::kTooManyRequests:
      return Make<TooManyRequests>(kind, what, http_code, reason, message, causes, ra);
    case ErrorKind::kTimeout:
      return Make<Timeout>(kind, what, http_code, reason, message, causes, ra);
    case ErrorKind::kServerError:
      return Make<ServerError>(kind, what, http_code, reason, message, causes, ra);
    default:
      return Make<ApiError>(kind, what, http_code, reason, message, causes, ra);
  }
}

void ThrowApiError(int http_code, std::string_view body, std::string_view context,
                   std::optional<int> retry_after_seconds) {
  std::rethrow_exception(MakeApiError(http_code, body, context, retry_after_seconds));
}

}  // namespace tfk8s
