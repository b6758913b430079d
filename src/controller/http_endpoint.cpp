// The controller's /healthz, /readyz and /metrics port (controller/http_endpoint.hpp).
#include "controller/http_endpoint.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include <fmt/format.h>

#include "tfk8s/error.hpp"

namespace tfk8s::internal {

namespace {

constexpr std::size_t kMaxHead = 8192;

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return status >= 500 ? "Server Error" : "Status";
  }
}

void SendAll(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away
    sent += static_cast<std::size_t>(n);
  }
}

void Reply(int fd, const HttpAnswer& a, bool head_only = false) {
  SendAll(fd, fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n"
                          "Connection: close\r\n\r\n{}",
                          a.status, Reason(a.status), a.content_type, a.body.size(),
                          head_only ? "" : a.body));
}

}  // namespace

std::pair<std::string, std::string> ParseRequestLine(const std::string& head) {
  auto end = head.find("\r\n");
  std::string line = head.substr(0, end);
  auto sp1 = line.find(' ');
  if (sp1 == std::string::npos) return {};
  auto sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.compare(sp2 + 1, 5, "HTTP/") != 0) return {};
  std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (path.empty() || path[0] != '/') return {};
  path = path.substr(0, path.find('?'));  // a query (Prometheus adds none) is ignored
  return {line.substr(0, sp1), path};
}

HttpEndpoint::HttpEndpoint(const std::string& address, int port,
                           std::map<std::string, Handler> handlers,
                           std::chrono::milliseconds read_timeout)
    : handlers_(std::move(handlers)), read_timeout_(read_timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(address.c_str(), service.c_str(), &hints, &found); rc != 0) {
    throw TransportError(
        fmt::format("cannot listen on {}:{}: {}", address, port, ::gai_strerror(rc)), false);
  }
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || ::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 16) != 0) {
    int e = errno;
    ::freeaddrinfo(found);
    if (fd >= 0) ::close(fd);
    throw TransportError(fmt::format("cannot listen on {}:{}: {}", address, port,
                                     std::error_code(e, std::generic_category()).message()),
                         false);
  }
  ::freeaddrinfo(found);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  listen_fd_ = fd;
  thread_ = std::thread([this] { Serve(); });
}

HttpEndpoint::~HttpEndpoint() { Stop(); }

void HttpEndpoint::Stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
}

void HttpEndpoint::Serve() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;  // wakes every 100 ms to see Stop()
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Answer(fd);
    // A lingering close: what the client still sends (the rest of a head too large) is read
    // and dropped for a moment, so that closing does not reset the connection before the
    // client has read the answer.
    ::shutdown(fd, SHUT_WR);
    char sink[4096];
    for (int drained = 0; drained < 16; ++drained) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0 || ::recv(fd, sink, sizeof(sink), 0) <= 0) break;
    }
    ::close(fd);
  }
}

void HttpEndpoint::Answer(int fd) {
  std::string head;
  const auto deadline = std::chrono::steady_clock::now() + read_timeout_;
  char buf[2048];
  while (head.find("\r\n\r\n") == std::string::npos) {
    if (head.size() > kMaxHead) return Reply(fd, {431, "text/plain", "request head too large\n"});
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0 ||
        stopping_.load()) {
      return Reply(fd, {408, "text/plain", "request not received in time\n"});
    }
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // closed before a whole request
    head.append(buf, static_cast<std::size_t>(n));
  }
  if (head.find("\r\n\r\n") > kMaxHead) {
    return Reply(fd, {431, "text/plain", "request head too large\n"});
  }
  auto [method, path] = ParseRequestLine(head);
  if (method.empty()) return Reply(fd, {400, "text/plain", "not an HTTP request\n"});
  if (method != "GET" && method != "HEAD") {
    return Reply(fd, {405, "text/plain", "only GET\n"});
  }
  auto handler = handlers_.find(path);
  if (handler == handlers_.end()) return Reply(fd, {404, "text/plain", "not found\n"});
  HttpAnswer answer;
  try {
    answer = handler->second();
  } catch (const std::exception&) {
    answer = {500, "text/plain", "the handler failed\n"};  // its message stays in the logs
  }
  Reply(fd, answer, method == "HEAD");
}

}  // namespace tfk8s::internal
