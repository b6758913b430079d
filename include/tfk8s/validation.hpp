#pragma once
/// @file
/// Client-side name and label validation with the same rules and messages as Kubernetes'
/// k8s.io/apimachinery/pkg/util/validation, so bad input fails before anything is sent.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

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

/// Throws ValidationError(field, value, errors joined with "; ") when `value` is not a DNS-1123
/// label.
void RequireDns1123Label(std::string_view field, std::string_view value);
/// Throws ValidationError when `value` is not a DNS-1123 subdomain.
void RequireDns1123Subdomain(std::string_view field, std::string_view value);
/// Throws ValidationError when `value` is not a valid label key.
void RequireLabelKey(std::string_view field, std::string_view value);
/// Throws ValidationError when `value` is not a valid label value.
void RequireLabelValue(std::string_view field, std::string_view value);
/// Throws ValidationError when `name` is too long (or invalid) to name a StatefulSet whose pods
/// get the controller-revision-hash label.
void RequireStatefulSetName(std::string_view field, std::string_view name);

}  // namespace tfk8s::validation
