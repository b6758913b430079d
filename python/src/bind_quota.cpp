// Team queues, quota usage, pre-flight checks and node placement (quota.hpp, placement.hpp) with
// dicts in and out. The Pythonic front end is python/tfk8s/quota.py. Every call that touches
// the network runs without the GIL.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "tfk8s/placement.hpp"
#include "tfk8s/quota.hpp"

namespace tfk8s::python {

namespace {

using NoGil = py::call_guard<py::gil_scoped_release>;
using StringMap = std::map<std::string, std::string>;

Json ListToJson(const ResourceList& list) {
  Json out = Json::object();
  for (const auto& [key, value] : list) out[key] = value.ToString();
  return out;
}

/// {"usages": [...], "table": text} for a list of usages.
Json UsagesToJson(const std::vector<QuotaUsage>& usages) {
  return {{"usages", ToJsonList(usages)}, {"table", FormatUsageTable(usages)}};
}

std::vector<Json> ObjectList(const Json& objects) {
  if (objects.is_object()) return {objects};
  if (!objects.is_array()) throw ValidationError("objects", objects.dump(), "must be a list");
  return objects.get<std::vector<Json>>();
}

}  // namespace

void BindQuota(py::module_& m) {
  m.def(
      "render_quota", [](const Json& spec) { return RenderQuota(QuotaSpec::FromJson(spec)); },
      py::arg("spec"), "The queue's objects (Namespace, ResourceQuota, LimitRange) as dicts.");
  m.def(
      "apply_quota",
      [](Client& client, const Json& spec, bool wait_ready, double ready_timeout, bool force) {
        QuotaSpec q = QuotaSpec::FromJson(spec);
        ApplyQuotaOptions options;
        options.wait_ready = wait_ready;
        options.ready_timeout = std::chrono::milliseconds(
            static_cast<std::int64_t>(std::max(0.0, ready_timeout) * 1000));
        options.force = force;
        return UsagesToJson({ApplyQuota(client, q, options)});
      },
      py::arg("client"), py::arg("spec"), py::arg("wait_ready") = true,
      py::arg("ready_timeout") = 30.0, py::arg("force") = false, NoGil(),
      "Server-side applies a queue; returns {usages, table}.");
  m.def("delete_quota", &DeleteQuota, py::arg("client"), py::arg("name"),
        py::arg("delete_namespace") = false, NoGil(),
        "Deletes a queue's ResourceQuota and LimitRange (or the whole namespace, only one "
        "tfk8s created: else ValidationError, nothing deleted). Missing objects are not an "
        "error: returns whether there was anything to delete.");
  m.def(
      "get_quota",
      [](Client& client, const std::string& name) { return GetQuotaSpec(client, name).ToJson(); },
      py::arg("client"), py::arg("name"), NoGil(),
      "The queue's spec as the server holds it (what apply_quota takes); NotFound when the "
      "namespace has neither its ResourceQuota nor its LimitRange.");
  m.def(
      "quota_usage",
      [](Client& client, const std::string& ns) { return UsagesToJson(GetQuotaUsage(client, ns)); },
      py::arg("client"), py::arg("namespace"), NoGil(),
      "Usage of every ResourceQuota in a namespace: {usages, table}.");
  m.def(
      "list_queues", [](Client& client) { return UsagesToJson(ListQueues(client)); },
      py::arg("client"), NoGil(), "Usage of every tfk8s queue: {usages, table}.");
  m.def(
      "check_quota",
      [](Client& client, const std::string& ns, const Json& objects) {
        return CheckQuota(client, ns, ObjectList(objects)).ToJson();
      },
      py::arg("client"), py::arg("namespace"), py::arg("objects"), NoGil(),
      "Would these objects fit the namespace's quota? {fits, shortfalls, problems, message}.");
  m.def(
      "check_placement",
      [](Client& client, const Json& objects) {
        return CheckPlacement(client, ObjectList(objects)).ToJson();
      },
      py::arg("client"), py::arg("objects"), NoGil(),
      "Could every pod of these objects ever be placed on some node?");
  m.def(
      "quota_demand",
      [](const Json& objects) { return ListToJson(QuotaDemandOf(ObjectList(objects))); },
      py::arg("objects"), "What the objects would add to a namespace's quota usage.");
  m.def("set_node_labels", &SetNodeLabels, py::arg("client"), py::arg("node"), py::arg("labels"),
        NoGil(), "Sets labels on a node (validated against the seed rules); returns the node.");
  m.def("remove_node_labels", &RemoveNodeLabels, py::arg("client"), py::arg("node"),
        py::arg("keys"), NoGil(), "Removes labels from a node; returns the node.");
  m.def("update_node_labels", &UpdateNodeLabels, py::arg("client"), py::arg("node"), py::arg("set"),
        py::arg("remove"), NoGil(), "Sets and removes node labels in one patch; returns the node.");
  m.def(
      "inventory", [](Client& client) { return GetInventory(client).ToJson(); }, py::arg("client"),
      NoGil(),
      "Nodes with allocatable, requested and free resources, grouped by gputype, cputype, pool.");
  m.def(
      "where_fits",
      [](Client& client, const StringMap& requests, const StringMap& node_selector) {
        ResourceList list;
        for (const auto& [k, v] : requests) list[k] = Quantity::Parse(v);
        return WhereFits(client, list, node_selector);
      },
      py::arg("client"), py::arg("requests"), py::arg("node_selector") = StringMap{}, NoGil(),
      "Names of the nodes where one pod with these requests fits right now.");
}

}  // namespace tfk8s::python
