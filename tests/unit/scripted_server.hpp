#pragma once
// A scripted HTTP/1.1 server on 127.0.0.1 for transport fault tests: each accepted request is
// answered by a handler that returns raw response bytes (or drops the connection). Also acts
// as a minimal CONNECT proxy recorder. Bounded: it stops when the test ends.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tfk8s/client.hpp"

namespace tfk8s::testing {

/// A client configuration for a scripted server: its URL, a token sent over plain HTTP on
/// loopback, no rate limit, 5 s per request.
inline ClientConfig LoopbackConfig(const std::string& url) {
  ClientConfig c;
  c.server = url;
  c.token = "t0ken";
  c.allow_token_over_http = true;
  c.rate_limit.qps = 0;
  c.request_timeout = std::chrono::seconds(5);
  return c;
}

class ScriptedServer {
 public:
  /// What the handler sees.
  struct Request {
    std::string method;
    std::string target;
    std::string head;  ///< Request line and headers.
    std::string body;
  };
  /// Raw bytes to send back; an empty string closes the connection without answering. Bytes
  /// that start with HoldOpen() are sent (without that prefix) and the connection is then kept
  /// open, silent, until the server is destroyed (a stalled stream), while other connections
  /// are still served.
  using Handler = std::function<std::string(const Request&, int count)>;

  /// The prefix that keeps a connection open after the answer (see Handler).
  static const std::string& HoldOpen() {
    static const std::string kPrefix("\x01hold-open\x01");
    return kPrefix;
  }

  explicit ScriptedServer(Handler handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(fd_, 16);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (int c : held_) ::close(c);
    ::close(fd_);
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return count_; }
  std::vector<Request> seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }

  static std::string Response(int status, const std::string& body,
                              const std::string& extra_headers = "") {
    return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\n" +
           extra_headers + "Content-Length: " + std::to_string(body.size()) +
           "\r\nConnection: close\r\n\r\n" + body;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      if (Handle(c)) {
        held_.push_back(c);
      } else {
        ::close(c);
      }
    }
  }

  // Returns true when the connection is to be kept open.
  bool Handle(int c) {
    std::string data;
    char buf[4096];
    // Read the head, then Content-Length bytes of body (bounded by a short poll timeout).
    std::size_t head_end = std::string::npos;
    while (head_end == std::string::npos) {
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) return false;
      ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) return false;
      data.append(buf, static_cast<std::size_t>(n));
      head_end = data.find("\r\n\r\n");
    }
    Request r;
    r.head = data.substr(0, head_end);
    r.method = r.head.substr(0, r.head.find(' '));
    auto t0 = r.head.find(' ') + 1;
    r.target = r.head.substr(t0, r.head.find(' ', t0) - t0);
    std::size_t length = 0;
    auto cl = r.head.find("Content-Length: ");
    if (cl == std::string::npos) cl = r.head.find("content-length: ");
    if (cl != std::string::npos) length = std::stoul(r.head.substr(cl + 16));
    r.body = data.substr(head_end + 4);
    while (r.body.size() < length) {
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) break;
      ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) break;
      r.body.append(buf, static_cast<std::size_t>(n));
    }
    int count = ++count_;
    {
      std::lock_guard lock(mu_);
      seen_.push_back(r);
    }
    std::string answer = handler_(r, count);
    bool hold = answer.rfind(HoldOpen(), 0) == 0;
    if (hold) answer.erase(0, HoldOpen().size());
    if (!answer.empty()) (void)!::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
    return hold;
  }

  Handler handler_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> count_{0};
  mutable std::mutex mu_;
  std::vector<Request> seen_;
  std::vector<int> held_;  // connections kept open (server thread only, then the destructor)
  std::thread thread_;
};

}  // namespace tfk8s::testing
