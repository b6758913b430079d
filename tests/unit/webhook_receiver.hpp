#pragma once
// A tiny HTTP/1.1 server on 127.0.0.1 (a free port) that records POSTed bodies: the loopback
// webhook of the ScheduledJob alert tests (unit and integration). One thread, POSIX sockets,
// every wait bounded, stopped by the destructor.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tfk8s::testing {

class WebhookReceiver {
 public:
  /// `statuses`: the answers to the first requests, in order; 200 afterwards.
  /// `delay`: how long to wait before answering each request (to provoke client timeouts).
  explicit WebhookReceiver(std::vector<int> statuses = {},
                           std::chrono::milliseconds delay = std::chrono::milliseconds(0))
      : statuses_(statuses.begin(), statuses.end()), delay_(delay) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket() failed");
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;  // the kernel picks a free port
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd_, 16) != 0) {
      ::close(fd_);
      throw std::runtime_error("bind/listen on 127.0.0.1 failed");
    }
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }

  ~WebhookReceiver() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }

  WebhookReceiver(const WebhookReceiver&) = delete;
  WebhookReceiver& operator=(const WebhookReceiver&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path = "/alerts") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  /// Bodies of the requests answered with 2xx.
  std::vector<std::string> accepted() const {
    std::lock_guard lock(mu_);
    return accepted_;
  }
  /// Every request received (whatever the answer).
  int requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  /// Header block of the last request.
  std::string last_headers() const {
    std::lock_guard lock(mu_);
    return last_headers_;
  }
  /// Every answer from now on carries a body of `bytes` bytes (declared in Content-Length and
  /// sent until the client stops reading): a receiver that answers at length.
  void AnswerWithBody(std::size_t bytes) {
    std::lock_guard lock(mu_);
    answer_bytes_ = bytes;
  }
  /// Answer body bytes the client accepted from the socket (the kernel's buffers included).
  std::size_t answer_bytes_sent() const {
    std::lock_guard lock(mu_);
    return answer_bytes_sent_;
  }
  /// Waits until `n` bodies were accepted.
  bool WaitForAccepted(std::size_t n, std::chrono::milliseconds limit) const {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return accepted_.size() >= n; });
  }

 private:
  void Loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int conn = ::accept(fd_, nullptr, nullptr);
      if (conn < 0) continue;
      Serve(conn);
      ::close(conn);
    }
  }

  // Reads until `pred(buffer)` or 5 s pass.
  template <typename Pred>
  bool ReadUntil(int conn, std::string* buffer, Pred pred) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    char chunk[4096];
    while (!pred(*buffer)) {
      if (stop_ || std::chrono::steady_clock::now() > deadline) return false;
      pollfd p{conn, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      ssize_t n = ::recv(conn, chunk, sizeof(chunk), 0);
      if (n <= 0) return false;
      buffer->append(chunk, static_cast<std::size_t>(n));
    }
    return true;
  }

  void Serve(int conn) {
    std::string buffer;
    if (!ReadUntil(conn, &buffer,
                   [](const std::string& b) { return b.find("\r\n\r\n") != std::string::npos; })) {
      return;
    }
    std::size_t header_end = buffer.find("\r\n\r\n") + 4;
    std::string headers = buffer.substr(0, header_end);
    std::string lower = headers;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::size_t length = 0;
    if (auto at = lower.find("content-length:"); at != std::string::npos) {
      length = std::strtoul(lower.c_str() + at + 15, nullptr, 10);
    }
    if (lower.find("expect: 100-continue") != std::string::npos) {
      const char* cont = "HTTP/1.1 100 Continue\r\n\r\n";
      ::send(conn, cont, std::char_traits<char>::length(cont), MSG_NOSIGNAL);
    }
    if (!ReadUntil(conn, &buffer,
                   [&](const std::string& b) { return b.size() >= header_end + length; })) {
      return;
    }
    std::string body = buffer.substr(header_end, length);
    int status = 200;
    {
      std::lock_guard lock(mu_);
      ++requests_;
      last_headers_ = headers;
      if (!statuses_.empty()) {
        status = statuses_.front();
        statuses_.pop_front();
      }
    }
    auto until = std::chrono::steady_clock::now() + delay_;
    while (!stop_ && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::size_t answer_bytes = 0;
    {
      std::lock_guard lock(mu_);
      answer_bytes = answer_bytes_;
    }
    std::string response = "HTTP/1.1 " + std::to_string(status) +
                           " Status\r\nContent-Length: " + std::to_string(answer_bytes) +
                           "\r\nConnection: close\r\n\r\n";
    // Recorded before the answer goes out, as a real receiver stores an alert before it says
    // 2xx: the sender may return (and a test look) as soon as it has the status line.
    if (status >= 200 && status < 300) {
      std::lock_guard lock(mu_);
      accepted_.push_back(std::move(body));
      cv_.notify_all();
    }
    ::send(conn, response.data(), response.size(), MSG_NOSIGNAL);
    SendBody(conn, answer_bytes);
  }

  // Sends `bytes` bytes until done, the client is gone or stops reading for 2 s.
  void SendBody(int conn, std::size_t bytes) {
    timeval limit{2, 0};
    ::setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
    const std::string chunk(64 * 1024, 'x');
    while (bytes > 0 && !stop_) {
      ssize_t n = ::send(conn, chunk.data(), std::min(bytes, chunk.size()), MSG_NOSIGNAL);
      if (n <= 0) return;
      bytes -= static_cast<std::size_t>(n);
      std::lock_guard lock(mu_);
      answer_bytes_sent_ += static_cast<std::size_t>(n);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::deque<int> statuses_;
  std::chrono::milliseconds delay_;
  std::vector<std::string> accepted_;
  int requests_ = 0;
  std::string last_headers_;
  std::size_t answer_bytes_ = 0;
  std::size_t answer_bytes_sent_ = 0;
  std::thread thread_;
};

}  // namespace tfk8s::testing
