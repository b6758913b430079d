// The loopback fault proxy (see fault_proxy.hpp for what it does and why it terminates TLS).
#include "fault_proxy.hpp"

#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <stdexcept>
#include <string_view>

namespace tfk8s::itest {

namespace {

using Clock = std::chrono::steady_clock;
using SslPtr = std::unique_ptr<SSL, decltype(&SSL_free)>;
using CtxPtr = std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)>;

// Every blocking socket call returns after this long, so each thread notices stop/reset flags.
constexpr int kPollMs = 100;

void SetTimeouts(int fd) {
  timeval tv{0, kPollMs * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// Closes with an RST instead of a FIN: what a crashed peer or a middlebox reset looks like.
void ResetSocket(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

// Waits (bounded) until what was written has left the socket, so the bytes before a cut reach
// the client before the RST does.
void Drain(int fd) {
  auto deadline = Clock::now() + std::chrono::milliseconds(300);
  int queued = 0;
  while (Clock::now() < deadline && ::ioctl(fd, SIOCOUTQ, &queued) == 0 && queued > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

enum class Io { kOk, kTimeout, kClosed };

Io ReadSome(SSL* ssl, std::string* out) {
  char buf[16384];
  ERR_clear_error();
  int n = SSL_read(ssl, buf, sizeof buf);
  if (n > 0) {
    out->append(buf, static_cast<std::size_t>(n));
    return Io::kOk;
  }
  int err = SSL_get_error(ssl, n);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return Io::kTimeout;
  return Io::kClosed;
}

bool WriteAll(SSL* ssl, std::string_view data, const std::function<bool()>& alive) {
  while (!data.empty()) {
    if (!alive()) return false;
    ERR_clear_error();
    int len = static_cast<int>(std::min<std::size_t>(data.size(), 16384));
    int n = SSL_write(ssl, data.data(), len);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    int err = SSL_get_error(ssl, n);
    if (err != SSL_ERROR_WANT_WRITE && err != SSL_ERROR_WANT_READ) return false;
  }
  return true;
}

bool Handshake(SSL* ssl, bool server, Clock::time_point deadline,
               const std::function<bool()>& alive) {
  while (true) {
    ERR_clear_error();
    int r = server ? SSL_accept(ssl) : SSL_connect(ssl);
    if (r == 1) return true;
    int err = SSL_get_error(ssl, r);
    if ((err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) || !alive() ||
        Clock::now() > deadline) {
      return false;
    }
  }
}

// True when the client closed its side (or the socket failed).
bool ClientGone(int fd, SSL* ssl) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
  std::string ignored;
  return ReadSome(ssl, &ignored) == Io::kClosed;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

[[noreturn]] void Fail(const std::string& what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "";
  if (e) ERR_error_string_n(e, buf, sizeof buf);
  throw std::runtime_error("fault proxy: " + what + (e ? std::string(": ") + buf : ""));
}

}  // namespace

struct FaultProxy::Tls {
  CtxPtr server{nullptr, SSL_CTX_free};
  CtxPtr client{nullptr, SSL_CTX_free};
};

struct FaultProxy::Conn {
  int fd = -1;
  std::atomic<bool> reset{false};
  std::atomic<bool> done{false};
  std::thread thread;
};

FaultProxy::FaultProxy(Options options) : options_(std::move(options)), tls_(new Tls) {
  std::signal(SIGPIPE, SIG_IGN);
  tls_->server.reset(SSL_CTX_new(TLS_server_method()));
  if (!tls_->server) Fail("SSL_CTX_new");
  SSL_CTX_set_min_proto_version(tls_->server.get(), TLS1_2_VERSION);
  SSL_CTX_set_mode(tls_->server.get(), SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(tls_->server.get(), options_.cert_file.c_str()) != 1) {
    Fail("cannot load the serving certificate " + options_.cert_file);
  }
  if (SSL_CTX_use_PrivateKey_file(tls_->server.get(), options_.key_file.c_str(),
                                  SSL_FILETYPE_PEM) != 1) {
    Fail("cannot load the serving key " + options_.key_file);
  }
  tls_->client.reset(SSL_CTX_new(TLS_client_method()));
  if (!tls_->client) Fail("SSL_CTX_new");
  SSL_CTX_set_min_proto_version(tls_->client.get(), TLS1_2_VERSION);
  SSL_CTX_set_mode(tls_->client.get(), SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_verify(tls_->client.get(), SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_load_verify_locations(tls_->client.get(), options_.ca_file.c_str(), nullptr) != 1) {
    Fail("cannot load the CA " + options_.ca_file);
  }
  static const unsigned char kHttp11[] = "\x08http/1.1";
  SSL_CTX_set_alpn_protos(tls_->client.get(), kHttp11, sizeof kHttp11 - 1);

  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("fault proxy: socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 128) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("fault proxy: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(addr.sin_port);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

FaultProxy::~FaultProxy() {
  stop_ = true;
  if (accept_thread_.joinable()) accept_thread_.join();
  Reap(/*all=*/true);
  ::close(listen_fd_);
}

std::string FaultProxy::url() const { return "https://127.0.0.1:" + std::to_string(port_); }

void FaultProxy::AcceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) > 0) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        auto conn = std::make_shared<Conn>();
        conn->fd = fd;
        std::lock_guard lock(mu_);
        ++stats_.connections;
        conn->thread = std::thread([this, conn] {
          Serve(*conn);
          conn->done = true;
        });
        conns_.push_back(std::move(conn));
      }
    }
    Reap(/*all=*/false);
  }
}

void FaultProxy::Reap(bool all) {
  std::vector<std::shared_ptr<Conn>> finished;
  {
    std::lock_guard lock(mu_);
    auto keep = std::partition(conns_.begin(), conns_.end(),
                               [all](const auto& c) { return !all && !c->done; });
    finished.assign(keep, conns_.end());
    conns_.erase(keep, conns_.end());
  }
  // Joined outside the lock: a finishing thread may still be updating the stats.
  for (auto& c : finished) c->thread.join();
}

int FaultProxy::ResetAll() {
  std::vector<std::shared_ptr<Conn>> targets;
  {
    std::lock_guard lock(mu_);
    for (auto& c : conns_) {
      if (!c->done) {
        c->reset = true;
        targets.push_back(c);
      }
    }
  }
  auto deadline = Clock::now() + std::chrono::seconds(5);
  for (auto& c : targets) {
    while (!c->done && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return static_cast<int>(targets.size());
}

void FaultProxy::CutNextResponse(Match match, std::size_t body_bytes) {
  std::lock_guard lock(mu_);
  cut_match_ = std::move(match);
  cut_bytes_ = body_bytes;
}

void FaultProxy::SetBlackHole(bool on) { black_hole_ = on; }

void FaultProxy::Answer429(int n, int retry_after_seconds) {
  std::lock_guard lock(mu_);
  pending_429_ = n;
  retry_after_ = retry_after_seconds;
}

void FaultProxy::Pause() { paused_ = true; }
void FaultProxy::Resume() { paused_ = false; }

FaultProxy::Stats FaultProxy::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::vector<FaultProxy::Request> FaultProxy::forwarded() const {
  std::lock_guard lock(mu_);
  return forwarded_;
}

void FaultProxy::Serve(Conn& c) {
  SetTimeouts(c.fd);
  const std::function<bool()> alive = [&] { return !stop_ && !c.reset; };
  SslPtr client(SSL_new(tls_->server.get()), SSL_free);
  int upstream_fd = -1;
  SslPtr upstream(nullptr, SSL_free);
  bool graceful = false;  // else the client connection ends with an RST
  auto finish = [&] {
    if (c.reset) {
      std::lock_guard lock(mu_);
      ++stats_.reset;
    }
    if (graceful && client) SSL_shutdown(client.get());
    client.reset();
    upstream.reset();
    if (upstream_fd >= 0) ::close(upstream_fd);
    if (graceful) {
      ::close(c.fd);
    } else {
      ResetSocket(c.fd);
    }
  };
  SSL_set_fd(client.get(), c.fd);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  if (!Handshake(client.get(), /*server=*/true, deadline, alive)) return finish();

  // The request: head, then Content-Length bytes of body (libcurl sends no chunked bodies).
  std::string in;
  std::size_t head_end;
  while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
    if (!alive() || Clock::now() > deadline) return finish();
    if (ReadSome(client.get(), &in) == Io::kClosed) return finish();
  }
  std::string head = in.substr(0, head_end);
  Request request;
  {
    auto sp1 = head.find(' ');
    auto sp2 = head.find(' ', sp1 + 1);
    request.method = head.substr(0, sp1);
    request.target = head.substr(sp1 + 1, sp2 - sp1 - 1);
  }
  std::size_t content_length = 0;
  std::string rewritten;
  {
    std::size_t pos = 0;
    bool first = true;
    while (pos <= head.size()) {
      auto eol = head.find("\r\n", pos);
      if (eol == std::string::npos) eol = head.size();
      std::string line = head.substr(pos, eol - pos);
      pos = eol + 2;
      std::string lower = Lower(line);
      if (!first && lower.rfind("connection:", 0) == 0) continue;  // replaced below
      if (lower.rfind("content-length:", 0) == 0) content_length = std::stoul(line.substr(15));
      rewritten += line + "\r\n";
      first = false;
    }
    rewritten += "Connection: close\r\n\r\n";
  }
  while (in.size() < head_end + 4 + content_length) {
    if (!alive() || Clock::now() > deadline) return finish();
    if (ReadSome(client.get(), &in) == Io::kClosed) return finish();
  }
  std::string body = in.substr(head_end + 4, content_length);

  while (paused_ && !black_hole_ && alive()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (black_hole_) {
    // Read, never answered: only the client's timeout (or the end of the test) ends it.
    {
      std::lock_guard lock(mu_);
      ++stats_.black_holed;
    }
    while (alive() && !ClientGone(c.fd, client.get())) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    graceful = alive();  // the client hung up
    return finish();
  }
  int retry_after = -1;
  {
    std::lock_guard lock(mu_);
    if (pending_429_ > 0) {
      --pending_429_;
      ++stats_.answered_429;
      retry_after = retry_after_;
    }
  }
  if (retry_after >= 0) {
    std::string status =
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
        R"("message":"the fault proxy: too many requests, please try again later",)"
        R"("reason":"TooManyRequests","details":{"retryAfterSeconds":)" +
        std::to_string(retry_after) + R"(},"code":429})";
    std::string answer =
        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
        "Retry-After: " +
        std::to_string(retry_after) + "\r\nContent-Length: " + std::to_string(status.size()) +
        "\r\nConnection: close\r\n\r\n" + status;
    graceful = WriteAll(client.get(), answer, alive);
    return finish();
  }

  // Forward to the apiserver.
  auto upstream_failed = [&] {
    std::lock_guard lock(mu_);
    ++stats_.upstream_failed;
  };
  upstream_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(options_.upstream_port));
  ::inet_pton(AF_INET, options_.upstream_host.c_str(), &addr.sin_addr);
  if (upstream_fd < 0 || ::connect(upstream_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr)) {
    upstream_failed();
    return finish();  // a dead backend behind a proxy: the client's connection is reset
  }
  SetTimeouts(upstream_fd);
  upstream.reset(SSL_new(tls_->client.get()));
  SSL_set_fd(upstream.get(), upstream_fd);
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(upstream.get()), options_.upstream_host.c_str());
  if (!Handshake(upstream.get(), /*server=*/false, Clock::now() + std::chrono::seconds(10),
                 alive)) {
    upstream_failed();
    return finish();
  }
  bool cut = false;
  std::size_t cut_at = 0;
  {
    std::lock_guard lock(mu_);
    ++stats_.forwarded;
    ++stats_.forwarded_by_method[request.method];
    forwarded_.push_back(request);
    if (cut_match_ && cut_match_(request)) {
      cut = true;
      cut_at = cut_bytes_;
      cut_match_ = nullptr;
    }
  }
  if (!WriteAll(upstream.get(), rewritten + body, alive)) return finish();

  // The response, until the apiserver closes it (it was asked to), a fault, or the client goes.
  std::string response_head;
  bool head_done = false;
  std::size_t body_seen = 0;
  std::string chunk;  // read from the apiserver, not forwarded yet
  while (alive()) {
    if (paused_ || black_hole_) {
      if (ClientGone(c.fd, client.get())) return finish();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (chunk.empty()) {
      Io r = ReadSome(upstream.get(), &chunk);
      if (r == Io::kClosed) {
        graceful = true;
        return finish();
      }
      if (r == Io::kTimeout) {
        if (ClientGone(c.fd, client.get())) return finish();
        continue;
      }
      // A fault switched on while the read was waiting: what came after it is held until the
      // fault is off again (the black hole must swallow an event written after SetBlackHole).
      if (paused_ || black_hole_) continue;
    }
    std::size_t body_in_chunk = chunk.size();
    if (!head_done) {
      response_head += chunk;
      auto end = response_head.find("\r\n\r\n");
      body_in_chunk = end == std::string::npos ? 0 : response_head.size() - (end + 4);
      head_done = end != std::string::npos;
    }
    std::string_view out = chunk;
    bool cut_now = cut && head_done && body_seen + body_in_chunk >= cut_at;
    if (cut_now) out = out.substr(0, chunk.size() - body_in_chunk + (cut_at - body_seen));
    body_seen += body_in_chunk;
    if (!WriteAll(client.get(), out, alive)) return finish();
    chunk.clear();
    if (cut_now) {
      {
        std::lock_guard lock(mu_);
        ++stats_.cut;
      }
      Drain(c.fd);
      return finish();
    }
  }
  return finish();
}

}  // namespace tfk8s::itest
