#pragma once
/// @file
/// Client-side name and label validation with the same rules as Kubernetes'
/// k8s.io/apimachinery/pkg/util/validation, so bad input fails before anything is sent. Messages
/// state the rule in Kubernetes' words with its examples ("... must start and end with an
/// alphanumeric character (e.g. 'my-name' or '123-abc')"), without the regular expression
/// Kubernetes appends to them.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tfk8s/pod.hpp"

namespace tfk8s::validation {

/// Maximum length of a DNS-1123 label (Service names, namespaces, most derived names).
inline constexpr std::size_t kDns1123LabelMaxLength = 63;
/// Maximum length of a DNS-1123 subdomain (most object names).
inline constexpr std::size_t kDns1123SubdomainMaxLength = 253;
/// Maximum length of a label value.
inline constexpr std::size_t kLabelValueMaxLength = 63;
/// A StatefulSet's pods carry `controller-revision-hash: <name>-<10 chars>` which must be a
/// valid label value (63), so the StatefulSet name can be at most 63 - 11 = 52 characters.
inline constexpr std::size_t kStatefulSetNameMaxLength = 52;

/// Errors for a DNS-1123 label (lowercase alphanumerics and '-', starts and ends alphanumeric,
/// at most 63). Empty when valid.
std::vector<std::string> IsDns1123Label(std::string_view value);
/// Errors for a DNS-1123 subdomain (labels joined by '.', at most 253). Empty when valid.
std::vector<std::string> IsDns1123Subdomain(std::string_view value);
/// Errors for a label or annotation key ("prefix/name": prefix a DNS subdomain, name a qualified
/// name of at most 63). Empty when valid.
std::vector<std::string> IsQualifiedName(std::string_view value);
/// Errors for a label value (empty, or at most 63 alphanumerics, '-', '_', '.', starting and
/// ending alphanumeric). Empty when valid.
std::vector<std::string> IsValidLabelValue(std::string_view value);

/// Errors for a DNS-1035 label (like a DNS-1123 label, but starting with a letter): what a
/// Service name must be. Empty when valid.
std::vector<std::string> IsDns1035Label(std::string_view value);
/// Errors for a name used as one URL path segment, as the API server and client-go check them
/// (apimachinery's IsValidPathSegmentName): may not be '.' or '..', may not contain '/' or '%'.
/// Empty when valid (also for ""; see RequirePathSegment).
std::vector<std::string> IsValidPathSegmentName(std::string_view value);

/// Throws ValidationError(field, value, errors joined with "; ") when `value` is not a DNS-1123
/// label.
void RequireDns1123Label(std::string_view field, std::string_view value);
/// Throws ValidationError when `value` is not a DNS-1035 label (Service names).
void RequireDns1035Label(std::string_view field, std::string_view value);
/// Throws ValidationError when `value` cannot be one segment of a request path: empty, '.' or
/// '..', containing '/' or '%' (IsValidPathSegmentName), or containing a control character
/// (no Kubernetes name holds one; refusing it keeps messages and logs one line each).
void RequirePathSegment(std::string_view field, std::string_view value);
/// Throws ValidationError when `value` cannot name a namespace: not a path segment, or not a
/// DNS-1123 label (the API server's rule for namespace names, so no such namespace can exist).
void RequireNamespaceName(std::string_view field, std::string_view value);
/// Throws ValidationError when `value` is not a DNS-1123 subdomain.
void RequireDns1123Subdomain(std::string_view field, std::string_view value);
/// Throws ValidationError when `value` is not a valid label key.
void RequireLabelKey(std::string_view field, std::string_view value);
/// Throws ValidationError when `value` is not a valid label value.
void RequireLabelValue(std::string_view field, std::string_view value);
/// Throws ValidationError when `name` is too long (or invalid) to name a StatefulSet whose pods
/// get the controller-revision-hash label.
void RequireStatefulSetName(std::string_view field, std::string_view name);
/// A duration written as a whole number (at most 9 digits) with an optional unit: "90" or
/// "90s", "250ms", "90m", "2h". Throws ValidationError(field, text, reason) otherwise.
std::chrono::milliseconds ParseDuration(std::string_view field, std::string_view text);

// ---- the pod vocabulary (tfk8s/pod.hpp), checked the same way for every workload ----------

/// Throws ValidationError unless `value` is a non-negative Kubernetes quantity. "" is accepted
/// ("not set") unless `required`.
void RequireQuantity(std::string_view field, std::string_view value, bool required = false);
/// Throws ValidationError unless `port` is in 1..65535.
void RequirePort(std::string_view field, int port);
/// Errors for an environment variable name (Kubernetes' IsEnvVarName). Empty when valid.
std::vector<std::string> IsEnvVarName(std::string_view value);
/// Checks `<field>.cpu`, `.memory`, `.cpuLimit`, `.memoryLimit` (quantities; a limit at least
/// its request) and `.gpus` (>= 0). With `require_requests`, cpu and memory must be set.
void ValidateResources(std::string_view field, const Resources& resources,
                       bool require_requests = false);
/// Why tfk8s reserves an environment variable name ("" when it does not).
using ReservedEnvName = std::function<std::string(std::string_view name)>;
/// Checks `<field>[i].name` of every variable: a valid name, given once, not reserved.
void ValidateEnv(std::string_view field, const std::vector<EnvVar>& env,
                 const ReservedEnvName& reserved = {});
/// Checks `<field>.nodetype`, `.cputype`, `.gputype`, `.privateName` (label values), `.pool`
/// ("shared", "unshared" or ""), and that privateName is given exactly with the unshared pool.
void ValidatePlacement(std::string_view field, const Placement& placement);
/// Checks the pod options at the spec's top level (`prefix` "" there, or e.g. "session."):
/// `imagePullPolicy` ("", Always, IfNotPresent, Never), `imagePullSecrets[i]` and
/// `serviceAccount` (DNS-1123 subdomains), `priorityClassName` (a DNS-1123 subdomain not
/// starting with "system-", Kubernetes' reserved prefix), and `securityContext.*` (ids >= 0,
/// runAsNonRoot not with user 0, capability names in upper case such as ALL or
/// NET_BIND_SERVICE, seccompProfile "", RuntimeDefault or Unconfined).
void ValidatePodOptions(std::string_view prefix, const PodOptions& options);

}  // namespace tfk8s::validation
