// Client::ForwardPort: a loopback listener whose every connection is one WebSocket to the pod's
// portforward subresource (v4.channel.k8s.io: stream 0 carries the data, stream 1 the errors;
// each first sends the port as two little-endian bytes).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>

#include "client/connection.hpp"
#include "client/exec.hpp"

namespace tfk8s {

namespace {

constexpr unsigned char kData = 0;
constexpr unsigned char kErrors = 1;
constexpr std::chrono::milliseconds kAcceptBackoff{50};

// Sends all of `data`; false when the peer is gone.
bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::string Errno(const char* what) {
  // The message of a std::error_code is thread-safe (std::strerror is not).
  return fmt::format("{}: {}", what, std::error_code(errno, std::generic_category()).message());
}

}  // namespace

struct PortForward::Impl {
  std::shared_ptr<internal::Connection> conn;
  std::string ns, pod;
  std::string path;  // of the portforward subresource, built (and checked) by ObjectPath
  int remote_port = 0;
  int local_port = 0;
  std::string context;
  int listen_fd = -1;
  int wake[2] = {-1, -1};  // a pipe: Close() writes to stop the accept loop
  std::thread acceptor;
  std::atomic<bool> closed{false};
  std::atomic<int> accepted{0};

  struct Forwarded {
    int fd = -1;
    std::thread thread;
    std::atomic<bool> done{false};
    std::mutex mu;
    std::unique_ptr<internal::WebSocket> ws;  // under mu
    bool closing = false;                     // under mu
  };
  std::mutex mu;
  std::list<Forwarded> forwarded;  // under mu
  std::string last_error;          // under mu

  ~Impl() { Close(); }

  void Fail(const std::string& why) {
    std::lock_guard lock(mu);
    last_error = why;
  }

  void Close() {
    if (closed.exchange(true)) return;
    if (wake[1] >= 0) {
      char byte = 1;
      while (::write(wake[1], &byte, 1) < 0 && errno == EINTR) {
      }
    }
    if (acceptor.joinable()) acceptor.join();
    std::list<Forwarded> ending;
    {
      std::lock_guard lock(mu);
      ending.splice(ending.end(), forwarded);
    }
    for (auto& f : ending) Stop(f);
    for (auto& f : ending) {
      if (f.thread.joinable()) f.thread.join();
      ::close(f.fd);
    }
    for (int fd : {listen_fd, wake[0], wake[1]}) {
      if (fd >= 0) ::close(fd);
    }
    listen_fd = wake[0] = wake[1] = -1;
  }

  static void Stop(Forwarded& f) {
    std::lock_guard lock(f.mu);
    f.closing = true;
    ::shutdown(f.fd, SHUT_RDWR);
    if (f.ws) f.ws->Close();
  }

  // Joins the threads of connections that ended.
  void Reap() {
    std::list<Forwarded> ended;
    {
      std::lock_guard lock(mu);
      for (auto it = forwarded.begin(); it != forwarded.end();) {
        auto next = std::next(it);
        if (it->done) ended.splice(ended.end(), forwarded, it);
        it = next;
      }
    }
    for (auto& f : ended) {
      f.thread.join();
      ::close(f.fd);
    }
  }

  void AcceptLoop() {
    while (!closed) {
      pollfd fds[2] = {{listen_fd, POLLIN, 0}, {wake[0], POLLIN, 0}};
      int n = ::poll(fds, 2, 1000);
      Reap();
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || (fds[1].revents & POLLIN) != 0 || closed) return;
      if ((fds[0].revents & POLLIN) == 0) continue;
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        // Out of descriptors and the like: do not spin on a listener that stays readable.
        if (errno != EINTR && errno != EAGAIN) std::this_thread::sleep_for(kAcceptBackoff);
        continue;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ++accepted;
      std::lock_guard lock(mu);
      Forwarded& f = forwarded.emplace_back();
      f.fd = fd;
      f.thread = std::thread([this, &f] {
        Serve(f);
        f.done = true;
      });
    }
  }

  // A WebSocket to the pod's port, after the two port announcements (data, errors): the
  // kubelet then dials the port and bytes flow.
  std::unique_ptr<internal::WebSocket> OpenStream() const {
    internal::RequestSpec spec;
    spec.path = path;
    spec.context = context;
    auto ws = conn->OpenWebSocket(spec, {internal::kV4Protocol});
    std::string message;
    for (unsigned char channel : {kData, kErrors}) {
      auto got = ws->Receive(&message, std::chrono::seconds(30));
      if (got != internal::WebSocket::ReceiveResult::kMessage) {
        if (auto error = ws->error()) std::rethrow_exception(error);
        throw TransportError(context + ": the server closed the stream before the port", true);
      }
      int port = internal::PortPrefix(message, channel, context);
      if (port != remote_port) {
        throw TransportError(
            fmt::format("{}: the server announced port {}, not {}", context, port, remote_port),
            true);
      }
    }
    return ws;
  }

