#pragma once
// Internal: client.authentication.k8s.io exec credential plugins (client-go's
// plugin/pkg/client/auth/exec): building KUBERNETES_EXEC_INFO, running the plugin, validating
// its ExecCredential reply.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "auth/credentials.hpp"
#include "tfk8s/config.hpp"

namespace tfk8s::internal {

/// What a plugin returned (status of its ExecCredential).
struct ExecCredential {
  std::string token;            ///< Bearer token, may be empty when a certificate is returned.
  std::string client_cert_pem;  ///< PEM; set together with client_key_pem or not at all.
  std::string client_key_pem;   ///< PEM.
  /// When the credential stops being valid; nullopt: until a 401 or the process exits.
  std::optional<std::chrono::system_clock::time_point> expiration;
};

/// Knobs of plugin execution (tests shorten the timeout and fake the terminal).
struct ExecPluginOptions {
  /// A plugin still running after this is killed. client-go has no bound at all; a hung plugin
  /// would then hang every request, so we pick a generous one (interactive logins included).
  std::chrono::milliseconds timeout{60'000};
  /// Whether our stdin is a terminal; nullopt means ask isatty(0).
  std::optional<bool> stdin_is_terminal;
};

/// The KUBERNETES_EXEC_INFO JSON: an ExecCredential with spec.interactive and, only when
/// exec.provide_cluster_info, spec.cluster built from `cluster` (server, tls-server-name,
/// insecure-skip-tls-verify, certificate-authority-data in base64, proxy-url, disable-compression;
/// empty ones omitted).
std::string BuildExecInfo(const ExecConfig& exec, const ClientConfig& cluster, bool interactive);

/// Validates a plugin's stdout: JSON ExecCredential of exec.api_version with a status holding a
/// token and/or a certificate+key pair, and an optional RFC 3339 expirationTimestamp.
/// Throws ConfigError, or DecodeError for output nested deeper than kMaxJsonDepth
/// (util/json_parse.hpp); the message never quotes the output (it holds credentials).
ExecCredential ParseExecCredential(std::string_view output, const ExecConfig& exec);

/// Runs `config.exec` (which must be set) once and returns its credential. Throws ConfigError:
/// command not found (with the installHint), not startable, timed out, killed, non-zero exit
/// (exit code only: the plugin's stderr already went to ours), or an invalid reply.
ExecCredential RunExecPlugin(const ClientConfig& config, const ExecPluginOptions& options = {});

/// Parses an RFC 3339 time ("2024-05-01T10:00:00Z", "…T10:00:00.5+02:00"); nullopt if invalid
/// or outside what system_clock holds (about the years 1678-2261).
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view text);

/// MakeCredentialProvider with explicit exec plugin options (for tests).
std::shared_ptr<CredentialProvider> MakeCredentialProvider(const ClientConfig& config, Clock clock,
                                                           const ExecPluginOptions& exec_options);

}  // namespace tfk8s::internal
