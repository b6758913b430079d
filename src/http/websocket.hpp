#pragma once
// Internal: a WebSocket client (RFC 6455) for the API server's streaming subresources (exec,
// port-forward). Implemented with Boost.Beast (Debian's libboost-dev, header-only) over
// Boost.Asio and OpenSSL; only src/http/websocket.cpp includes them.

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "http/transport.hpp"

namespace tfk8s::internal {

/// An upgrade request: GET `url` (http:// or https://) with `headers`, offering `protocols`.
struct WebSocketRequest {
  std::string url;
  std::vector<std::string> headers;    ///< "Name: value" lines (authorization, user agent).
  std::vector<std::string> protocols;  ///< Sec-WebSocket-Protocol offers, preferred first.
  std::chrono::milliseconds connect_timeout{30'000};        ///< TCP connect.
  std::chrono::milliseconds tls_handshake_timeout{10'000};  ///< TLS handshake.
  std::chrono::milliseconds upgrade_timeout{30'000};        ///< The HTTP upgrade exchange.
  std::shared_ptr<const TlsSettings> tls;                   ///< For https:// URLs.
  std::string context;  ///< For error messages, e.g. "exec in pod ns/p".
};

/// One open WebSocket. Thread-safe: one thread may Receive while others Send and Close.
class WebSocket {
 public:
  enum class ReceiveResult { kMessage, kClosed, kTimeout };

  virtual ~WebSocket() = default;
  /// The subprotocol the server chose (one of the offers).
  [[nodiscard]] virtual std::string protocol() const = 0;
  /// Waits up to `wait` for the next message (its payload replaces *message). kClosed once the
  /// peer closed or the connection failed (then error() is set) or Close() was called.
  virtual ReceiveResult Receive(std::string* message, std::chrono::milliseconds wait) = 0;
  /// Queues one binary message. Blocks while more than a few MiB wait to be written (back
  /// pressure). Throws TransportError when the socket is closed or failed.
  virtual void Send(std::string message) = 0;
  /// What ended the connection, if it failed (not a clean close).
  [[nodiscard]] virtual std::exception_ptr error() const = 0;
  /// Sends a close frame and closes the connection. Idempotent, from any thread.
  virtual void Close() = 0;
};

/// Opens a WebSocket: TCP connect, TLS (verifying the server like the HTTP transport: the CA,
/// the host name or TLSServerName, the client certificate), then the HTTP/1.1 upgrade. Returns
/// once the server switched protocols. Throws TransportError / TlsError, or the typed ApiError
/// (Forbidden, NotFound, BadRequest …) built from the server's answer when it refused the
/// upgrade; the error says which protocols were offered when none was accepted.
std::unique_ptr<WebSocket> OpenWebSocket(const WebSocketRequest& request);

}  // namespace tfk8s::internal
