#include "client/connection.hpp"

#include "util/base64.hpp"
#include "util/json_parse.hpp"

#include <fmt/format.h>

#include <thread>

namespace tfk8s::internal {

// ---- rate limiter ------------------------------------------------------------------------

RateLimiter::RateLimiter(RateLimit limit)
    : limit_(limit),
      tokens_(static_cast<double>(std::max(1, limit.burst))),
      last_(std::chrono::steady_clock::now()) {}

std::chrono::nanoseconds RateLimiter::Reserve(std::chrono::steady_clock::time_point now) {
  if (limit_.qps <= 0) return std::chrono::nanoseconds(0);
  std::lock_guard lock(mu_);
  double burst = static_cast<double>(std::max(1, limit_.burst));
  if (now > last_) {
    double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst, tokens_ + elapsed * limit_.qps);
    last_ = now;
  }
  // Taking a token may drive the balance negative: later callers queue behind us in order.
  tokens_ -= 1.0;
  if (tokens_ >= 0) return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(static_cast<std::int64_t>(-tokens_ / limit_.qps * 1e9));
}

void RateLimiter::Acquire() {
  auto wait = Reserve(std::chrono::steady_clock::now());
  if (wait.count() > 0) std::this_thread::sleep_for(wait);
}

// ---- query strings -------------------------------------------------------------------------

std::string UrlEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

Query& Query::Add(std::string_view key, std::string_view value) {
  text_ += text_.empty() ? '?' : '&';
  text_ += UrlEncode(key);
  text_ += '=';
  text_ += UrlEncode(value);
  return *this;
}

Query& Query::AddIf(bool condition, std::string_view key, std::string_view value) {
  if (condition) Add(key, value);
  return *this;
}

std::string Query::str() const { return text_; }

// ---- connection ----------------------------------------------------------------------------

Connection::Connection(ClientConfig config, std::shared_ptr<HttpTransport> transport)
    : config_(std::move(config)),
      transport_(std::move(transport)),
      limiter_(config_.rate_limit),
      rng_(std::random_device{}()) {
  config_.Validate();
  credentials_ = MakeCredentialProvider(config_);
}

