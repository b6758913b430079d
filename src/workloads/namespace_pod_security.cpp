// The pre-flight's Pod Security check: a workload's pods against the levels its namespace's
// `pod-security.kubernetes.io/*` labels set (what Pod Security admission would do on create).

#include <fmt/format.h>

#include "tfk8s/error.hpp"
#include "tfk8s/pod_security.hpp"
#include "tfk8s/quota.hpp"
#include "workloads/common.hpp"

namespace tfk8s {

namespace {

constexpr const char* kLabelPrefix = "pod-security.kubernetes.io/";

std::string ObjectName(const Json& object) {
  return fmt::format("{} {}", internal::StringAt(object, "kind"),
                     internal::StringAt(internal::At(object, "metadata"), "name"));
}

}  // namespace

FitResult EvaluateNamespacePodSecurity(const Json& namespace_object,
                                       const std::vector<Json>& objects) {
  FitResult fit;
  const std::string ns = internal::StringAt(internal::At(namespace_object, "metadata"), "name");
  // mode -> where its violations go; enforce refuses, warn and audit only tell.
  for (const char* mode : {"enforce", "warn", "audit"}) {
    const std::string label = std::string(kLabelPrefix) + mode;
    const std::string value = internal::LabelOf(namespace_object, label);
    if (value.empty()) continue;
    PodSecurityLevel level;
    try {
      level = ParsePodSecurityLevel(value);
    } catch (const ValidationError&) {
      fit.notes.push_back(
          fmt::format("Pod Security not checked for namespace {}: its label {}={} names no level "
                      "(privileged, baseline or restricted)",
                      ns, label, value));
      continue;
    }
    std::string version = internal::LabelOf(namespace_object, label + "-version");
    std::string pinned = version.empty() || version == "latest"
                             ? ""
                             : fmt::format(
                                   " (the namespace pins {}; checked against the "
                                   "latest definitions)",
                                   version);
    for (const auto& object : objects) {
      if (!IsPodCarrier(object)) continue;
      for (const auto& v : CheckPodSecurity(object, level)) {
        std::string line =
            fmt::format("Pod Security: namespace {} {}s \"{}\"{}: {} breaks {} at {}: {}", ns, mode,
                        value, pinned, ObjectName(object), v.check, v.field, v.message);
        if (std::string(mode) == "enforce") {
          fit.fits = false;
          fit.problems.push_back(std::move(line));
        } else {
          fit.notes.push_back(std::move(line));
        }
      }
    }
  }
  return fit;
}

FitResult CheckNamespacePodSecurity(Client& client, const std::string& ns,
                                    const std::vector<Json>& objects) {
  // Bad input fails before any request.
  for (const auto& object : objects) {
    if (IsPodCarrier(object)) (void)CheckPodSecurity(object, PodSecurityLevel::kPrivileged);
  }
  Json namespace_object;
  try {
    namespace_object = internal::GetChecked(client, internal::kinds::kNamespaces, "", ns);
  } catch (const NotFound&) {
    return {};  // creating anything there fails with the server's own NotFound
  } catch (const Forbidden& e) {
    // Namespaces are cluster-scoped: credentials limited to one namespace (a DevInstance's
    // launching Role) cannot read them. The server still enforces its labels.
    FitResult unchecked;
    unchecked.notes.push_back(fmt::format(
        "Pod Security not checked: these credentials cannot read namespace {} ({})", ns, e.what()));
    return unchecked;
  }
  return EvaluateNamespacePodSecurity(namespace_object, objects);
}

namespace internal {

void AddNamespacePodSecurity(Client& client, const std::string& ns,
                             const std::vector<Json>& objects, const PodSecurityPreflight& options,
                             FitResult* fit) {
  FitResult verdict = CheckNamespacePodSecurity(client, ns, objects);
  auto warn = [&](const std::string& line) {
    if (options.on_warning) options.on_warning(line);
  };
  for (const auto& note : verdict.notes) {
    fit->notes.push_back(note);
    if (note.rfind("Pod Security: ", 0) == 0) warn(note);  // a warn/audit level violation
  }
  if (options.admission == PodSecurityAdmission::kRefuse) {
    fit->fits = fit->fits && verdict.fits;
    fit->problems.insert(fit->problems.end(), verdict.problems.begin(), verdict.problems.end());
  } else {
    for (const auto& problem : verdict.problems) {
      fit->notes.push_back(problem);
      warn(problem);
    }
  }
}

}  // namespace internal

}  // namespace tfk8s
