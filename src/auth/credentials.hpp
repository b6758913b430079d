#pragma once
// Internal: runtime credential sources (static token, token file, exec plugin, client cert).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tfk8s/config.hpp"

namespace tfk8s::internal {

/// What to attach to a request.
struct Credentials {
  std::string bearer_token;      ///< Empty: no Authorization header.
  std::string client_cert_pem;   ///< Empty: no client certificate.
  std::string client_key_pem;    ///< Set exactly when client_cert_pem is.
  std::string username;          ///< Basic auth user; empty: no basic auth.
  std::string password;          ///< Basic auth password (only with username).
  std::uint64_t generation = 0;  ///< Changes every time the source produces new credentials.
};

/// A source of credentials shared by every request of one Client. Thread-safe.
class CredentialProvider {
 public:
  virtual ~CredentialProvider() = default;
  /// Current credentials (may run an exec plugin or read a token file). Throws ConfigError.
  virtual Credentials Get() = 0;
  /// Called after a 401 with the credentials that failed. Refreshes at most once per generation:
  /// when many requests fail with the same generation at once, the plugin runs once.
  virtual void OnUnauthorized(const Credentials& failed) = 0;
};

/// Clock injected for tests.
using Clock = std::function<std::chrono::system_clock::time_point()>;

/// Builds the provider for a config: exec plugin > token file > static token/cert/basic auth.
/// The config's client certificate and basic auth ride along with every source (an exec plugin
/// that returns a certificate replaces the config's). With provide_cluster_info, the config's
/// server, CA, tls-server-name and proxy are passed to the plugin in KUBERNETES_EXEC_INFO.
/// A token file is re-read every config.token_file_refresh and after a 401; config.token, when
/// also set, is used until the file has been read once. An empty `clock` means system_clock.
std::shared_ptr<CredentialProvider> MakeCredentialProvider(const ClientConfig& config,
                                                           Clock clock = {});

}  // namespace tfk8s::internal
