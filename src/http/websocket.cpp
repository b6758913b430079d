// The WebSocket client of the streaming subresources, on Boost.Beast.
//
// One io_context and one thread per socket. The handshake (resolve, connect, TLS, upgrade) runs
// on the caller's thread by driving the io_context with a deadline per step; afterwards the
// socket's own thread runs every operation on it (Beast allows one read and one write in flight,
// from one thread), and Receive / Send / Close hand messages over through queues. Reading pauses
// while the receive queue holds more than kHighWater bytes, so a slow reader bounds memory.
#include "http/websocket.hpp"

#include <fmt/format.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "tfk8s/error.hpp"

namespace tfk8s::internal {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using error_code = beast::error_code;

constexpr std::size_t kHighWater = 4u << 20;  // receive queue: pause reading above this
constexpr std::size_t kLowWater = 1u << 20;   // ... and resume below this
constexpr std::size_t kSendHighWater = 4u << 20;
constexpr std::size_t kMaxMessage = 64u << 20;  // largest message accepted from the server

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

bool IsIpAddress(const std::string& host) {
  error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// The host without IPv6 brackets.
std::string BareHost(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

std::string OpenSslErrors(const error_code& ec) {
  std::string what = ec.message();
  if (ec.category() == asio::error::get_ssl_category()) {
    char buf[256];
    ERR_error_string_n(static_cast<unsigned long>(ec.value()), buf, sizeof buf);
    what = buf;
  }
  return what;
}

// TLS settings → an OpenSSL context. Keys go to OpenSSL from memory; nothing touches the disk.
void ConfigureTls(ssl::context& ctx, const TlsSettings& tls, const std::string& where) {
  try {
    ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                    ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    if (tls.insecure_skip_verify) {
      ctx.set_verify_mode(ssl::verify_none);
    } else {
      ctx.set_verify_mode(ssl::verify_peer);
      if (tls.ca_pem.empty()) {
        ctx.set_default_verify_paths();
      } else {
        ctx.add_certificate_authority(asio::buffer(tls.ca_pem));  // only the given CA
      }
    }
    if (!tls.client_cert_pem.empty()) {
      ctx.use_certificate_chain(asio::buffer(tls.client_cert_pem));
      ctx.use_private_key(asio::buffer(tls.client_key_pem), ssl::context::pem);
    }
  } catch (const boost::system::system_error& e) {
    throw TlsError(
        fmt::format("TLS: {}: cannot use the TLS settings: {}", where, OpenSslErrors(e.code())));
  }
}

template <class NextLayer>
class BeastWebSocket final : public WebSocket {
 public:
  static constexpr bool kTls = !std::is_same_v<NextLayer, beast::tcp_stream>;

  explicit BeastWebSocket(const WebSocketRequest& request)
      : request_(request), where_(request.context) {
    if constexpr (kTls) {
      ctx_.emplace(ssl::context::tls_client);
      ConfigureTls(*ctx_, *request.tls, where_);
      ws_.emplace(ioc_, *ctx_);
    } else {
      ws_.emplace(ioc_);
    }
  }

  ~BeastWebSocket() override {
    Close();
    if (thread_.joinable()) thread_.join();
  }

  void Open() {
    const UrlParts url = SplitUrl(request_.url);
    const std::string host = BareHost(url.host);
    auto& lowest = beast::get_lowest_layer(*ws_);

    // Resolve and connect (one deadline for both, like the HTTP transport's connect bound).
    tcp::resolver resolver(ioc_);
    tcp::resolver::results_type endpoints;
    Step(
        request_.connect_timeout, "connect",
        [&](auto done) {
          resolver.async_resolve(host, url.port, [&, done](error_code ec, auto results) {
            if (ec) return done(ec);
            endpoints = results;
            lowest.async_connect(endpoints, [done](error_code ec2, auto) { done(ec2); });
          });
        },
        [&] {
          resolver.cancel();
          lowest.close();
        });
    lowest.socket().set_option(tcp::no_delay(true));

    if constexpr (kTls) {
      const std::string& name =
          request_.tls->tls_server_name.empty() ? host : request_.tls->tls_server_name;
      SSL* handle = ws_->next_layer().native_handle();
      if (!IsIpAddress(name)) SSL_set_tlsext_host_name(handle, name.c_str());
      if (!request_.tls->insecure_skip_verify) {
        X509_VERIFY_PARAM* param = SSL_get0_param(handle);
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        int ok = IsIpAddress(name) ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                                   : X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
        if (ok != 1) throw TlsError(fmt::format("TLS: {}: bad server name {:?}", where_, name));
      }
      Step(
          request_.tls_handshake_timeout, "TLS handshake",
          [&](auto done) { ws_->next_layer().async_handshake(ssl::stream_base::client, done); },
          [&] { lowest.close(); }, /*tls_step=*/true);
    }

    // The upgrade. Beast reads the whole answer, body included, when the server refuses.
    ws_->set_option(websocket::stream_base::decorator([this](websocket::request_type& req) {
      for (const auto& line : request_.headers) {
        auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        req.set(Trim(line.substr(0, colon)), Trim(line.substr(colon + 1)));
      }
      std::string offers;
      for (const auto& p : request_.protocols) offers += (offers.empty() ? "" : ", ") + p;
      if (!offers.empty()) req.set(http::field::sec_websocket_protocol, offers);
    }));
    ws_->read_message_max(kMaxMessage);
    websocket::response_type response;
    const std::string host_header =
        url.port == (kTls ? "443" : "80") ? url.host : url.host + ":" + url.port;
    std::string target = url.rest.empty() ? "/" : url.rest;
    error_code upgrade = Step(
        request_.upgrade_timeout, "upgrade",
        [&](auto done) { ws_->async_handshake(response, host_header, target, done); },
        [&] { lowest.close(); }, false, /*throw_on_error=*/false);
    if (upgrade) {
      if (upgrade == websocket::error::upgrade_declined && response.result_int() != 0) {
        std::rethrow_exception(
            MakeApiError(static_cast<int>(response.result_int()), response.body(), where_));
      }
      throw TransportError(
          fmt::format("{}: WebSocket upgrade failed: {}", where_, upgrade.message()), true);
    }
    auto chosen = response.find(http::field::sec_websocket_protocol);
    protocol_ = chosen == response.end() ? "" : std::string(chosen->value());
    if (!request_.protocols.empty() && protocol_.empty()) {
      std::string offers;
      for (const auto& p : request_.protocols) offers += (offers.empty() ? "" : ", ") + p;
      throw TransportError(
          fmt::format("{}: the server accepted none of the WebSocket protocols offered ({})",
                      where_, offers),
          true);
    }
    ws_->binary(true);
    // Idle connections stay open (an exec may print nothing for hours); the close handshake
    // and a dead peer are bounded by the default timeouts.
    websocket::stream_base::timeout timeouts =
        websocket::stream_base::timeout::suggested(beast::role_type::client);
    timeouts.idle_timeout = websocket::stream_base::none();
    timeouts.handshake_timeout = std::chrono::seconds(10);
    ws_->set_option(timeouts);
    lowest.expires_never();

    work_.emplace(asio::make_work_guard(ioc_));
    ioc_.restart();
    StartRead();
    {
      std::lock_guard lock(mu_);
      started_ = true;
    }
    thread_ = std::thread([this] { ioc_.run(); });
  }

  [[nodiscard]] std::string protocol() const override { return protocol_; }

  ReceiveResult Receive(std::string* message, std::chrono::milliseconds wait) override {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, wait, [&] { return !inbox_.empty() || ended_; })) {
      return ReceiveResult::kTimeout;
    }
    if (inbox_.empty()) return ReceiveResult::kClosed;
    *message = std::move(inbox_.front());
    inbox_.pop_front();
    inbox_bytes_ -= message->size();
    if (read_paused_ && inbox_bytes_ < kLowWater) {
      read_paused_ = false;
      asio::post(ioc_, [this] { StartRead(); });
    }
    return ReceiveResult::kMessage;
  }

  void Send(std::string message) override {
    std::unique_lock lock(mu_);
    send_cv_.wait(lock, [&] { return outbox_bytes_ < kSendHighWater || ended_ || closing_; });
    if (ended_ || closing_ || write_error_) {
      if (write_error_) std::rethrow_exception(write_error_);
      if (error_) std::rethrow_exception(error_);
      throw TransportError(fmt::format("{}: the WebSocket is closed", where_), true);
    }
    outbox_bytes_ += message.size();
    asio::post(ioc_, [this, m = std::move(message)]() mutable {
      outbox_.push_back(std::move(m));
      if (outbox_.size() == 1) WriteNext();
    });
  }

  [[nodiscard]] std::exception_ptr error() const override {
    std::lock_guard lock(mu_);
    return error_;
  }

  void Close() override {
    {
      std::lock_guard lock(mu_);
      bool was_closing = closing_;
      closing_ = true;
      if (was_closing || !started_ || ended_) return;
    }
    send_cv_.notify_all();
    asio::post(ioc_, [this] {
      if (!ws_->is_open()) return Finish({});
      ws_->async_close(websocket::close_code::normal, [this](error_code) {
        beast::get_lowest_layer(*ws_).close();
        Finish({});
      });
    });
  }

 private:
  // Runs one asynchronous handshake step on this thread, bounded by `timeout`. `start` gets the
  // completion handler; `abort` cancels the step. Throws for errors unless told not to.
  template <class Start, class Abort>
  error_code Step(std::chrono::milliseconds timeout, const char* what, Start start, Abort abort,
                  bool tls_step = false, bool throw_on_error = true) {
    std::optional<error_code> result;
    start([&result](error_code ec, auto&&...) { result = ec; });
    ioc_.restart();
    if (timeout.count() > 0) {
      ioc_.run_for(timeout);
    } else {
      ioc_.run();
    }
    if (!result) {
      abort();
      ioc_.restart();
      ioc_.run();  // let the cancelled operation complete
      throw TransportError(
          fmt::format("{}: {} timed out after {} ms", where_, what, timeout.count()),
          std::string_view(what) == "upgrade");
    }
    if (*result && throw_on_error) {
      const UrlParts url = SplitUrl(request_.url);
      std::string detail = fmt::format("{}: {} to {}:{} failed: {}", where_, what, url.host,
                                       url.port, OpenSslErrors(*result));
      if (tls_step) throw TlsError("TLS: " + detail);
      throw TransportError(detail, false);
    }
    return *result;
  }

  void StartRead() {
    ws_->async_read(buffer_, [this](error_code ec, std::size_t) {
      if (ec) {
        // A close frame, our own cancellation, or the peer ending the connection without a
        // close frame (TCP end of file, TLS without close_notify): the stream ended.
        if (ec == websocket::error::closed || ec == asio::error::operation_aborted ||
            ec == asio::error::eof || ec == ssl::error::stream_truncated) {
          return Finish({});
        }
        bool closing;
        {
          std::lock_guard lock(mu_);
          closing = closing_;
        }
        if (closing) return Finish({});
        return Finish(std::make_exception_ptr(TransportError(
            fmt::format("{}: the WebSocket connection failed: {}", where_, ec.message()), true)));
      }
      std::string message = beast::buffers_to_string(buffer_.data());
      buffer_.consume(buffer_.size());
      bool pause;
      {
        std::lock_guard lock(mu_);
        inbox_bytes_ += message.size();
        inbox_.push_back(std::move(message));
        pause = inbox_bytes_ >= kHighWater;
        read_paused_ = pause;
      }
      cv_.notify_all();
      if (!pause) StartRead();
    });
  }

  void WriteNext() {
    ws_->async_write(asio::buffer(outbox_.front()), [this](error_code ec, std::size_t) {
      {
        std::lock_guard lock(mu_);
        outbox_bytes_ -= outbox_.front().size();
      }
      send_cv_.notify_all();
      outbox_.pop_front();
      if (ec) {
        // The peer is going away. The read side ends by itself, after whatever the peer sent
        // before (e.g. why it closed) was received; later Sends throw.
        outbox_.clear();
        std::lock_guard lock(mu_);
        if (!write_error_) {
          write_error_ = std::make_exception_ptr(TransportError(
              fmt::format("{}: writing to the WebSocket failed: {}", where_, ec.message()), true));
        }
        return;
      }
      if (!outbox_.empty()) WriteNext();
    });
  }

  // The connection ended (cleanly or with `error`): wake everyone, let the thread finish.
  void Finish(const std::exception_ptr& error) {
    {
      std::lock_guard lock(mu_);
      if (ended_) return;
      ended_ = true;
      if (error && !closing_) error_ = error;
    }
    cv_.notify_all();
    send_cv_.notify_all();
    work_.reset();
    beast::get_lowest_layer(*ws_).close();
  }

  WebSocketRequest request_;
  std::string where_;
  asio::io_context ioc_{1};
  std::optional<ssl::context> ctx_;
  std::optional<websocket::stream<NextLayer>> ws_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread thread_;
  std::string protocol_;
  beast::flat_buffer buffer_;
  std::deque<std::string> outbox_;  // io thread only

  mutable std::mutex mu_;
  std::condition_variable cv_;       // inbox_ / ended_
  std::condition_variable send_cv_;  // outbox_bytes_ / ended_
  std::deque<std::string> inbox_;
  std::size_t inbox_bytes_ = 0;
  std::size_t outbox_bytes_ = 0;
  bool read_paused_ = false;
  bool ended_ = false;
  bool closing_ = false;
  bool started_ = false;  // the socket's thread runs
  std::exception_ptr error_;
  std::exception_ptr write_error_;  // a write failed: no more Sends
};

}  // namespace

std::unique_ptr<WebSocket> OpenWebSocket(const WebSocketRequest& request) {
  const UrlParts url = SplitUrl(request.url);
  if (url.scheme == "https") {
    if (!request.tls) throw TlsError("TLS: " + request.context + ": no TLS settings");
    auto ws = std::make_unique<BeastWebSocket<beast::ssl_stream<beast::tcp_stream>>>(request);
    ws->Open();
    return ws;
  }
  if (url.scheme == "http") {
    auto ws = std::make_unique<BeastWebSocket<beast::tcp_stream>>(request);
    ws->Open();
    return ws;
  }
  throw TransportError(
      fmt::format("{}: unsupported URL scheme {:?} for a WebSocket", request.context, url.scheme),
      false);
}

}  // namespace tfk8s::internal