double Connection::Random01() {
  std::lock_guard lock(mu_);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

std::shared_ptr<const TlsSettings> Connection::TlsFor(const Credentials& creds) {
  std::lock_guard lock(mu_);
  if (!tls_ || tls_generation_ != creds.generation) {
    auto tls = std::make_shared<TlsSettings>();
    tls->ca_pem = config_.ca_pem;
    tls->insecure_skip_verify = config_.insecure_skip_tls_verify;
    tls->tls_server_name = config_.tls_server_name;
    tls->client_cert_pem = creds.client_cert_pem;
    tls->client_key_pem = creds.client_key_pem;
    tls_ = std::move(tls);
    tls_generation_ = creds.generation;
  }
  return tls_;
}

HttpRequest Connection::BuildRequest(const RequestSpec& spec, const Credentials& creds) {
  HttpRequest req;
  req.method = spec.method;
  std::string server = config_.server;
  while (!server.empty() && server.back() == '/') server.pop_back();
  req.url = server + spec.path;
  req.headers.push_back("Accept: " + spec.accept);
  req.headers.push_back("User-Agent: " + config_.user_agent);
  if (!spec.content_type.empty()) req.headers.push_back("Content-Type: " + spec.content_type);
  if (!creds.bearer_token.empty()) {
    req.headers.push_back("Authorization: Bearer " + creds.bearer_token);
  } else if (!creds.username.empty()) {
    // Basic auth: rare, kept for completeness. The header value is never logged.
    req.headers.push_back("Authorization: Basic " +
                          internal::Base64Encode(creds.username + ":" + creds.password));
  }
  req.body = spec.body;
  req.timeout = spec.timeout.count() < 0 ? config_.request_timeout : spec.timeout;
  req.connect_timeout = std::min(config_.connect_timeout, std::chrono::milliseconds(30'000));
  req.tls_handshake_timeout = std::max(std::chrono::milliseconds(0), config_.tls_handshake_timeout);
  req.max_body_bytes = config_.max_response_bytes;
  req.proxy = config_.proxy_url;
  req.accept_compressed = !config_.disable_compression;
  req.tls = TlsFor(creds);
  return req;
}

namespace {

using SteadyClock = std::chrono::steady_clock;

std::optional<int> RetryAfter(const std::map<std::string, std::string>& headers) {
  auto it = headers.find("retry-after");
  if (it == headers.end()) return std::nullopt;
  try {
    std::size_t used = 0;
    int v = std::stoi(it->second, &used);
    if (used == it->second.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;  // HTTP-date form: ignored, like client-go
}

// Rethrows `error` (same dynamic type) with the number of attempts recorded in it.
[[noreturn]] void RethrowWithAttempts(std::exception_ptr error, int attempts) {
  try {
    std::rethrow_exception(std::move(error));
  } catch (Error& e) {
    e.set_attempts(attempts);
    throw;
  }
}

// The time left before `deadline`, or nullopt without one.
std::optional<std::chrono::milliseconds> TimeLeft(
    const std::optional<SteadyClock::time_point>& deadline) {
  if (!deadline) return std::nullopt;
  return std::max(
      std::chrono::milliseconds(0),
      std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - SteadyClock::now()));
}

}  // namespace

namespace {
// One attempt for ClientConfig::on_request (status 0: no answer).
void ObserveAttempt(const ClientConfig& config, const RequestSpec& spec,
                    SteadyClock::time_point start, int status, bool stream) noexcept {
  if (!config.on_request) return;
  RequestObservation o;
  o.method = spec.method;
  o.stream = stream;
  o.status = status;
  o.latency = SteadyClock::now() - start;
  try {
    config.on_request(o);
  } catch (...) {  // NOLINT(bugprone-empty-catch): an observer's failure must not fail the request
  }
}
}  // namespace

HttpResponse Connection::Execute(const RequestSpec& spec) {
  const std::chrono::milliseconds timeout =
      spec.timeout.count() < 0 ? config_.request_timeout : spec.timeout;
  std::optional<SteadyClock::time_point> deadline;
  std::exception_ptr last_error;
  bool refreshed_after_401 = false;
  for (int attempt = 1;; ++attempt) {
    limiter_.Acquire();  // every attempt, retries included, is paced by the rate limiter
    // client-go: the first attempt is throttled before the call's timeout starts, so a busy
    // client does not time out calls it has not sent yet.
    if (!deadline && timeout.count() > 0) deadline = SteadyClock::now() + timeout;
    if (last_error && deadline && SteadyClock::now() >= *deadline) {
      RethrowWithAttempts(last_error, attempt - 1);
    }
    Credentials creds = credentials_->Get();
    HttpRequest req = BuildRequest(spec, creds);
    if (auto left = TimeLeft(deadline)) {
      // One deadline for the whole call: each attempt gets what is left of it.
      req.timeout = std::max(std::chrono::milliseconds(1), *left);
    }
    HttpResponse response;
    std::exception_ptr transport_error;
    RetryPolicy::Attempt info;
    info.number = attempt;
    info.idempotent = spec.idempotent;
    const auto sent_at = SteadyClock::now();
    // Reports this attempt to on_request on every way out of the block below.
    struct Observe {
      const ClientConfig& config;
      const RequestSpec& spec;
      SteadyClock::time_point start;
      const HttpResponse& response;
      ~Observe() { ObserveAttempt(config, spec, start, response.status, false); }
    };
    try {
      Observe observe{config_, spec, sent_at, response};
      response = transport_->Send(std::move(req)).get();
    } catch (const TlsError&) {
      // A certificate problem does not heal by retrying.
      RethrowWithAttempts(std::current_exception(), attempt);
    } catch (const ResponseTooLarge&) {
      RethrowWithAttempts(std::current_exception(), attempt);  // the same answer again
    } catch (const TransportError& e) {
      transport_error = std::current_exception();
      info.request_may_have_been_sent = e.sent_request();
    } catch (const std::future_error&) {
      // Defence in depth: a transport that drops a request reports it as a typed error.
      RethrowWithAttempts(std::make_exception_ptr(CancelledError(
                              spec.context + ": cancelled: the client was shut down")),
                          attempt);
    }
    if (!transport_error) {
      if (response.status >= 200 && response.status < 300) {
        if (config_.max_response_bytes > 0 && response.body.size() > config_.max_response_bytes) {
          RethrowWithAttempts(
              std::make_exception_ptr(ResponseTooLarge(
                  fmt::format("{}: the response body is larger than max_response_bytes ({} "
                              "bytes)",
                              spec.context, config_.max_response_bytes),
                  "max_response_bytes", config_.max_response_bytes)),
              attempt);
        }
        return response;
      }
      if (response.status == 401 && !refreshed_after_401) {
        // The token may have rotated (token file, exec plugin): refresh once and try again.
        // A 401 is answered before any processing, so repeating a write is safe.
        refreshed_after_401 = true;
        credentials_->OnUnauthorized(creds);
        if (credentials_->Get().generation != creds.generation) {
          --attempt;
          continue;
        }
      }
      info.http_code = response.status;
      info.retry_after_seconds = RetryAfter(response.headers);
      last_error =
          MakeApiError(response.status, response.body, spec.context, info.retry_after_seconds);
    } else {
      last_error = transport_error;
    }
    info.time_left = TimeLeft(deadline);
    auto wait = config_.retry.Decide(info, Random01());
    if (!wait) RethrowWithAttempts(last_error, attempt);
    std::this_thread::sleep_for(*wait);
  }
}

std::unique_ptr<WebSocket> Connection::OpenWebSocket(const RequestSpec& spec,
                                                     const std::vector<std::string>& protocols) {
  if (!config_.proxy_url.empty()) {
    throw TransportError(
        fmt::format("{}: exec and port-forward do not go through a proxy (proxy_url is set); "
                    "they need a direct connection to the API server",
                    spec.context),
        false);
  }
  bool refreshed_after_401 = false;
  while (true) {
    limiter_.Acquire();
    Credentials creds = credentials_->Get();
    HttpRequest http = BuildRequest(spec, creds);
    WebSocketRequest req;
    req.url = std::move(http.url);
    for (auto& h : http.headers) {
      // Accept and Content-Type belong to plain requests; the upgrade sets its own headers.
      if (h.rfind("Authorization:", 0) == 0 || h.rfind("User-Agent:", 0) == 0) {
        req.headers.push_back(std::move(h));
      }
    }
    req.protocols = protocols;
    req.connect_timeout = http.connect_timeout;
    req.tls_handshake_timeout = http.tls_handshake_timeout;
    if (config_.request_timeout.count() > 0) req.upgrade_timeout = config_.request_timeout;
    req.tls = http.tls;
    req.context = spec.context;
    try {
      return internal::OpenWebSocket(req);
    } catch (const Unauthorized&) {
      if (refreshed_after_401) throw;
      refreshed_after_401 = true;
      credentials_->OnUnauthorized(creds);
      if (credentials_->Get().generation == creds.generation) throw;
    }
  }
}

std::shared_ptr<HttpStream> Connection::OpenStream(const RequestSpec& spec) {
  // Opening (until the response headers) is bounded like a call; the body then runs as long as
  // the server keeps it (bounded by the readers' idle timeouts).
  const std::chrono::milliseconds timeout = config_.request_timeout;
  std::optional<SteadyClock::time_point> deadline;
  std::exception_ptr last_error;
  bool refreshed_after_401 = false;
  for (int attempt = 1;; ++attempt) {
    limiter_.Acquire();
    if (!deadline && timeout.count() > 0) deadline = SteadyClock::now() + timeout;
    if (last_error && deadline && SteadyClock::now() >= *deadline) {
      RethrowWithAttempts(last_error, attempt - 1);
    }
    Credentials creds = credentials_->Get();
    HttpRequest req = BuildRequest(spec, creds);
    req.timeout = std::chrono::milliseconds(0);  // streams run as long as the server keeps them
    auto stream = transport_->Open(std::move(req));
    RetryPolicy::Attempt info;
    info.number = attempt;
    info.idempotent = spec.idempotent;
    int status = 0;
    const auto sent_at = SteadyClock::now();
    try {
      auto left = TimeLeft(deadline);
      status =
          stream->WaitForHeaders(left ? std::max(std::chrono::milliseconds(1), *left)
                                      : config_.connect_timeout + config_.tls_handshake_timeout);
      ObserveAttempt(config_, spec, sent_at, status, true);
    } catch (const TlsError&) {
      ObserveAttempt(config_, spec, sent_at, 0, true);
      stream->Cancel();
      RethrowWithAttempts(std::current_exception(), attempt);
    } catch (const TransportError& e) {
      ObserveAttempt(config_, spec, sent_at, 0, true);
      stream->Cancel();  // e.g. no headers in time: stop the transfer too
      last_error = std::current_exception();
      info.request_may_have_been_sent = e.sent_request();
      info.time_left = TimeLeft(deadline);
      auto wait = config_.retry.Decide(info, Random01());
      if (!wait) RethrowWithAttempts(last_error, attempt);
      std::this_thread::sleep_for(*wait);
      continue;
    }
    if (status >= 200 && status < 300) return stream;
    if (status == 401 && !refreshed_after_401) {
      refreshed_after_401 = true;
      stream->Cancel();
      credentials_->OnUnauthorized(creds);
      if (credentials_->Get().generation != creds.generation) {
        --attempt;
        continue;
      }
    }
    info.http_code = status;
    info.retry_after_seconds = RetryAfter(stream->headers());
    info.time_left = TimeLeft(deadline);
    if (auto wait = config_.retry.Decide(info, Random01())) {
      stream->Cancel();
      last_error = MakeApiError(status, "", spec.context, info.retry_after_seconds);
      std::this_thread::sleep_for(*wait);
      continue;
    }
    try {
      ThrowForStream(*stream, status, spec.context);
    } catch (Error& e) {
      e.set_attempts(attempt);
      e.set_retry_after_seconds(info.retry_after_seconds);
      throw;
    }
  }
}

void ThrowForStream(HttpStream& stream, int status, std::string_view context) {
  std::string body;
  // Error bodies are small; bound the wait so a misbehaving server cannot hang us.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = stream.Read(&body, std::chrono::milliseconds(200));
    if (r == HttpStream::ReadResult::kEnd || body.size() > std::size_t{64} * 1024) break;
  }
  stream.Cancel();
  ThrowApiError(status, body, context);
}

// ---- watch framing ---------------------------------------------------------------------------

std::vector<WatchEvent> WatchDecoder::Feed(std::string_view bytes) {
  buffer_.append(bytes);
  std::vector<WatchEvent> events;
  std::size_t start = 0;
  auto too_large = [this] {
    return ResponseTooLarge(
        fmt::format("watch stream: an event is larger than max_stream_line_bytes ({} bytes)",
                    max_line_),
        "max_stream_line_bytes", max_line_);
  };
  while (true) {
    auto nl = buffer_.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view line(buffer_.data() + start, nl - start);
    start = nl + 1;
    if (max_line_ > 0 && line.size() > max_line_) throw too_large();
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) continue;
    Json j = ParseJson(line, "watch stream: event");
    if (j.is_discarded() || !j.is_object()) {
      throw DecodeError(fmt::format("watch stream: undecodable event ({} bytes)", line.size()), "");
    }
    WatchEvent ev;
    if (auto t = j.find("type"); t != j.end()) {
      if (!t->is_string()) {
        throw DecodeError(
            fmt::format("watch stream: event field \"type\" is {}, not a string", t->type_name()),
            "type");
      }
      ev.type = ParseWatchEventType(t->get_ref<const std::string&>());
    }
    if (auto o = j.find("object"); o != j.end()) {
      if (!o->is_object()) {
        throw DecodeError(fmt::format("watch stream: event field \"object\" is {}, not an "
                                      "object",
                                      o->type_name()),
                          "object");
      }
      ev.object = std::move(*o);
    }
    events.push_back(std::move(ev));
  }
  buffer_.erase(0, start);
  // An incomplete event that is already over the limit will not become acceptable.
  if (max_line_ > 0 && buffer_.size() > max_line_) throw too_large();
  return events;
}

}  // namespace tfk8s::internal
