#pragma once
// Internal: what every copy of a Client shares — transport, credentials, rate limiter,
// discovery cache — and the one place where requests are sent, retried and mapped to errors.

#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "auth/credentials.hpp"
#include "http/transport.hpp"
#include "http/websocket.hpp"
#include "tfk8s/client.hpp"

namespace tfk8s::internal {

/// Token bucket (client-go semantics: starts full with `burst` tokens, refills at qps).
class RateLimiter {
 public:
  explicit RateLimiter(RateLimit limit);
  /// Blocks until a token is available. No-op when qps <= 0.
  void Acquire();
  /// For tests: how long Acquire() would wait now, taking the token if it is free.
  std::chrono::nanoseconds Reserve(std::chrono::steady_clock::time_point now);

 private:
  RateLimit limit_;
  std::mutex mu_;
  double tokens_;
  std::chrono::steady_clock::time_point last_;
};

/// Builds "?a=b&c=d" with percent-encoding.
class Query {
 public:
  Query& Add(std::string_view key, std::string_view value);
  Query& AddIf(bool condition, std::string_view key, std::string_view value);
  [[nodiscard]] std::string str() const;

 private:
  std::string text_;
};

/// Percent-encodes a query component (RFC 3986 unreserved characters kept).
std::string UrlEncode(std::string_view text);

/// A request to send through Connection::Execute.
struct RequestSpec {
  std::string method = "GET";
  std::string path;  ///< Path and query, e.g. "/api/v1/pods?limit=5".
  std::string body;
  std::string content_type;  ///< For bodies.
  std::string accept = "application/json";
  bool idempotent = false;  ///< Reads: may be retried after 5xx / connection failures.
  std::string context;      ///< For error messages, e.g. "get pods default/web-0".
  std::chrono::milliseconds timeout{-1};  ///< -1: the config's request_timeout; 0: none.
};

class Connection {
 public:
  Connection(ClientConfig config, std::shared_ptr<HttpTransport> transport);

  /// Sends with authentication, rate limiting and retries; returns a 2xx response or throws the
  /// typed error (ApiError subclasses, TransportError, TlsError, ConfigError).
  HttpResponse Execute(const RequestSpec& spec);
  /// Opens a stream (watch, follow logs); throws the typed error for a non-2xx answer.
  std::shared_ptr<HttpStream> OpenStream(const RequestSpec& spec);

  /// Opens a WebSocket to `spec.path` (a GET upgrade) offering `protocols`, authenticated like
  /// every request (a 401 refreshes the credentials once), rate limited, never retried
  /// otherwise. Throws the typed error of a refused upgrade.
  std::unique_ptr<WebSocket> OpenWebSocket(const RequestSpec& spec,
                                           const std::vector<std::string>& protocols);

  const ClientConfig& config() const { return config_; }
  RateLimiter& rate_limiter() { return limiter_; }
  /// A uniform random number in [0,1) (thread-safe).
  double Random01();

  // Discovery cache.
  std::mutex discovery_mu;
  std::map<std::string, std::vector<ResourceType>> resources_by_group_version;
  // Group-version fetches in flight (run without discovery_mu; concurrent callers share one).
  std::map<std::string, std::shared_future<std::vector<ResourceType>>> discovery_fetches;
  std::uint64_t discovery_generation = 0;  // bumped by InvalidateDiscovery
  std::map<std::string, std::vector<std::string>> versions_by_group;  // preferred first
  bool groups_loaded = false;

 private:
  HttpRequest BuildRequest(const RequestSpec& spec, const Credentials& creds);
  std::shared_ptr<const TlsSettings> TlsFor(const Credentials& creds);

  ClientConfig config_;
  std::shared_ptr<HttpTransport> transport_;
  std::shared_ptr<CredentialProvider> credentials_;
  RateLimiter limiter_;
  std::mutex mu_;
  std::mt19937_64 rng_;
  std::shared_ptr<const TlsSettings> tls_;
  std::uint64_t tls_generation_ = ~0ull;
};

/// Reads a whole non-2xx stream body and throws the typed error for it.
[[noreturn]] void ThrowForStream(HttpStream& stream, int status, std::string_view context);

/// Splits a watch body into events: newline-delimited JSON objects, tolerant of any chunking.
class WatchDecoder {
 public:
  /// `max_line`: largest event in bytes (0: no limit); a larger one throws ResponseTooLarge.
  explicit WatchDecoder(std::size_t max_line = 0) : max_line_(max_line) {}
  /// Appends bytes; returns the complete events they finish, in order. Throws DecodeError
  /// for a line that is not a JSON object or whose type/object fields have the wrong JSON type,
  /// and ResponseTooLarge for an event longer than the limit.
  std::vector<WatchEvent> Feed(std::string_view bytes);
  /// Bytes of an incomplete trailing event.
  [[nodiscard]] std::size_t pending() const { return buffer_.size(); }

 private:
  std::string buffer_;
  std::size_t max_line_ = 0;
};

}  // namespace tfk8s::internal
