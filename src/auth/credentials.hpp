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
  std::string bearer_token;     ///< Empty: no Authorization header.
  std::string client_cert_pem;  ///< Empty: no client certificate.
  std::string client_key_pem;
  std::uint64_t generation = 0; ///< Changes every time the source produces new credentials.
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

/// Builds the provider for a config: exec plugin > token file > static token/cert.
/// `cluster_server`/`cluster_ca_pem` feed KUBERNETES_EXEC_INFO when provide_cluster_info is set.
std::shared_ptr<CredentialProvider> MakeCredentialProvider(const ClientConfig& config,
                                                           Clock clock = {});

}  // namespace tfk8s::internal
