#pragma once
// A loopback fault proxy for the fault suite (tests/integration/test_faults.cpp): it sits on
// 127.0.0.1 in front of the local cluster's real kube-apiserver and injects faults on command.
//
// Why it terminates TLS instead of relaying TCP: half of the faults are HTTP-level. A 429 with
// Retry-After must be an HTTP answer, and "cut the response after N bytes of its body" needs to
// know where the body starts; through a TCP relay both sides would only see TLS records. So the
// proxy is a small HTTP/1.1 man in the middle:
//   client --TLS (the apiserver's own serving certificate, so the client checks it against the
//   cluster CA exactly as it checks the apiserver)--> proxy --TLS (verified against the cluster
//   CA, name 127.0.0.1)--> kube-apiserver.
// It offers no ALPN, so the client falls back from HTTP/2 to HTTP/1.1 (libcurl's 2TLS mode), and
// it forwards one request per connection ("Connection: close" upstream and to the client): each
// request is its own TCP connection, so "the live connections" are exactly the requests in
// flight (watches included) and resetting one never affects another. What the proxy does not
// cover, HTTP/2 multiplexing, the apiserver-restart scenarios cover: they talk to the apiserver
// directly.
//
// Faults (each thread-safe, callable while requests are in flight):
//   - pass-through (the default);
//   - ResetAll(): RST (SO_LINGER 0) every live client connection now;
//   - CutNextResponse(match, n): the next response to a matching request is forwarded up to n
//     bytes of its body (chunk framing included), then the client connection is RST;
//   - SetBlackHole(true): new requests are read and never answered (nor forwarded), live
//     responses stop flowing; the client's own timeouts must end them;
//   - Answer429(n, retry_after): the next n requests get "429" + "Retry-After: <s>" from the
//     proxy without reaching the apiserver;
//   - Pause()/Resume(): requests wait (not forwarded) and responses stop flowing until Resume().
//
// Bounded: one accept thread and one thread per connection, each polling its sockets at 100 ms
// and the stop flag; the destructor resets every connection and joins every thread. Writing to a
// peer that is gone must not kill the test binary, so the constructor ignores SIGPIPE
// process-wide (test code only; libcurl already runs with CURLOPT_NOSIGNAL).

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tfk8s::itest {

class FaultProxy {
 public:
  /// Where the apiserver is and what the proxy presents.
  struct Options {
    std::string upstream_host = "127.0.0.1";
    int upstream_port = 0;
    std::string ca_file;    ///< The cluster CA: verifies the apiserver.
    std::string cert_file;  ///< Serving certificate (PEM) valid for 127.0.0.1.
    std::string key_file;   ///< Its key.
  };
  /// One request as the proxy saw it.
  struct Request {
    std::string method;
    std::string target;  ///< Path and query.
  };
  /// What the proxy did so far.
  struct Stats {
    int connections = 0;  ///< Accepted TCP connections.
    int forwarded = 0;    ///< Requests sent to the apiserver.
    std::map<std::string, int> forwarded_by_method;
    int answered_429 = 0;     ///< Requests answered 429 by the proxy itself.
    int cut = 0;              ///< Responses cut by CutNextResponse.
    int reset = 0;            ///< Connections reset by ResetAll.
    int black_holed = 0;      ///< Requests swallowed by the black hole.
    int upstream_failed = 0;  ///< Requests whose apiserver connection failed.
  };
  using Match = std::function<bool(const Request&)>;

  explicit FaultProxy(Options options);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  /// "https://127.0.0.1:<port>".
  [[nodiscard]] std::string url() const;

  /// Resets every live client connection and waits (bounded, 5 s) until their threads have
  /// done it. Returns how many were reset.
  int ResetAll();
  /// Arms a one-shot cut: the next response to a request matching `match` is reset after
  /// `body_bytes` bytes of its body.
  void CutNextResponse(Match match, std::size_t body_bytes);
  /// Turns the black hole on or off.
  void SetBlackHole(bool on);
  /// The next `n` requests are answered 429 with `Retry-After: retry_after_seconds`.
  void Answer429(int n, int retry_after_seconds = 1);
  /// Holds requests and responses until Resume().
  void Pause();
  void Resume();

  [[nodiscard]] Stats stats() const;
  /// Every request forwarded to the apiserver, in order.
  [[nodiscard]] std::vector<Request> forwarded() const;

 private:
  struct Conn;
  struct Tls;
  void AcceptLoop();
  void Serve(Conn& conn);
  void Reap(bool all);

  Options options_;
  std::unique_ptr<Tls> tls_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> black_hole_{false};
  std::atomic<bool> paused_{false};
  std::thread accept_thread_;

  mutable std::mutex mu_;  // guards everything below
  std::vector<std::shared_ptr<Conn>> conns_;
  Stats stats_;
  std::vector<Request> forwarded_;
  int pending_429_ = 0;
  int retry_after_ = 1;
  Match cut_match_;
  std::size_t cut_bytes_ = 0;
};

}  // namespace tfk8s::itest
