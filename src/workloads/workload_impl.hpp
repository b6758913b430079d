#pragma once
// Internal: the members of tfk8s::Workload<Kind>, written once over the kind's pure parts
// (internal::KindOps<Kind>). Included only by each kind's .cpp, which instantiates the
// template explicitly (`template class Workload<TFClusterKind>;`); see
// docs/adr/0002-workload-spine.md.
//
// What a KindOps<Kind> specialisation supplies (all static):
//   kFacts                      a KindFacts<Spec> (below): noun, name rule, name label, root
//                               type and how the spec is taken from the root, the pure render,
//                               wait policy
//   LoadSpec(client, ns, name, &uid) and RefTypes(client)   only for a kind whose root is not
//                               one object named after the workload (kFacts.root_type null)
//   RefSelector()               the roots' label selector (before the owner is added)
//   Preflight(client, spec), Status(client, spec)
//   Render(client, spec)        only for a kind whose kFacts.render is null
//   RenderOwned(spec, root_uid) the objects with ownerReferences to the root (kinds whose
//                               root has children), or RenderForApply(client, spec), or
//                               neither (then RenderForApply() is Render())
//   Watches(spec)               what a wait watches, and
//   Judge(context, snapshot)    the status and its verdict from what the watches hold (a
//                               JudgeContext: client, spec, until, name); only kinds with
//                               Kind::kWaitsForStatus

#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tfk8s/error.hpp"
#include "tfk8s/workload.hpp"
#include "tfk8s/yaml.hpp"
#include "workloads/common.hpp"
#include "workloads/identity.hpp"
#include "workloads/wait.hpp"

