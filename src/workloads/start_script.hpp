#pragma once
// Internal: what tfk8s's interactive start script (DevStartScript) needs in a pod, shared by a
// DevInstance and a TFCluster's session, so both start Jupyter and sshd the same way.

#include <optional>
#include <string>
#include <vector>

#include "tfk8s/devinstance.hpp"

namespace tfk8s::internal {

/// Every enabled tool's port, in Service order: jupyter, ssh, code-server, tensorboard, custom.
std::vector<DevPort> ToolPorts(const DevTools& tools);
/// The enabled tools the start script serves (ToolPorts without the custom ports, whose
/// processes the user starts): what the readiness probe waits for and `ready_tools` lists.
std::vector<DevPort> ServedToolPorts(const DevTools& tools);

/// What the start script starts and where.
struct StartScriptTools {
  const DevTools* tools = nullptr;  ///< The enabled tools and their ports.
  std::string home;                 ///< TFK8S_HOME: Jupyter's root, the script's state folder.
  bool ssh_password_login = true;   ///< TFK8S_SSH_PASSWORD_LOGIN.
};

/// The TFK8S_* variables the script reads, as `{name, value}` env entries.
Json StartScriptEnv(const StartScriptTools& t);

/// The container command that runs the script.
Json StartScriptCommand();

/// The environment of an image's own start script (a `command`): TFK8S_PASSWORD_FILE naming
/// the password file of CredentialsVolume(…, with_password = true), and PASSWORD by reference
/// to the Secret only when `password_env` asks for it.
Json CustomScriptPasswordEnv(const std::string& secret_name, bool password_env);

/// The credentials volume `credentials`: the Secret's hashes (and authorized keys, and the
/// plaintext only when code-server started by the script needs it) as root-only files.
Json CredentialsVolume(const std::string& secret_name, bool with_password,
                       bool with_authorized_keys);
/// Its mount at kCredentialsDir, read-only.
Json CredentialsMount();

/// The readiness probe: every served tool's port is listening (TCP LISTEN in the pod's
/// /proc/net/tcp or tcp6, read by /bin/sh builtins alone, so any image with a shell can run
/// it); on failure it prints the first tool that is not, which the kubelet records in the
/// pod's "Unhealthy" event. Null when no tool is served.
Json ToolsReadinessProbe(const DevTools& tools);

/// A credentials Secret's data: the password, its two hashes and the authorized keys (if any).
Json CredentialsSecretData(const DevCredentials& credentials,
                           const std::vector<std::string>& authorized_keys = {});

/// The credentials a Secret of CredentialsSecretData's format holds, if complete (to re-render it
/// without changing the password, or to tell the user).
std::optional<DevCredentials> CredentialsFromSecret(const Json& secret);
/// CredentialsFromSecret's reading alone: the Secret's fields as stored, without making the
/// hashes an older Secret lacks (argon2 is slow by design; the fuzz harness reads many Secrets).
std::optional<DevCredentials> DecodeCredentialsSecret(const Json& secret);

/// Fills every endpoint's `connect`: `ssh -p <port> <user>@<host>` for SSH, `http://…/` for
/// the rest (the external address when there is one).
void FillConnect(DevAccess* access);

}  // namespace tfk8s::internal
