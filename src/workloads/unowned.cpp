// Internal: deleting what `kubectl apply` of `tfk8s render` left without an owner; see
// unowned.hpp.

#include "workloads/unowned.hpp"

#include <algorithm>

#include "tfk8s/error.hpp"
#include "workloads/common.hpp"

namespace tfk8s::internal {

namespace {

// The types a workload renders besides Secrets, as the server names them.
const ResourceType kServiceAccounts{"", "v1", "ServiceAccount", "serviceaccounts", true};
const ResourceType kRoles{"rbac.authorization.k8s.io", "v1", "Role", "roles", true};
const ResourceType kRoleBindings{"rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings",
                                 true};

const ResourceType* TypeOf(const Json& object) {
  using namespace kinds;
  static const ResourceType* const kKnown[] = {&kConfigMaps,   &kServices,    &kPvcs,
                                               &kStatefulSets, &kJobs,        &kServiceAccounts,
                                               &kRoles,        &kRoleBindings};
  const std::string api_version = StringAt(object, "apiVersion");
  const std::string kind = StringAt(object, "kind");
  for (const ResourceType* t : kKnown) {
    if (t->kind == kind && t->ApiVersion() == api_version) return t;
  }
  return nullptr;
}

bool Unowned(const Json& object, const std::map<std::string, std::string>& labels) {
  const Json& metadata = At(object, "metadata");
  const Json& refs = At(metadata, "ownerReferences");
  if (refs.is_array() && !refs.empty()) return false;
  const Json& have = At(metadata, "labels");
  return std::all_of(labels.begin(), labels.end(),
                     [&](const auto& kv) { return StringAt(have, kv.first) == kv.second; });
}

}  // namespace

std::vector<DeletedObject> DeleteUnownedRendered(Client& client, const std::vector<Json>& rendered,
                                                 const std::map<std::string, std::string>& labels,
                                                 const std::string& propagation) {
  std::vector<DeletedObject> deleted;
  for (std::size_t i = 1; i < rendered.size(); ++i) {
    const ResourceType* type = TypeOf(rendered[i]);
    if (type == nullptr) continue;  // a Secret (never read), or a kind not rendered today
    const Json& metadata = At(rendered[i], "metadata");
    const std::string ns = StringAt(metadata, "namespace");
    const std::string name = StringAt(metadata, "name");
    std::optional<Json> current;
    try {
      current = GetOptional(client, *type, ns, name);
    } catch (const Forbidden&) {
      continue;  // credentials that may not read this kind (a launching Role): not theirs
    }
    if (!current || !Unowned(*current, labels)) continue;
    DeleteOptions del;
    del.propagation_policy = propagation;
    del.precondition_uid = StringAt(At(*current, "metadata"), "uid");
    try {
      client.Delete(*type, ns, name, del);
      deleted.push_back({*type, name});
    } catch (const NotFound&) {
    } catch (const Conflict&) {
      // Re-created under its name meanwhile: not the object that was read.
    }
  }
  return deleted;
}

bool WaitUntilGone(Client& client, const std::string& ns, const std::vector<DeletedObject>& objects,
                   std::chrono::steady_clock::time_point deadline) {
  for (const auto& o : objects) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!WaitForObject(client, o.type, ns, o.name, std::max(left, std::chrono::milliseconds(1)),
                       [](const Json* object) { return object == nullptr; })) {
      return false;
    }
  }
  return true;
}

}  // namespace tfk8s::internal
