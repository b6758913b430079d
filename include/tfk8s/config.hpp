#pragma once
/// @file
/// Connection configuration: loading (kubeconfig, in-cluster) is separate from using (Client).

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfk8s/retry.hpp"

namespace tfk8s {

/// A client.authentication.k8s.io exec credential plugin (kubeconfig `users[].user.exec`).
struct ExecConfig {
  std::string api_version;        ///< client.authentication.k8s.io/v1 or /v1beta1.
  std::string command;            ///< Resolved like kubeconfig paths (relative to the file's folder
                                  ///< when it contains a '/'), else looked up in PATH.
  std::vector<std::string> args;  ///< Arguments (redacted by ToString: they may hold secrets).
  /// Added to (and overriding) the inherited environment; values are redacted by ToString.
  std::vector<std::pair<std::string, std::string>> env;
  std::string install_hint;  ///< Shown when the command cannot be found.
  /// Never, IfAvailable or Always (required in kubeconfig for v1). The plugin gets our stdin
  /// only when interactive; otherwise stdin is /dev/null. Always without a terminal is an error.
  std::string interactive_mode = "IfAvailable";
  bool provide_cluster_info = false;  ///< Pass the cluster in KUBERNETES_EXEC_INFO.
};

/// Everything a Client needs to reach and authenticate to one API server.
/// Secrets (token, key, password) are held in memory only and never printed.
/// One attempt of a request, as ClientConfig::on_request sees it.
struct RequestObservation {
  std::string_view method;  ///< "GET", "POST", "PUT", "PATCH", "DELETE".
  bool stream = false;      ///< A watch or a followed log (latency to the headers).
  int status = 0;           ///< The HTTP status; 0 when no answer came (transport error).
  std::chrono::nanoseconds latency{0};
};

struct ClientConfig {
  std::string server;                     ///< e.g. "https://127.0.0.1:6443".
  std::string ca_pem;                     ///< Trusted CA bundle (PEM), from -data or the file.
  std::string ca_file;                    ///< Where ca_pem came from (for messages); may be empty.
  bool insecure_skip_tls_verify = false;  ///< Rejected together with a CA.
  std::string tls_server_name;            ///< SNI and certificate name check override.
  std::string proxy_url;                  ///< http(s)://, socks5:// proxy for every request.
  /// Never ask for compressed responses (kubeconfig `disable-compression`). Compression is on
  /// by default, as in client-go; on a fast network turning it off makes large lists faster
  /// (no gzip on the server, no inflate here).
  bool disable_compression = false;

  std::string token;  ///< Bearer token (static); with token_file, only a fallback.
  /// Bearer token file, read by the credential provider (not at load): re-read every
  /// token_file_refresh and after a 401, keeping the last good token when a re-read fails.
  std::string token_file;
  std::string client_cert_pem;     ///< Client certificate (PEM), in memory.
  std::string client_key_pem;      ///< Client private key (PEM), in memory only.
  std::string username;            ///< Basic auth user (rare).
  std::string password;            ///< Basic auth password (rare).
  std::optional<ExecConfig> exec;  ///< Exec credential plugin.
  /// Send a bearer token (token, token_file or an exec plugin's) or basic-auth credentials
  /// (username/password, or `user:password@` in `server`) to an `http://` server, in clear
  /// text. Off: Validate() refuses the combination, so a credential never leaves unencrypted
  /// by accident (a test server on loopback is the usual reason to turn it on).
  bool allow_token_over_http = false;

  std::string default_namespace = "default";  ///< From the context or in-cluster namespace file.
  std::string context;                        ///< The kubeconfig context used, if any.
  std::string source;                         ///< Human description of where this came from.

