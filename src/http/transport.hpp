#pragma once
// Internal: the HTTP transport interface. Only src/http/ includes curl or OpenSSL; everything
// above talks to this interface, and unit tests substitute a fake.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tfk8s::internal {

/// The pieces of "scheme://host:port/path?query" (enough for the URLs this library builds): the
/// host keeps an IPv6 address's brackets; the port defaults from the scheme (80 for http, else
/// 443); `rest` is the path and query ("" when there is none).
struct UrlParts {
  std::string scheme, host, port, rest;
};
UrlParts SplitUrl(const std::string& url);

/// TLS material and checks for one request. Shared (immutable) between requests.
struct TlsSettings {
  std::string ca_pem;  ///< Empty: the system trust store.
  bool insecure_skip_verify = false;
  std::string tls_server_name;  ///< SNI and certificate name override.
  std::string client_cert_pem;  ///< Empty: no client certificate.
  std::string client_key_pem;
};

/// One HTTP request.
struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  ///< "Name: value" lines.
  std::string body;
  std::chrono::milliseconds timeout{0};               ///< Whole transfer; 0 = none (streams).
  std::chrono::milliseconds connect_timeout{30'000};  ///< TCP connect (DNS excluded).
  /// TLS handshake, from TCP connected to handshake done; 0: only the connect bound applies.
  std::chrono::milliseconds tls_handshake_timeout{10'000};
  /// Largest body Send() buffers (after decompression); 0: no limit. Streams are bounded by
  /// their readers (per line) instead.
  std::size_t max_body_bytes = 0;
  /// With max_body_bytes: keep that much of the body and end the transfer there, answering
  /// with the status and headers (HttpResponse::body_truncated) instead of ResponseTooLarge.
  /// For callers that judge an answer by its status alone (webhooks).
  bool truncate_body = false;
  std::string proxy;              ///< Empty: no proxy (environment ignored).
  bool accept_compressed = true;  ///< Ask for gzip/deflate/... (Accept-Encoding) and inflate.
  std::shared_ptr<const TlsSettings> tls;
};

/// A complete response. Header names are lower-case.
struct HttpResponse {
  int status = 0;
  int http_version = 0;  ///< 11 for HTTP/1.1, 20 for HTTP/2 (0 when unknown).
  std::map<std::string, std::string> headers;
  std::string body;
  bool body_truncated = false;  ///< Cut at max_body_bytes (HttpRequest::truncate_body).
};

/// A streamed response (watch, follow logs). Thread-safe; the transport fills it.
class HttpStream {
 public:
  /// Result of Read().
  enum class ReadResult { kData, kEnd, kTimeout };

  virtual ~HttpStream() = default;
  /// Blocks until the status line and headers arrived (or the stream failed: then rethrows the
  /// transport error). Returns the status code.
  virtual int WaitForHeaders(std::chrono::milliseconds timeout) = 0;
  /// Response headers (valid after WaitForHeaders).
  [[nodiscard]] virtual std::map<std::string, std::string> headers() const = 0;
  /// Appends available body bytes to *out. kEnd once the body is finished: then error() tells
  /// whether it ended cleanly.
  virtual ReadResult Read(std::string* out, std::chrono::milliseconds wait) = 0;
  /// The transport error that ended the stream, if any.
  [[nodiscard]] virtual std::exception_ptr error() const = 0;
  /// Aborts the transfer; Read() then returns kEnd. Safe from any thread, idempotent.
  virtual void Cancel() = 0;
};

/// Sends requests. Implementations are thread-safe and multiplex many requests at once.
class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  /// Sends a request; the future yields the response or throws TransportError / TlsError
  /// (ResponseTooLarge past max_body_bytes), or CancelledError when the transport is destroyed
  /// before the request completes.
  virtual std::future<HttpResponse> Send(HttpRequest request) = 0;
  /// Opens a streamed request.
  virtual std::shared_ptr<HttpStream> Open(HttpRequest request) = 0;
};

/// The libcurl transport: one multi handle driven by one thread, HTTP/2 multiplexing where
/// the server offers it, connection reuse, TCP keepalive, compressed responses accepted.
std::shared_ptr<HttpTransport> MakeCurlTransport();

/// A buffered stream that producers (transports, fakes) fill; used by the curl transport and
/// by unit tests.
class BufferedStream : public HttpStream {
 public:
  /// `on_cancel` runs once when Cancel() is called first; `on_drained` runs when the buffer
  /// falls under the low-water mark after the producer was told to pause.
  explicit BufferedStream(std::function<void()> on_cancel = {},
                          std::function<void()> on_drained = {});

  int WaitForHeaders(std::chrono::milliseconds timeout) override;
  [[nodiscard]] std::map<std::string, std::string> headers() const override;
  ReadResult Read(std::string* out, std::chrono::milliseconds wait) override;
  [[nodiscard]] std::exception_ptr error() const override;
  void Cancel() override;

  // Producer side.
  void SetHeaders(int status, std::map<std::string, std::string> headers);
  /// Returns false when the buffer is over the high-water mark: the producer should pause.
  bool Push(std::string_view data);
  void Finish(std::exception_ptr error);
  [[nodiscard]] bool cancelled() const;

  /// Buffer limits (bytes) for back-pressure.
  static constexpr std::size_t kHighWater = 8u << 20;
  static constexpr std::size_t kLowWater = 1u << 20;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int status_ = 0;
  bool has_headers_ = false;
  std::map<std::string, std::string> headers_;
  std::string buffer_;
  bool finished_ = false;
  bool cancelled_ = false;
  bool paused_ = false;
  std::exception_ptr error_;
  std::function<void()> on_cancel_;
  std::function<void()> on_drained_;
};

}  // namespace tfk8s::internal
