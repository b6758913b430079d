#include "client/connection.hpp"

#include "util/base64.hpp"

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
  req.proxy = config_.proxy_url;
  req.accept_compressed = !config_.disable_compression;
  req.tls = TlsFor(creds);
  return req;
}

namespace {

std::optional<int> RetryAfter(const HttpResponse& r) {
  auto it = r.headers.find("retry-after");
  if (it == r.headers.end()) return std::nullopt;
  try {
    std::size_t used = 0;
    int v = std::stoi(it->second, &used);
    if (used == it->second.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;  // HTTP-date form: ignored, like client-go
}

}  // namespace

HttpResponse Connection::Execute(const RequestSpec& spec) {
  bool refreshed_after_401 = false;
  for (int attempt = 1;; ++attempt) {
    limiter_.Acquire();
    Credentials creds = credentials_->Get();
    HttpResponse response;
    std::exception_ptr transport_error;
    RetryPolicy::Attempt info;
    info.number = attempt;
    info.idempotent = spec.idempotent;
    try {
      response = transport_->Send(BuildRequest(spec, creds)).get();
    } catch (const TlsError&) {
      throw;  // a certificate problem does not heal by retrying
    } catch (const TransportError& e) {
      transport_error = std::current_exception();
      info.request_may_have_been_sent = e.sent_request();
    }
    if (!transport_error) {
      if (response.status >= 200 && response.status < 300) return response;
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
      info.retry_after_seconds = RetryAfter(response);
    }
    auto wait = config_.retry.Decide(info, Random01());
    if (!wait) {
      if (transport_error) std::rethrow_exception(transport_error);
      ThrowApiError(response.status, response.body, spec.context, info.retry_after_seconds);
    }
    std::this_thread::sleep_for(*wait);
  }
}

std::shared_ptr<HttpStream> Connection::OpenStream(const RequestSpec& spec) {
  bool refreshed_after_401 = false;
  for (int attempt = 1;; ++attempt) {
    limiter_.Acquire();
    Credentials creds = credentials_->Get();
    HttpRequest req = BuildRequest(spec, creds);
    req.timeout = std::chrono::milliseconds(0);  // streams run as long as the server keeps them
    auto stream = transport_->Open(std::move(req));
    int status = 0;
    try {
      status = stream->WaitForHeaders(config_.connect_timeout + config_.request_timeout);
    } catch (const TlsError&) {
      throw;
    } catch (const TransportError& e) {
      RetryPolicy::Attempt info;
      info.number = attempt;
      info.idempotent = true;
      info.request_may_have_been_sent = e.sent_request();
      auto wait = config_.retry.Decide(info, Random01());
      if (!wait) throw;
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
    if (status == 429 || status >= 500) {
      RetryPolicy::Attempt info;
      info.number = attempt;
      info.idempotent = true;
      info.http_code = status;
      auto h = stream->headers();
      if (auto it = h.find("retry-after"); it != h.end()) {
        try {
          info.retry_after_seconds = std::stoi(it->second);
        } catch (const std::exception&) {
        }
      }
      if (auto wait = config_.retry.Decide(info, Random01())) {
        stream->Cancel();
        std::this_thread::sleep_for(*wait);
        continue;
      }
    }
    ThrowForStream(*stream, status, spec.context);
  }
}

void ThrowForStream(HttpStream& stream, int status, std::string_view context) {
  std::string body;
  // Error bodies are small; bound the wait so a misbehaving server cannot hang us.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = stream.Read(&body, std::chrono::milliseconds(200));
    if (r == HttpStream::ReadResult::kEnd || body.size() > 64 * 1024) break;
  }
  stream.Cancel();
  ThrowApiError(status, body, context);
}

// ---- watch framing ---------------------------------------------------------------------------

std::vector<WatchEvent> WatchDecoder::Feed(std::string_view bytes) {
  buffer_.append(bytes);
  std::vector<WatchEvent> events;
  std::size_t start = 0;
  while (true) {
    auto nl = buffer_.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view line(buffer_.data() + start, nl - start);
    start = nl + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      throw TransportError(
          fmt::format("watch stream: undecodable event ({} bytes)", line.size()), true);
    }
    WatchEvent ev;
    ev.type = ParseWatchEventType(j.value("type", ""));
    if (auto o = j.find("object"); o != j.end()) ev.object = std::move(*o);
    events.push_back(std::move(ev));
  }
  buffer_.erase(0, start);
  return events;
}

}  // namespace tfk8s::internal
