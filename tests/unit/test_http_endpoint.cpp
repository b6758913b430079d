// The controller's probe and metrics port (controller/http_endpoint.hpp) on 127.0.0.1: answers
// GET and HEAD by path, 404 / 405 / 400, a request head too large (431) or too slow (408),
// a failing handler (500 without its message), and Stop() ending it.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "controller/http_endpoint.hpp"
#include "tfk8s/error.hpp"

using namespace tfk8s;
using namespace tfk8s::internal;

namespace {

// Sends `request` (optionally in two parts with a pause) and reads the answer to the end.
std::string Exchange(int port, const std::string& request, const std::string& more = "",
                     std::chrono::milliseconds pause = std::chrono::milliseconds(0)) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  if (pause.count() > 0) std::this_thread::sleep_for(pause);
  if (!more.empty()) ::send(fd, more.data(), more.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

std::unique_ptr<HttpEndpoint> Endpoint(
    std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  std::map<std::string, HttpEndpoint::Handler> handlers;
  handlers["/metrics"] = [] {
    return HttpAnswer{200, "text/plain; version=0.0.4; charset=utf-8", "m 1\n"};
  };
  handlers["/healthz"] = [] { return HttpAnswer{200, "text/plain", "ok\n"}; };
  handlers["/readyz"] = [] { return HttpAnswer{503, "text/plain", "not synced\n"}; };
  handlers["/boom"] = []() -> HttpAnswer { throw std::runtime_error("secret detail"); };
  return std::make_unique<HttpEndpoint>("127.0.0.1", 0, std::move(handlers), timeout);
}

}  // namespace

TEST_CASE("http endpoint: GET and HEAD by path, with the handler's status and type") {
  auto e = Endpoint();
  REQUIRE(e->port() > 0);
  CHECK(Exchange(e->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n") ==
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
        "Content-Length: 4\r\nConnection: close\r\n\r\nm 1\n");
  CHECK(Exchange(e->port(), "HEAD /healthz HTTP/1.1\r\n\r\n") ==
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
        "Connection: close\r\n\r\n");
  CHECK(Exchange(e->port(), "GET /readyz?verbose HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 503 ", 0) == 0);
  CHECK(Exchange(e->port(), "GET /nope HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404 ", 0) == 0);
  CHECK(Exchange(e->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
            .rfind("HTTP/1.1 405 ", 0) == 0);
  CHECK(Exchange(e->port(), "hello\r\n\r\n").rfind("HTTP/1.1 400 ", 0) == 0);
  std::string failed = Exchange(e->port(), "GET /boom HTTP/1.1\r\n\r\n");
  CHECK(failed.rfind("HTTP/1.1 500 ", 0) == 0);
  CHECK(failed.find("secret detail") == std::string::npos);
  // A request head in two parts is read whole.
  CHECK(Exchange(e->port(), "GET /healthz HT", "TP/1.1\r\n\r\n", std::chrono::milliseconds(50))
            .rfind("HTTP/1.1 200 ", 0) == 0);
}

TEST_CASE("http endpoint: a head too large or too slow is answered and the next request served") {
  auto e = Endpoint(std::chrono::milliseconds(300));
  std::string big = "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(10000, 'a') + "\r\n\r\n";
  CHECK(Exchange(e->port(), big).rfind("HTTP/1.1 431 ", 0) == 0);
  // A client that never finishes its head holds the port for the read timeout, not longer.
  CHECK(Exchange(e->port(), "GET /metrics HTTP/1.1\r\n").rfind("HTTP/1.1 408 ", 0) == 0);
  CHECK(Exchange(e->port(), "GET /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200 ", 0) == 0);
}

TEST_CASE("http endpoint: Stop ends it, and a port in use is a clear error") {
  auto e = Endpoint();
  int port = e->port();
  CHECK_THROWS_AS(HttpEndpoint("127.0.0.1", port, {}), TransportError);
  CHECK_THROWS_AS(HttpEndpoint("not-an-address", 0, {}), TransportError);
  e->Stop();
  e.reset();
  HttpEndpoint again("127.0.0.1", port, {});  // the port is free again
  CHECK(again.port() == port);
}
