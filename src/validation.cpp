// Name and label validation with the rules and messages of
// k8s.io/apimachinery/pkg/util/validation (validation.go). The regular expressions are matched
// by hand (they are all simple character-class patterns), but the messages quote the same
// regular expressions Kubernetes prints so that users see identical text client- and server-side.

#include "tfk8s/validation.hpp"

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "tfk8s/error.hpp"

namespace tfk8s::validation {
namespace {

constexpr std::string_view kDns1123LabelFmt = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr std::string_view kDns1123LabelErrMsg =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character";
constexpr std::string_view kDns1123SubdomainFmt =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr std::string_view kDns1123SubdomainErrMsg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character";
constexpr std::string_view kDns1035LabelFmt = "[a-z]([-a-z0-9]*[a-z0-9])?";
constexpr std::string_view kDns1035LabelErrMsg =
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character";
constexpr std::string_view kQualifiedNameFmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr std::string_view kQualifiedNameErrMsg =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";
constexpr std::size_t kQualifiedNameMaxLength = 63;
constexpr std::string_view kLabelValueFmt = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
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

// validation.RegexError.
std::string RegexError(std::string_view msg, std::string_view fmt,
                       std::initializer_list<std::string_view> examples) {
  std::string out(msg);
  if (examples.size() == 0) {
    return out + " (regex used for validation is '" + std::string(fmt) + "')";
  }
  out += " (e.g. ";
  bool first = true;
  for (std::string_view example : examples) {
    if (!first) out += " or ";
    first = false;
    out += "'" + std::string(example) + "', ";
  }
  out += "regex used for validation is '" + std::string(fmt) + "')";
  return out;
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
      errs.push_back(RegexError(kDns1123LabelErrMsg, kDns1123LabelFmt, {"my-name", "123-abc"}));
    }
  }
  return errs;
}

std::vector<std::string> IsDns1035Label(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kDns1123LabelMaxLength) errs.push_back(MaxLenError(kDns1123LabelMaxLength));
  if (!MatchesDns1123Label(value) || !(value.front() >= 'a' && value.front() <= 'z')) {
    errs.push_back(RegexError(kDns1035LabelErrMsg, kDns1035LabelFmt, {"my-name", "abc-123"}));
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
    errs.push_back(RegexError(kDns1123SubdomainErrMsg, kDns1123SubdomainFmt, {"example.com"}));
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
                     RegexError(kQualifiedNameErrMsg, kQualifiedNameFmt,
                                {"MyName", "my.name", "123-abc"}) +
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
    errs.push_back("name part " + RegexError(kQualifiedNameErrMsg, kQualifiedNameFmt,
                                             {"MyName", "my.name", "123-abc"}));
  }
  return errs;
}

std::vector<std::string> IsValidLabelValue(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kLabelValueMaxLength) errs.push_back(MaxLenError(kLabelValueMaxLength));
  if (!value.empty() && !MatchesQualifiedName(value)) {
    errs.push_back(
        RegexError(kLabelValueErrMsg, kLabelValueFmt, {"MyValue", "my_value", "12345"}));
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

}  // namespace tfk8s::validation
