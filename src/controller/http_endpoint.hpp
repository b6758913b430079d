#pragma once
// Internal: the controller's one port (issue #38) — /healthz, /readyz and /metrics over plain
// HTTP/1.1 for the kubelet's probes and Prometheus. A small server on purpose: GET only, one
// request per connection (Connection: close), a request head of at most 8 KiB read within a
// few seconds, one connection served at a time (probes and scrapes are rare and answered from
// memory), every wait bounded, stopped by Stop() or the destructor.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>

namespace tfk8s::internal {

/// What a handler answers.
struct HttpAnswer {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpEndpoint {
 public:
  using Handler = std::function<HttpAnswer()>;
  /// Listens on `address`:`port` (port 0: a free one, see port()); throws Error (kind
  /// kTransport) when it cannot. `handlers` by path ("/metrics"); other paths get 404.
  HttpEndpoint(const std::string& address, int port, std::map<std::string, Handler> handlers,
               std::chrono::milliseconds read_timeout = std::chrono::milliseconds(5000));
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  [[nodiscard]] int port() const { return port_; }
  /// Stops accepting and waits for the serving thread (at most one connection's timeout).
  void Stop();

 private:
  void Serve();
  void Answer(int fd);

  std::map<std::string, Handler> handlers_;
  std::chrono::milliseconds read_timeout_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

/// The request line's method and path of an HTTP request head ("GET /metrics HTTP/1.1 ..."),
/// or empty strings when it is not one (pure; exposed for tests).
std::pair<std::string, std::string> ParseRequestLine(const std::string& head);

}  // namespace tfk8s::internal
