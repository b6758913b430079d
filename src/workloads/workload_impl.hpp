#pragma once
// Internal: the members of tfk8s::Workload<Kind>, written once over the kind's pure parts
// (internal::KindOps<Kind>). Included only by each kind's .cpp, which instantiates the
// template explicitly (`template class Workload<TFClusterKind>;`); see
// docs/adr/0002-workload-spine.md.
//
// What a KindOps<Kind> specialisation supplies (all static but the Judge):
//   kNoun                       "cluster", for messages
//   kNameRule                   the workload name's validation rule
//   LoadSpec(client, ns, name, &uid)   the spec from the root object (identity checked)
//   RefTypes(client)            the resource types a listing reads (the roots)
//   RefSelector()               their label selector (before the owner is added)
//   kNameLabel                  the label holding the workload's name
//   Preflight(client, spec), Status(client, spec), Render(client, spec)
//   Judge(client, spec, until)  with Watches(), What(), and operator()(snapshot) -> the status
//                               and its verdict (only kinds with Kind::kWaitsForStatus)

#include <fmt/format.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tfk8s/error.hpp"
#include "tfk8s/workload.hpp"
#include "tfk8s/yaml.hpp"
#include "workloads/common.hpp"
#include "workloads/wait.hpp"

namespace tfk8s {

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
                                      internal::KindOps<Kind>::kNoun));
  }
  spec_ = std::move(spec);
}

template <typename Kind>
typename Workload<Kind>::SpecType Workload<Kind>::LoadSpec(Client& client, const std::string& ns,
                                                           const std::string& name,
                                                           std::string* uid) {
  // Checked first: the name also goes into label selectors.
  internal::RequireWorkloadName(ns, name, internal::KindOps<Kind>::kNameRule);
  return internal::KindOps<Kind>::LoadSpec(client, ns, name, uid);
}

template <typename Kind>
std::vector<std::string> Workload<Kind>::List(Client client, const std::string& ns) {
  internal::RequireOneNamespace(ns, std::string(Kind::kName) + "::ListRefs");
  return internal::Names(ListRefs(std::move(client), ns));
}

template <typename Kind>
std::vector<WorkloadRef> Workload<Kind>::ListRefs(Client client, const std::string& ns,
                                                  const std::string& owner) {
  using Ops = internal::KindOps<Kind>;
  ListOptions sel;
  sel.label_selector = internal::WithOwner(Ops::RefSelector(), owner);
  // (namespace, name) -> owner: a workload may have several roots (a task's CronJob and runs).
  std::map<std::pair<std::string, std::string>, std::string> found;
  for (const ResourceType& type : Ops::RefTypes(client)) {
    for (const auto& o : internal::Items(client.ListAll(type, ns, sel))) {
      const Json& metadata = internal::At(o, "metadata");
      const Json& labels = internal::At(metadata, "labels");
      std::string name = internal::StringAt(labels, Ops::kNameLabel);
      if (!name.empty()) {
        found.emplace(std::make_pair(internal::StringAt(metadata, "namespace"), std::move(name)),
                      internal::StringAt(labels, kOwnerLabel));
      }
    }
  }
  std::vector<WorkloadRef> refs;
  refs.reserve(found.size());
  for (auto& [where, who] : found) refs.push_back({where.first, where.second, who});
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
  typename internal::KindOps<Kind>::Judge judge(client_, spec_, options.until);
  return internal::Wait<StatusType>(
      client_, spec_.namespace_name, judge.Watches(), judge.What(), judge.Options(options),
      [&judge](const internal::WaitSnapshot& snapshot) { return judge(snapshot); });
}

template <typename Kind>
std::vector<Json> Workload<Kind>::Render() const {
  return internal::KindOps<Kind>::Render(client_, spec_);
}

template <typename Kind>
std::string Workload<Kind>::ToYaml() const {
  return ToYamlDocuments(Render());
}

}  // namespace tfk8s
