// Name and label validation with the rules and messages of
// k8s.io/apimachinery/pkg/util/validation (validation.go). The regular expressions are matched
// by hand (they are all simple character-class patterns). The messages are Kubernetes' words and
// examples; the regular expression Kubernetes appends ("regex used for validation is ...") is
// left out, because the words already state the rule and a reader gains nothing from the pattern.

#include "tfk8s/validation.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tfk8s/error.hpp"
#include "tfk8s/quantity.hpp"

namespace tfk8s::validation {
namespace {

constexpr std::string_view kDns1123LabelErrMsg =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character";
constexpr std::string_view kDns1123SubdomainErrMsg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character";
constexpr std::string_view kDns1035LabelErrMsg =
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character";
constexpr std::string_view kEnvVarNameErrMsg =
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', "
    "or '.', and must not start with a digit";
constexpr std::string_view kQualifiedNameErrMsg =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";
constexpr std::size_t kQualifiedNameMaxLength = 63;
constexpr std::string_view kLabelValueErrMsg =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character";

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

// ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$
bool MatchesDns1123Label(std::string_view s) {
  if (s.empty() || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

// ^label(\.label)*$
bool MatchesDns1123Subdomain(std::string_view s) {
  while (true) {
    const std::size_t dot = s.find('.');
    if (!MatchesDns1123Label(s.substr(0, dot))) return false;
    if (dot == std::string_view::npos) return true;
    s.remove_prefix(dot + 1);
  }
}

// ^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$
bool MatchesQualifiedName(std::string_view s) {
  if (s.empty() || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// validation.MaxLenError.
std::string MaxLenError(std::size_t length) {
  return "must be no more than " + std::to_string(length) + " characters";
}

// validation.RegexError's words and examples, without its regular expression:
// "<rule> (e.g. 'my-name' or '123-abc')".
std::string RuleError(std::string_view rule, std::initializer_list<std::string_view> examples) {
  std::string out(rule);
  if (examples.size() == 0) return out;
  out += " (e.g. ";
  bool first = true;
  for (std::string_view example : examples) {
    if (!first) out += " or ";
    first = false;
    out += "'" + std::string(example) + "'";
  }
  return out + ")";
}

std::string Join(const std::vector<std::string>& errors) {
  std::string out;
  for (const auto& e : errors) {
    if (!out.empty()) out += "; ";
    out += e;
  }
  return out;
}

void ThrowIfAny(std::string_view field, std::string_view value,
                const std::vector<std::string>& errors) {
  if (!errors.empty()) throw ValidationError(std::string(field), std::string(value), Join(errors));
}

}  // namespace

std::vector<std::string> IsDns1123Label(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kDns1123LabelMaxLength) errs.push_back(MaxLenError(kDns1123LabelMaxLength));
  if (!MatchesDns1123Label(value)) {
    if (MatchesDns1123Subdomain(value)) {
      // A valid subdomain but not a label: the only difference is dots.
      errs.emplace_back("must not contain dots");
    } else {
      errs.push_back(RuleError(kDns1123LabelErrMsg, {"my-name", "123-abc"}));
    }
  }
  return errs;
}

std::vector<std::string> IsDns1035Label(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kDns1123LabelMaxLength) errs.push_back(MaxLenError(kDns1123LabelMaxLength));
  if (!MatchesDns1123Label(value) || !(value.front() >= 'a' && value.front() <= 'z')) {
    errs.push_back(RuleError(kDns1035LabelErrMsg, {"my-name", "abc-123"}));
  }
  return errs;
}

std::vector<std::string> IsValidPathSegmentName(std::string_view value) {
  // k8s.io/apimachinery/pkg/api/validation/path: NameMayNotBe, then NameMayNotContain.
  for (std::string_view illegal : {".", ".."}) {
    if (value == illegal) return {"may not be '" + std::string(illegal) + "'"};
  }
  std::vector<std::string> errs;
  for (std::string_view illegal : {"/", "%"}) {
    if (value.find(illegal) != std::string_view::npos) {
      errs.push_back("may not contain '" + std::string(illegal) + "'");
    }
  }
  return errs;
}

std::vector<std::string> IsDns1123Subdomain(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kDns1123SubdomainMaxLength) {
    errs.push_back(MaxLenError(kDns1123SubdomainMaxLength));
  }
  if (!MatchesDns1123Subdomain(value)) {
    errs.push_back(RuleError(kDns1123SubdomainErrMsg, {"example.com"}));
  }
  return errs;
}

std::vector<std::string> IsQualifiedName(std::string_view value) {
  std::vector<std::string> errs;
  std::string_view name = value;
  const std::size_t slash = value.find('/');
  if (slash != std::string_view::npos) {
    if (value.find('/', slash + 1) != std::string_view::npos) {
      // More than one '/': Kubernetes reports only this.
      errs.push_back("a qualified name " +
                     RuleError(kQualifiedNameErrMsg, {"MyName", "my.name", "123-abc"}) +
                     " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
      return errs;
    }
    const std::string_view prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (prefix.empty()) {
      errs.emplace_back("prefix part must be non-empty");
    } else {
      for (const auto& msg : IsDns1123Subdomain(prefix)) errs.push_back("prefix part " + msg);
    }
  }
  if (name.empty()) {
    errs.emplace_back("name part must be non-empty");
  } else if (name.size() > kQualifiedNameMaxLength) {
    errs.push_back("name part " + MaxLenError(kQualifiedNameMaxLength));
  }
  if (!MatchesQualifiedName(name)) {
    errs.push_back("name part " +
                   RuleError(kQualifiedNameErrMsg, {"MyName", "my.name", "123-abc"}));
  }
  return errs;
}

std::vector<std::string> IsValidLabelValue(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kLabelValueMaxLength) errs.push_back(MaxLenError(kLabelValueMaxLength));
  if (!value.empty() && !MatchesQualifiedName(value)) {
    errs.push_back(RuleError(kLabelValueErrMsg, {"MyValue", "my_value", "12345"}));
  }
  return errs;
}

void RequireDns1123Label(std::string_view field, std::string_view value) {
  ThrowIfAny(field, value, IsDns1123Label(value));
}

void RequireDns1035Label(std::string_view field, std::string_view value) {
  ThrowIfAny(field, value, IsDns1035Label(value));
}

void RequirePathSegment(std::string_view field, std::string_view value) {
  if (value.empty()) throw ValidationError(std::string(field), "", "may not be empty");
  std::vector<std::string> errs = IsValidPathSegmentName(value);
  for (unsigned char c : value) {
    if (c < 0x20 || c == 0x7f) {
      errs.emplace_back("may not contain control characters");
      break;
    }
  }
  ThrowIfAny(field, value, errs);
}

void RequireNamespaceName(std::string_view field, std::string_view value) {
  RequirePathSegment(field, value);
  RequireDns1123Label(field, value);
}

void RequireDns1123Subdomain(std::string_view field, std::string_view value) {
  ThrowIfAny(field, value, IsDns1123Subdomain(value));
}

void RequireLabelKey(std::string_view field, std::string_view value) {
  ThrowIfAny(field, value, IsQualifiedName(value));
}

void RequireLabelValue(std::string_view field, std::string_view value) {
  ThrowIfAny(field, value, IsValidLabelValue(value));
}

void RequireStatefulSetName(std::string_view field, std::string_view name) {
  // The API server only requires a DNS-1123 subdomain, but the StatefulSet controller then
  // labels every pod with controller-revision-hash=<name>-<hash of up to 10 characters>; a longer
  // name makes that label invalid and the pods are never created. Fail before sending instead.
  std::vector<std::string> errs = IsDns1123Subdomain(name);
  if (name.size() > kStatefulSetNameMaxLength) {
    errs.push_back(MaxLenError(kStatefulSetNameMaxLength) +
                   " (the StatefulSet controller labels each pod with "
                   "controller-revision-hash=<name>-<10-character hash>, and that label value "
                   "must be no more than 63 characters)");
  }
  ThrowIfAny(field, name, errs);
}

// ---- the pod vocabulary ---------------------------------------------------------------------

namespace {

std::string Child(std::string_view prefix, std::string_view leaf) {
  std::string out(prefix);
  if (!out.empty()) out += ".";
  return out + std::string(leaf);
}

// The quantity, or nullopt when empty and not required (after RequireQuantity's checks).
std::optional<Quantity> ParsedQuantity(const std::string& field, const std::string& value,
                                       bool required) {
  RequireQuantity(field, value, required);
  if (value.empty()) return std::nullopt;
  return Quantity::Parse(value);
}

}  // namespace

void RequireQuantity(std::string_view field, std::string_view value, bool required) {
  if (value.empty()) {
    if (required) throw ValidationError(std::string(field), "", "must be set");
    return;
  }
  Quantity q;
  std::string why;
  if (!Quantity::TryParse(value, &q, &why)) {
    throw ValidationError(std::string(field), std::string(value), why);
  }
  if (q.Sign() < 0) {
    throw ValidationError(std::string(field), std::string(value), "must not be negative");
  }
}

void RequirePort(std::string_view field, int port) {
  if (port < 1 || port > 65535) {
    throw ValidationError(std::string(field), std::to_string(port),
                          "must be a port number in 1..65535");
  }
}

std::vector<std::string> IsEnvVarName(std::string_view value) {
  bool ok = !value.empty() && !(value.front() >= '0' && value.front() <= '9');
  for (char c : value) {
    const bool alnum = IsAlnum(c);
    if (!alnum && c != '-' && c != '.' && c != '_') ok = false;
  }
  if (ok) return {};
  return {RuleError(kEnvVarNameErrMsg, {"my.env-name", "MY_ENV.NAME", "MyEnvName1"})};
}

void ValidateResources(std::string_view field, const Resources& r, bool require_requests) {
  const auto cpu = ParsedQuantity(Child(field, "cpu"), r.cpu, require_requests);
  const auto memory = ParsedQuantity(Child(field, "memory"), r.memory, require_requests);
  const auto cpu_limit = ParsedQuantity(Child(field, "cpuLimit"), r.cpu_limit, false);
  const auto memory_limit = ParsedQuantity(Child(field, "memoryLimit"), r.memory_limit, false);
  if (r.gpus < 0) {
    throw ValidationError(Child(field, "gpus"), std::to_string(r.gpus), "must be >= 0");
  }
  if (cpu && cpu_limit && *cpu_limit < *cpu) {
    throw ValidationError(Child(field, "cpuLimit"), r.cpu_limit,
                          "must be at least the request (" + r.cpu + ")");
  }
  if (memory && memory_limit && *memory_limit < *memory) {
    throw ValidationError(Child(field, "memoryLimit"), r.memory_limit,
                          "must be at least the request (" + r.memory + ")");
  }
}

void ValidateEnv(std::string_view field, const std::vector<EnvVar>& env,
                 const ReservedEnvName& reserved) {
  std::vector<std::string_view> seen;
  for (std::size_t i = 0; i < env.size(); ++i) {
    const std::string f = std::string(field) + "[" + std::to_string(i) + "].name";
    const std::string& name = env[i].name;
    ThrowIfAny(f, name, IsEnvVarName(name));
    if (reserved) {
      if (std::string why = reserved(name); !why.empty()) throw ValidationError(f, name, why);
    }
    for (std::string_view s : seen) {
      if (s == name) throw ValidationError(f, name, "is set twice");
    }
    seen.push_back(name);
  }
}

void ValidatePlacement(std::string_view field, const Placement& p) {
  for (const auto& [leaf, value] :
       {std::pair{"nodetype", &p.nodetype}, std::pair{"cputype", &p.cputype},
        std::pair{"gputype", &p.gputype}, std::pair{"privateName", &p.private_name}}) {
    if (!value->empty()) RequireLabelValue(Child(field, leaf), *value);
  }
  if (!p.pool.empty() && p.pool != "shared" && p.pool != "unshared") {
    throw ValidationError(Child(field, "pool"), p.pool, "must be shared, unshared or empty (any)");
  }
  if (p.pool == "unshared" && p.private_name.empty()) {
    throw ValidationError(Child(field, "privateName"), "",
                          "unshared nodes are reserved to an owner: name it");
  }
  if (p.pool != "unshared" && !p.private_name.empty()) {
    throw ValidationError(Child(field, "privateName"), p.private_name,
                          "only applies to the pool \"unshared\"");
  }
}

void ValidatePodOptions(std::string_view prefix, const PodOptions& o) {
  const std::string at(prefix);
  const std::string& policy = o.image_pull_policy;
  if (!policy.empty() && policy != "Always" && policy != "IfNotPresent" && policy != "Never") {
    throw ValidationError(at + "imagePullPolicy", policy,
                          "must be Always, IfNotPresent, Never or empty (Kubernetes' default)");
  }
  for (std::size_t i = 0; i < o.image_pull_secrets.size(); ++i) {
    RequireDns1123Subdomain(fmt::format("{}imagePullSecrets[{}]", at, i), o.image_pull_secrets[i]);
  }
  if (!o.service_account.empty()) RequireDns1123Subdomain(at + "serviceAccount", o.service_account);
  if (!o.priority_class.empty()) {
    RequireDns1123Subdomain(at + "priorityClassName", o.priority_class);
    if (o.priority_class.rfind("system-", 0) == 0) {
      throw ValidationError(at + "priorityClassName", o.priority_class,
                            "must not start with \"system-\": the prefix is reserved for "
                            "Kubernetes' own classes (system-cluster-critical, "
                            "system-node-critical), which only kube-system pods may use");
    }
  }

  const SecurityContext& c = o.security_context;
  const std::string sc = at + "securityContext";
  for (const auto& [leaf, id] :
       {std::pair{"runAsUser", &c.run_as_user}, std::pair{"runAsGroup", &c.run_as_group},
        std::pair{"fsGroup", &c.fs_group}}) {
    if (*id && **id < 0) {
      throw ValidationError(Child(sc, leaf), std::to_string(**id), "must be a numeric id >= 0");
    }
  }
  if (c.run_as_non_root.value_or(false) && c.run_as_user.value_or(-1) == 0) {
    throw ValidationError(Child(sc, "runAsUser"), "0",
                          "user 0 is root, and runAsNonRoot is set: the kubelet would refuse "
                          "to start the container");
  }
  for (const auto& [leaf, caps] : {std::pair{"dropCapabilities", &c.drop_capabilities},
                                   std::pair{"addCapabilities", &c.add_capabilities}}) {
    for (std::size_t i = 0; i < caps->size(); ++i) {
      const std::string& cap = (*caps)[i];
      const bool upper = !cap.empty() && std::all_of(cap.begin(), cap.end(), [](char ch) {
        return (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
      });
      if (!upper) {
        throw ValidationError(fmt::format("{}.{}[{}]", sc, leaf, i), cap,
                              "must be a capability name in upper case without the CAP_ "
                              "prefix, e.g. ALL or NET_BIND_SERVICE");
      }
    }
  }
  if (!c.seccomp_profile.empty() && c.seccomp_profile != "RuntimeDefault" &&
      c.seccomp_profile != "Unconfined") {
    throw ValidationError(Child(sc, "seccompProfile"), c.seccomp_profile,
                          "must be RuntimeDefault, Unconfined or empty (the runtime's default)");
  }
}

std::chrono::milliseconds ParseDuration(std::string_view field, std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string_view unit = text.substr(digits);
  if (digits == 0 || digits > 9) {
    throw ValidationError(std::string(field), std::string(text),
                          "must be a whole number with an optional unit (ms, s, m, h)");
  }
  std::int64_t n = std::stoll(std::string(text.substr(0, digits)));
  if (unit.empty() || unit == "s") return std::chrono::seconds(n);
  if (unit == "ms") return std::chrono::milliseconds(n);
  if (unit == "m") return std::chrono::minutes(n);
  if (unit == "h") return std::chrono::hours(n);
  throw ValidationError(std::string(field), std::string(text),
                        "has an unknown unit (use ms, s, m or h)");
}

}  // namespace tfk8s::validation