namespace tfk8s {

namespace internal {

/// What a kind is, as data (KindOps<Kind>::kFacts).
template <typename Spec>
struct KindFacts {
  const char* noun;                                                   ///< "cluster", for messages.
  void (*name_rule)(std::string_view field, std::string_view value);  ///< The name's rule.
  const char* name_label;  ///< The label holding the workload's name.
  /// The root: one object of this type named after the workload (null: the kind's own
  /// LoadSpec and RefTypes say where it is), and how the spec is taken from it.
  const ResourceType* root_type = nullptr;
  Spec (*from_root)(const Json& root, RootIdentity* identity) = nullptr;
  /// The objects, from the spec alone (null: the kind's own Render(client, spec) asks the
  /// server what to render for).
  std::vector<Json> (*render)(const Spec& spec) = nullptr;
  bool waits_only_until_ready = false;  ///< Every wait is until ready (a DevInstance's).
};

/// `e` (the root's GET found nothing) in the user's terms: "TFCluster ns/name not found (no
/// ConfigMap name in namespace ns)", the server's status kept.
[[noreturn]] inline void ThrowWorkloadNotFound(const NotFound& e, std::string_view kind,
                                               std::string_view root_kind, const std::string& ns,
                                               const std::string& name) {
  throw NotFound(ErrorKind::kNotFound,
                 fmt::format("{} {}/{} not found (no {} {} in namespace {})", kind, ns, name,
                             root_kind, name, ns),
                 e.http_code(), e.reason(), e.server_message(), e.causes());
}

/// KindOps::LoadSpec of a kind whose root is one object named after the workload, of `type`:
/// read it (NotFound when absent) and take the spec from it with `from_root` (the identity
/// check); `uid` receives the root's UID.
template <typename Spec>
Spec LoadSpecFromRoot(Client& client, const ResourceType& type, const std::string& ns,
                      const std::string& name, std::string* uid,
                      Spec (*from_root)(const Json& root, RootIdentity* identity)) {
  RootIdentity id;
  Spec spec = from_root(GetChecked(client, type, ns, name), &id);
  *uid = std::move(id.uid);
  return spec;
}

}  // namespace internal

template <typename Kind>
Workload<Kind>::Workload(Client client, SpecType spec)
    : client_(std::move(client)), spec_(std::move(spec)) {
  spec_.Validate();
}

template <typename Kind>
void Workload<Kind>::set_spec(SpecType spec) {
  spec.Validate();
  if (spec.name != spec_.name || spec.namespace_name != spec_.namespace_name ||
      spec.owner != spec_.owner) {
    throw ValidationError("name", spec.name,
                          fmt::format("a {} cannot be renamed, moved or given away; delete it",
                                      internal::KindOps<Kind>::kFacts.noun));
  }
  spec_ = std::move(spec);
}

template <typename Kind>
typename Workload<Kind>::SpecType Workload<Kind>::LoadSpec(Client& client, const std::string& ns,
                                                           const std::string& name,
                                                           std::string* uid) {
  // Checked first: the name also goes into label selectors.
  using Ops = internal::KindOps<Kind>;
  internal::RequireWorkloadName(ns, name, Ops::kFacts.name_rule);
  if constexpr (requires { Ops::LoadSpec(client, ns, name, uid); }) {
    return Ops::LoadSpec(client, ns, name, uid);
  } else {
    try {
      return internal::LoadSpecFromRoot(client, *Ops::kFacts.root_type, ns, name, uid,
                                        Ops::kFacts.from_root);
    } catch (const NotFound& e) {
      internal::ThrowWorkloadNotFound(e, Kind::kName, Ops::kFacts.root_type->kind,
                                      ns.empty() ? client.default_namespace() : ns, name);
    }
  }
}

template <typename Kind>
typename Workload<Kind>::ObjectType Workload<Kind>::Load(Client client, const std::string& ns,
                                                         const std::string& name) {
  std::string uid;
  SpecType spec = LoadSpec(client, ns, name, &uid);
  ObjectType loaded(std::move(client), std::move(spec));
  static_cast<Workload&>(loaded).root_uid_ = std::move(uid);
  return loaded;
}

template <typename Kind>
std::vector<std::string> Workload<Kind>::List(Client client, const std::string& ns) {
  internal::RequireOneNamespace(ns, std::string(Kind::kName) + "::ListRefs");
  return internal::Names(ListRefs(std::move(client), ns));
}

template <typename Kind>
std::vector<WorkloadRef> Workload<Kind>::ListRefs(Client client, const std::string& ns,
                                                  const std::string& owner,
                                                  const std::string& label_selector) {
  using Ops = internal::KindOps<Kind>;
  ListOptions sel;
  sel.label_selector = internal::WithOwner(Ops::RefSelector(), owner);
  if (!label_selector.empty()) sel.label_selector += "," + label_selector;
  // (namespace, name) -> (owner, created): a workload may have several roots (a task's
  // CronJob and runs); it was created with the oldest (RFC 3339 in UTC sorts as text).
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> found;
  std::vector<ResourceType> types;
  if constexpr (requires { Ops::RefTypes(client); }) {
    types = Ops::RefTypes(client);
  } else {
    types = {*Ops::kFacts.root_type};
  }
  for (const ResourceType& type : types) {
    for (const auto& o : internal::Items(client.ListAll(type, ns, sel))) {
      const Json& metadata = internal::At(o, "metadata");
      const Json& labels = internal::At(metadata, "labels");
      std::string name = internal::StringAt(labels, Ops::kFacts.name_label);
      if (name.empty()) continue;
      std::string created = internal::StringAt(metadata, "creationTimestamp");
      auto [it, added] = found.try_emplace(
          std::make_pair(internal::StringAt(metadata, "namespace"), std::move(name)),
          internal::StringAt(labels, kOwnerLabel), created);
      if (!added && !created.empty() &&
          (it->second.second.empty() || created < it->second.second)) {
        it->second.second = std::move(created);
      }
    }
  }
  std::vector<WorkloadRef> refs;
  refs.reserve(found.size());
  for (auto& [where, what] : found) {
    refs.push_back({where.first, where.second, what.first, what.second});
  }
  return refs;  // sorted by the map: namespace, then name
}

template <typename Kind>
FitResult Workload<Kind>::Preflight() {
  return internal::KindOps<Kind>::Preflight(client_, spec_);
}

template <typename Kind>
typename Workload<Kind>::StatusType Workload<Kind>::Status() {
  return internal::KindOps<Kind>::Status(client_, spec_);
}

template <typename Kind>
typename Workload<Kind>::StatusType Workload<Kind>::Wait(
    const WaitOptions<StatusType>& options) requires Kind::kWaitsForStatus {
  if constexpr (Kind::kWaitsForStatus) {
    using Ops = internal::KindOps<Kind>;
    const std::string what = fmt::format("{} {}/{}", Kind::kName, spec_.namespace_name, spec_.name);
    WaitOptions<StatusType> checked = options;
    if constexpr (Ops::kFacts.waits_only_until_ready) checked.until = WaitUntil::kReady;
    internal::JudgeContext<SpecType> context(client_, spec_, checked.until, what);
    return internal::Wait<StatusType>(client_, spec_.namespace_name, Ops::Watches(spec_), what,
                                      checked, [&context](const internal::WaitSnapshot& snapshot) {
                                        return Ops::Judge(context, snapshot);
                                      });
  } else {
    // Never called: the requires-clause hides Wait from such kinds. Clang before 16 still
    // instantiates the body with the class (the explicit instantiation), so it must compile.
    std::abort();
  }
}

template <typename Kind>
std::vector<Json> Workload<Kind>::Render() const {
  using Ops = internal::KindOps<Kind>;
  if constexpr (Ops::kFacts.render != nullptr) {
    return Ops::kFacts.render(spec_);
  } else {
    return Ops::Render(client_, spec_);
  }
}

template <typename Kind>
std::string Workload<Kind>::ToYaml() const {
  return ToYamlDocuments(Render());
}

template <typename Kind>
std::vector<Json> Workload<Kind>::RenderForApply() const {
  using Ops = internal::KindOps<Kind>;
  if constexpr (requires { Ops::RenderOwned(spec_, std::string()); }) {
    std::string uid;
    Client client = client_;
    try {
      SpecType stored = LoadSpec(client, spec_.namespace_name, spec_.name, &uid);
      if (stored.owner != spec_.owner) {
        throw ValidationError(
            "owner", spec_.owner,
            fmt::format("{} {}/{} exists and is {}'s: a {} cannot be given away; delete it",
                        Kind::kName, spec_.namespace_name, spec_.name,
                        stored.owner.empty() ? std::string("nobody") : stored.owner,
                        Ops::kFacts.noun));
      }
    } catch (const NotFound&) {
      return Render();
    }
    return Ops::RenderOwned(spec_, uid);
  } else if constexpr (requires { Ops::RenderForApply(client_, spec_); }) {
    return Ops::RenderForApply(client_, spec_);
  } else {
    return Render();
  }
}

}  // namespace tfk8s
