// Which namespace a DevInstance may live in: the personal-namespace rules of in-cluster launching
// (docs/devinstance.md "Launching workloads from inside"). RBAC cannot restrict which Secrets or
// claims a pod mounts, so an account that may create pods in a namespace can read every Secret
// and volume there; the instance's own account is therefore given only a namespace whose every
// object belongs to its owner.

#include <fmt/format.h>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/quota.hpp"
#include "workloads/common.hpp"
#include "workloads/devinstance_internal.hpp"

namespace tfk8s::internal {

namespace {

std::string WayOut(const DevInstanceSpec& spec) {
  return fmt::format(
      "create it in a namespace of {0}'s alone (a Quota with members: [{0}] makes "
      "<team>-{0}, labelled {1}={0}; a single-user team's namespace may be labelled so), or "
      "leave launchWorkloads off",
      spec.owner, kOwnerLabel);
}

}  // namespace

void CheckDevTenancy(const DevInstanceSpec& spec, const Json* namespace_object,
                     const std::string& unreadable_why) {
  const std::string& ns = spec.namespace_name;
  if (!namespace_object) {
    if (!spec.launch_workloads) return;
    throw ValidationError(
        "launchWorkloads", "true",
        fmt::format("namespace {} cannot be checked to be personal to {} ({}), and the "
                    "instance's account could read every Secret and volume of any other user "
                    "there; nothing was sent: {}",
                    ns, spec.owner, unreadable_why, WayOut(spec)));
  }
  const std::string personal = LabelOf(*namespace_object, kOwnerLabel);
  if (!personal.empty() && personal != spec.owner) {
    throw ValidationError(
        "owner", spec.owner,
        fmt::format("namespace {} is personal to {} (label {}={}): only {}'s instances go "
                    "there, where {}'s account may reach them; nothing was sent",
                    ns, personal, kOwnerLabel, personal, personal, personal));
  }
  if (spec.launch_workloads && personal != spec.owner) {
    throw ValidationError(
        "launchWorkloads", "true",
        fmt::format("namespace {} is not personal to {} (it has no label {}={}): the "
                    "instance's account could start a pod there that mounts any other user's "
                    "Secret or home volume in it, which no Role can forbid; nothing was sent: {}",
                    ns, spec.owner, kOwnerLabel, spec.owner, WayOut(spec)));
  }
}

void CheckDevTenancy(Client& client, const DevInstanceSpec& spec) {
  try {
    Json ns = GetChecked(client, kinds::kNamespaces, "", spec.namespace_name);
    CheckDevTenancy(spec, &ns, "");
  } catch (const NotFound&) {
    CheckDevTenancy(spec, nullptr, "it does not exist");
  } catch (const Forbidden&) {
    CheckDevTenancy(spec, nullptr, "these credentials may not read the Namespace");
  }
}

}  // namespace tfk8s::internal
