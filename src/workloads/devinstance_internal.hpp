#pragma once
// Internal: names, labels and pure helpers shared by DevInstance's rendering, exposure and
// lifecycle code (and its unit tests).

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfk8s/devinstance.hpp"
#include "workloads/identity.hpp"
#include "workloads/kinds.hpp"

namespace tfk8s::internal {

inline constexpr const char* kInstanceLabel = "tfk8s.io/instance";
inline constexpr const char* kDevComponentLabel = "tfk8s.io/component";
inline constexpr const char* kDevSpecAnnotation = "tfk8s.io/spec";
using kinds::kManagedBy;
/// Where the Secret's hash files are mounted (never the plaintext).
inline constexpr const char* kCredentialsDir = "/var/run/tfk8s/credentials";
/// The container's name (GoblinLab's).
inline constexpr const char* kDevContainer = "notebook";

// Keys of the credentials Secret.
inline constexpr const char* kPasswordKey = "password";
inline constexpr const char* kJupyterHashKey = "jupyter-hashed-password";
inline constexpr const char* kJupyterFallbackHashKey = "jupyter-hashed-password-sha512";
inline constexpr const char* kSshHashKey = "ssh-password-hash";
inline constexpr const char* kAuthorizedKeysKey = "authorized_keys";

/// `<name>-credentials`.
std::string DevSecretName(const DevInstanceSpec& spec);
/// `<name>-nodeport`.
std::string DevNodePortName(const DevInstanceSpec& spec);
/// `<name>-0`, the StatefulSet's only pod.
std::string DevPodName(const DevInstanceSpec& spec);
/// `tfk8s.io/instance=<name>`.
std::string DevSelector(const DevInstanceSpec& spec);

/// Every enabled port in Service order: jupyter, ssh, code-server, tensorboard, custom ports.
std::vector<DevPort> DevPorts(const DevInstanceSpec& spec);
/// The enabled ports to expose outside the cluster (expose.tools, or the authenticated tools).
std::vector<DevPort> DevExposedPorts(const DevInstanceSpec& spec);

/// The start script run by `/bin/sh -c` when no command is given: src/workloads/scripts/
/// dev_start.sh, embedded at build time (cmake/embed_text.cmake; its "#!" line left out).
/// Every setting comes from TFK8S_* variables and every secret from the Secret as files (only
/// hashes: argon2 for Jupyter and code-server, SHA-512 crypt for sshd), so the script is the
/// same for every instance, holds nothing worth hiding, and no process gets the password in its
/// environment (which /proc/<pid>/environ would show for the process's whole life). Every
/// enabled tool must be in the image: the readiness probe waits for each one's port
/// (ToolsReadinessProbe), so an instance missing one could never become ready. The script
/// checks them all before starting any and stops at once naming every missing one in the
/// termination message, which status and Wait report.
const char* DevStartScript();

/// The StatefulSet annotation where the culler records the last activity it saw (RFC 3339).
inline constexpr const char* kLastActivityAnnotation = "tfk8s.io/last-activity";
/// The StatefulSet annotations of an instance's own idle policy (DevInstanceSpec::idle):
/// `after` as the spec writes it ("2h") and the action ("stop").
inline constexpr const char* kIdleAfterAnnotation = "tfk8s.io/idle-after";
inline constexpr const char* kIdleActionAnnotation = "tfk8s.io/idle-action";
/// The idle policy a culler applies to one instance: its own (DevInstanceSpec::idle) or the
/// culler's default (DevCullOptions::idle_after); nullopt with `policy_only` and no own policy.
struct AppliedIdlePolicy {
  std::chrono::seconds after{0};
  std::string source;  ///< "its own policy (idle.after 2h)" or "the culler's default (2h)".
};
std::optional<AppliedIdlePolicy> IdlePolicyFor(const std::optional<DevIdlePolicy>& own,
                                               const DevCullOptions& options);
/// The culler's choice for an instance probed as `activity` under `policy` (pure): sets
/// `outcome` ("active"; "would-stop" with DevIdleAction::kReport; else "stop", meaning: stop
/// it now) and `reason` of `*decision`.
void DecideCull(const AppliedIdlePolicy& policy, DevIdleAction action, const DevActivity& activity,
                DevCullDecision* decision);
/// The read-only `/bin/sh` probe DevInstance::Activity() runs in the pod: src/workloads/scripts/
/// dev_activity_probe.sh, embedded like DevStartScript. It reads only Jupyter's activity file
/// (written by the start script's server extension), the sshd processes serving a logged-in
/// user ("sshd: root@pts/0") and code-server's heartbeat, and prints one JSON line
/// {"jupyter": {...} | null, "ssh_sessions", "code_server_heartbeat": epoch | null, "now"}.
const char* DevActivityProbe();
/// The probe's answer as a DevActivity (`started`, `recorded` unset); nullopt with `*why`.
std::optional<DevActivity> ParseDevActivity(std::string_view output, std::string* why);

/// The Secret's `data` for `credentials` (base64 values).
Json DevSecretData(const DevInstanceSpec& spec, const DevCredentials& credentials);

// ---- tcp-services (pure) ---------------------------------------------------------------------

/// `"<ns>/<service>:<port>"`, the value of a tcp-services entry.
std::string TcpServiceTarget(const std::string& ns, const std::string& service, int port);
/// Target (Service) port → external port of the entries in `data` that point at ns/service
/// (entries with ingress-nginx's `:PROXY` suffixes included).
std::map<int, int> TcpAssignments(const Json& data, const std::string& ns,
                                  const std::string& service);
/// Makes `data` map exactly `targets` of ns/service: keeps existing entries, removes entries of
/// ns/service for other targets, and gives each missing target the lowest free external port in
/// [min, max]. Returns target → external port. Throws DevInstanceFailed when the range is full.
/// `*changed` tells whether `data` was modified.
std::map<int, int> AssignTcpPorts(Json* data, const std::string& ns, const std::string& service,
                                  const std::vector<int>& targets, int min, int max, bool* changed);
/// Removes every entry pointing at ns/service; returns how many.
int RemoveTcpPorts(Json* data, const std::string& ns, const std::string& service);

/// Read-modify-write of the tcp-services ConfigMap named by `expose`: reads it, lets `mutate`
/// change its data (returning false when nothing changed), and writes it back with a Replace
/// carrying the resourceVersion that was read; on Conflict it reads again and retries (jittered
/// backoff, up to 30 attempts). A missing ConfigMap is created when `may_create` and
/// `expose.create_configmap`, ignored when not `may_create`, else NotFound.
void UpdateTcpServices(Client& client, const DevExposeSpec& expose,
                       const std::function<bool(Json* data)>& mutate, bool may_create);

// ---- status (pure) -------------------------------------------------------------------------

/// What a status computation looks at.
struct DevObserved {
  Json statefulset;                           ///< null when absent.
  std::vector<Json> pods;                     ///< Pods labelled with the instance.
  std::vector<std::string> quota_rejections;  ///< Recent FailedCreate "exceeded quota" messages.
};

/// Phase, pod, node, ready tools and reason; appends reasons that waiting will not heal to
/// `*fatal` (when not null).
DevInstanceStatus ComputeDevStatus(const DevInstanceSpec& spec, const DevObserved& observed,
                                   std::vector<std::string>* fatal);

/// The spec stored on an instance's StatefulSet, its identity checked against the object's
/// (identity.hpp): NotFound when `sts` is not a tfk8s instance or has no stored spec,
/// ValidationError when the stored spec is not JSON, is invalid, or names another instance,
/// namespace or owner. `*identity` (optional) gets the object's identity.
DevInstanceSpec DevSpecFromObject(const Json& sts, RootIdentity* identity = nullptr);

// ---- tenancy (devinstance_tenancy.cpp) --------------------------------------------------------

/// The namespace checks of a DevInstance, pure: `namespace_object` is the Namespace as read, or
/// null when it could not be read (`unreadable_why` says why: absent, or these credentials may
/// not read it). A namespace labelled tfk8s.io/owner=<x> is personal to x: an instance of
/// another owner is refused there (ValidationError on "owner"), and `launch_workloads` is
/// allowed only in a namespace personal to the instance's owner (ValidationError on
/// "launchWorkloads" naming the namespace, the reason and the way out; an unreadable namespace
/// is refused too: the check fails closed). Other instances pass an unreadable namespace: the
/// owner check is a guard against mistakes, not a boundary (whoever may create StatefulSets in
/// a namespace may create any pod there).
void CheckDevTenancy(const DevInstanceSpec& spec, const Json* namespace_object,
                     const std::string& unreadable_why);
/// CheckDevTenancy with the namespace read through `client` (one GET; nothing is written).
void CheckDevTenancy(Client& client, const DevInstanceSpec& spec);

}  // namespace tfk8s::internal