  /// Bound of the TCP connect (and proxy connect), capped at 30 s like client-go's dialer.
  std::chrono::milliseconds connect_timeout{30'000};
  /// Bound of the TLS handshake alone, counted from the moment TCP is connected (client-go:
  /// TLSHandshakeTimeout 10 s). 0 leaves only connect_timeout + request_timeout.
  std::chrono::milliseconds tls_handshake_timeout{10'000};
  /// Bound of one call (not of streams), every retry and Retry-After wait included; also sent
  /// to the server as `?timeout=` on lists. 0: none. The client-side rate limiter's wait for
  /// the first attempt comes before it starts.
  std::chrono::milliseconds request_timeout{60'000};
  /// A watch that receives no byte at all (bookmarks included) for this long ends with a
  /// TransportError of kind kTimeout, so an Informer reconnects and resumes from its
  /// resourceVersion. A watch with timeout_seconds is additionally bounded by timeout_seconds +
  /// 30 s (the server must have ended it by then). 0 disables. Default 15 min: longer than any
  /// Informer watch (5-10 min), since servers before 1.27 send no periodic bookmarks.
  std::chrono::milliseconds watch_idle_timeout{15 * 60 * 1000};
  /// The same bound for followed pod logs. 0 (the default) disables it: a quiet container
  /// (a long training epoch) legitimately prints nothing for hours.
  std::chrono::milliseconds log_idle_timeout{0};
  /// Largest response body (after decompression) read into memory; larger answers fail with
  /// ResponseTooLarge instead of growing memory without bound. Default 256 MiB.
  std::size_t max_response_bytes = std::size_t{256} << 20;
  /// Largest single watch event or log line; longer ones fail with ResponseTooLarge.
  /// Default 16 MiB (etcd's object limit is 1.5 MiB).
  std::size_t max_stream_line_bytes = std::size_t{16} << 20;
  std::chrono::seconds token_file_refresh{60};  ///< Re-read period of token_file.
  RetryPolicy retry;                            ///< Retry policy of every request.
  RateLimit rate_limit;                         ///< Client-side rate limit.
  std::string user_agent = "tfk8s/0.1";         ///< User-Agent header.
  /// Called after every attempt of a request (retries included: one call per attempt) with its
  /// method, status and latency; for streams (watches, followed logs) the latency ends at the
  /// response headers. For metrics (`tfk8s controller`'s API latency histogram). Called on the
  /// requesting thread: it must be thread-safe, quick, and must not throw.
  std::function<void(const RequestObservation&)> on_request;

  /// Checks internal consistency (server URL, CA with insecure, cert without key …).
  /// Throws ConfigError naming the field.
  void Validate() const;
  /// A readable multi-line dump for logs. Token, password, client key, exec args and env values
  /// and any user:password in the server or proxy URL show as REDACTED; the client certificate
  /// shows as its size.
  [[nodiscard]] std::string ToString() const;
};

/// How to load a kubeconfig.
struct KubeconfigOptions {
  /// Explicit file. When empty: the KUBECONFIG list (':'-separated, merged, first value of
  /// each key wins), else ~/.kube/config.
  std::string path;
  /// Context name; empty means `current-context`.
  std::string context;
  /// Overrides the context's namespace when not empty.
  std::string namespace_override;
};

/// Loads a kubeconfig (see KubeconfigOptions). Relative file paths in it are resolved against
/// the folder of the file that defined them. Throws ConfigError naming the file and field.
ClientConfig LoadKubeconfig(const KubeconfigOptions& options = {});

/// Loads a kubeconfig from YAML text (for tests and embedding); `origin` names it in errors
/// and is the base for relative paths when it is a file path.
ClientConfig LoadKubeconfigFromString(const std::string& yaml, const std::string& origin,
                                      const KubeconfigOptions& options = {});

/// Where in-cluster configuration is read from (overridable for tests).
struct InClusterOptions {
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  /// Environment lookup; defaults to getenv. Used for KUBERNETES_SERVICE_HOST/_PORT.
  std::map<std::string, std::string> env_override;
  bool use_env_override = false;
};

/// In-cluster configuration: KUBERNETES_SERVICE_HOST/_PORT (IPv6 bracketed), the service
/// account token (as token_file: re-read, last good token kept), CA and namespace file.
ClientConfig LoadInClusterConfig(const InClusterOptions& options = {});

/// The automatic choice: kubeconfig (explicit path, KUBECONFIG, ~/.kube/config) and then
/// in-cluster. Falls back to in-cluster only when no kubeconfig file exists (one that exists but
/// is broken is reported, never skipped) and no context was requested. Throws ConfigError
/// listing everything that was tried, and why each failed, when nothing is found.
ClientConfig LoadDefaultConfig(const KubeconfigOptions& options = {});

}  // namespace tfk8s