  // One connection: a stream to the pod's port, bytes both ways until either side ends.
  void Serve(Forwarded& f) {
    try {
      auto ws = OpenStream();
      {
        std::lock_guard lock(f.mu);
        if (f.closing) return ws->Close();
        f.ws = std::move(ws);
      }
      internal::WebSocket& socket = *f.ws;
      std::string message;
      std::thread upstream([&] {
        constexpr std::size_t kChunk = 64u << 10;
        while (true) {
          std::string out(1 + kChunk, static_cast<char>(kData));  // stream byte, then data
          ssize_t n = ::recv(f.fd, out.data() + 1, kChunk, 0);
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) break;
          out.resize(1 + static_cast<std::size_t>(n));
          try {
            socket.Send(std::move(out));
          } catch (const Error&) {
            break;
          }
        }
        socket.Close();  // the local side ended: end the pod side
      });
      std::string errors;
      while (true) {
        auto got = socket.Receive(&message, std::chrono::seconds(60));
        if (got == internal::WebSocket::ReceiveResult::kTimeout) continue;
        if (got == internal::WebSocket::ReceiveResult::kClosed) break;
        if (message.empty()) continue;
        std::string_view data(message);
        data.remove_prefix(1);
        if (static_cast<unsigned char>(message[0]) == kData) {
          if (!SendAll(f.fd, data)) break;
        } else if (static_cast<unsigned char>(message[0]) == kErrors) {
          errors.append(data);
        }
      }
      socket.Close();
      ::shutdown(f.fd, SHUT_RDWR);  // ends the upstream thread's recv
      upstream.join();
      if (!errors.empty()) {
        // What the kubelet said (e.g. nothing listens on the port) explains the end better
        // than how the connection then broke.
        Fail(fmt::format("{}: {}", context, errors));
      } else if (auto error = socket.error()) {
        std::rethrow_exception(error);
      }
    } catch (const std::exception& e) {
      Fail(e.what());
      ::shutdown(f.fd, SHUT_RDWR);
    }
  }
};

PortForward::PortForward(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PortForward::PortForward(PortForward&&) noexcept = default;
PortForward& PortForward::operator=(PortForward&&) noexcept = default;
PortForward::~PortForward() = default;

int PortForward::local_port() const { return impl_->local_port; }
int PortForward::remote_port() const { return impl_->remote_port; }
const std::string& PortForward::pod() const { return impl_->pod; }
const std::string& PortForward::namespace_() const { return impl_->ns; }
bool PortForward::is_open() const { return impl_ && !impl_->closed; }
int PortForward::connections() const { return impl_->accepted; }
std::string PortForward::last_error() const {
  std::lock_guard lock(impl_->mu);
  return impl_->last_error;
}
void PortForward::Close() {
  if (impl_) impl_->Close();
}

PortForward Client::ForwardPort(std::string_view ns, std::string_view pod, int remote_port,
                                const PortForwardOptions& options) {
  const std::string n = ns.empty() ? default_namespace() : std::string(ns);
  if (remote_port < 1 || remote_port > 65535) {
    throw ValidationError("remote_port", std::to_string(remote_port), "must be in 1-65535");
  }
  if (options.local_port < 0 || options.local_port > 65535) {
    throw ValidationError("local_port", std::to_string(options.local_port),
                          "must be in 0-65535 (0: any free port)");
  }
  // The one path builder checks the namespace and pod name (a ValidationError, nothing sent);
  // every connection then opens exactly this path.
  std::string path = internal::PodsType().ObjectPath(n, pod, "portforward") +
                     fmt::format("?ports={}", remote_port);
  // Like kubectl: only a running pod can be forwarded to (its name may be reused later by a
  // new pod of a StatefulSet; each connection then reaches whichever pod has the name).
  Json object = Get(internal::PodsType(), n, pod);
  std::string phase = object.value(Json::json_pointer("/status/phase"), std::string());
  if (phase != "Running") {
    throw Conflict(ErrorKind::kConflict,
                   fmt::format("port-forward to pod {}/{}: the pod is {}, not Running", n, pod,
                               phase.empty() ? "without a phase" : phase));
  }

  auto impl = std::make_unique<PortForward::Impl>();
  impl->conn = conn_;
  impl->ns = n;
  impl->pod = std::string(pod);
  impl->path = std::move(path);
  impl->remote_port = remote_port;
  impl->context = fmt::format("port-forward to pod {}/{} port {}", n, pod, remote_port);
  impl->listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (impl->listen_fd < 0) throw TransportError(impl->context + ": " + Errno("socket"), false);
  int one = 1;
  ::setsockopt(impl->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(options.local_port));
  if (::bind(impl->listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw TransportError(
        fmt::format("{}: {} (127.0.0.1:{})", impl->context, Errno("bind"), options.local_port),
        false);
  }
  if (::listen(impl->listen_fd, 64) != 0) {
    throw TransportError(impl->context + ": " + Errno("listen"), false);
  }
  socklen_t len = sizeof addr;
  ::getsockname(impl->listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  impl->local_port = ntohs(addr.sin_port);
  if (::pipe2(impl->wake, O_CLOEXEC) != 0) {
    throw TransportError(impl->context + ": " + Errno("pipe"), false);
  }
  if (options.verify) {
    // One stream opened and closed: the API server reached the kubelet's streaming server
    // with these credentials (pods/portforward allowed), before anyone relies on the port.
    impl->OpenStream()->Close();
  }
  impl->acceptor = std::thread([raw = impl.get()] { raw->AcceptLoop(); });
  return PortForward(std::move(impl));
}

}  // namespace tfk8s
