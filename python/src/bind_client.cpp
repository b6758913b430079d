// The generic client: ResourceType, the option structs and Client's discovery, read and write
// calls. Every call that may touch the network runs without the GIL. Streams are in
// bind_streams.cpp.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "tfk8s/client.hpp"

namespace tfk8s::python {

namespace {

using NoGil = py::call_guard<py::gil_scoped_release>;

template <typename T>
std::string ReprField(const char* name, const T& value, bool first = false) {
  return std::string(first ? "" : ", ") + name + "=" +
         py::repr(py::cast(value)).template cast<std::string>();
}

// "list pods.apps ns" for error messages, like the client's own.
std::string ListContext(const ResourceType& type, std::string_view ns) {
  std::string what = "list " + type.plural;
  if (!type.group.empty()) what += "." + type.group;
  if (!ns.empty()) what += " " + std::string(ns);
  return what;
}

// Client::ListAll with each page decoded by JsonTextToPython: the requests run without the
// GIL, each page takes it only while it is decoded.
py::object ListAll(Client& c, const ResourceType& type, std::string_view ns,
                   const ListOptions& options, std::int64_t page_size) {
  const std::string context = ListContext(type, ns);
  py::object result;
  py::list items;
  {
    py::gil_scoped_release release;
    c.ListPages(type, ns, options, page_size, [&](std::string text) {
      py::gil_scoped_acquire gil;
      py::object page = JsonTextToPython(std::move(text), context);
      std::string next;
      if (py::isinstance<py::dict>(page)) {
        py::dict d = page;
        if (d.contains("metadata") && py::isinstance<py::dict>(d["metadata"])) {
          py::dict metadata = d["metadata"];
          if (metadata.contains("continue") && py::isinstance<py::str>(metadata["continue"])) {
            next = metadata["continue"].cast<std::string>();
          }
        }
        if (d.contains("items") && py::isinstance<py::list>(d["items"])) {
          for (auto item : d["items"]) items.append(item);
        }
      }
      if (!result) result = page;
      return next;
    });
  }
  if (py::isinstance<py::dict>(result)) {
    py::dict d = result;
    d["items"] = items;
    if (d.contains("metadata") && py::isinstance<py::dict>(d["metadata"])) {
      d["metadata"].attr("pop")("continue", py::none());
    }
  }
  return result;
}

}  // namespace

void BindClient(py::module_& m) {
  // ---- ResourceType -----------------------------------------------------------------------
  py::class_<ResourceType>(m, "ResourceType",
                           "One kind of resource as the server serves it: group, version, kind, "
                           "plural (the URL segment) and whether it is namespaced.")
      .def(py::init([](std::string group, std::string version, std::string kind, std::string plural,
                       bool namespaced) {
             return ResourceType{std::move(group), std::move(version), std::move(kind),
                                 std::move(plural), namespaced};
           }),
           py::arg("group"), py::arg("version"), py::arg("kind"), py::arg("plural"),
           py::arg("namespaced") = true)
      .def_readwrite("group", &ResourceType::group, "'' for the core group.")
      .def_readwrite("version", &ResourceType::version)
      .def_readwrite("kind", &ResourceType::kind)
      .def_readwrite("plural", &ResourceType::plural)
      .def_readwrite("namespaced", &ResourceType::namespaced)
      .def_property_readonly("api_version", &ResourceType::ApiVersion,
                             "'apps/v1', or 'v1' for the core group.")
      .def("collection_path", &ResourceType::CollectionPath, py::arg("namespace"),
           "The collection URL path ('' namespace = all namespaces).")
      .def("object_path", &ResourceType::ObjectPath, py::arg("namespace"), py::arg("name"),
           py::arg("subresource") = "", "The object URL path, with an optional subresource.")
      .def(py::self == py::self)
      .def("__hash__",
           [](const ResourceType& t) {
             return py::hash(py::make_tuple(t.group, t.version, t.kind, t.plural, t.namespaced));
           })
      .def("__repr__", [](const ResourceType& t) {
        return "ResourceType(" + ReprField("group", t.group, true) +
               ReprField("version", t.version) + ReprField("kind", t.kind) +
               ReprField("plural", t.plural) + ReprField("namespaced", t.namespaced) + ")";
      });

  // ---- options ----------------------------------------------------------------------------
  py::class_<ListOptions>(m, "ListOptions", "Options of list calls (and informer selectors).")
      .def(py::init<>())
      .def_readwrite("label_selector", &ListOptions::label_selector)
      .def_readwrite("field_selector", &ListOptions::field_selector)
      .def_readwrite("limit", &ListOptions::limit, "Page size; 0 = no paging.")
      .def_readwrite("continue_token", &ListOptions::continue_token)
      .def_readwrite("resource_version", &ListOptions::resource_version)
      .def_readwrite("resource_version_match", &ListOptions::resource_version_match)
      .def_readwrite("timeout_seconds", &ListOptions::timeout_seconds);

  py::class_<WriteOptions>(m, "WriteOptions", "Options of create, replace and patch.")
      .def(py::init<>())
      .def_readwrite("dry_run", &WriteOptions::dry_run)
      .def_readwrite("field_manager", &WriteOptions::field_manager);

  py::class_<ApplyOptions>(m, "ApplyOptions", "Options of server-side apply.")
      .def(py::init<>())
      .def_readwrite("field_manager", &ApplyOptions::field_manager)
      .def_readwrite("force", &ApplyOptions::force)
      .def_readwrite("dry_run", &ApplyOptions::dry_run);

  py::class_<DeleteOptions>(m, "DeleteOptions", "Options of delete calls.")
      .def(py::init<>())
      .def_readwrite("propagation_policy", &DeleteOptions::propagation_policy,
                     "'Foreground', 'Background', 'Orphan' or ''.")
      .def_readwrite("grace_period_seconds", &DeleteOptions::grace_period_seconds)
      .def_readwrite("precondition_uid", &DeleteOptions::precondition_uid)
      .def_readwrite("precondition_resource_version", &DeleteOptions::precondition_resource_version)
      .def_readwrite("dry_run", &DeleteOptions::dry_run);

  py::enum_<PatchType>(m, "PatchType", "How a patch body is interpreted.")
      .value("MERGE", PatchType::kMerge, "application/merge-patch+json")
      .value("STRATEGIC_MERGE", PatchType::kStrategicMerge,
             "application/strategic-merge-patch+json")
      .value("JSON", PatchType::kJson, "application/json-patch+json");

  // ---- Client -----------------------------------------------------------------------------
  py::class_<Client> client(
      m, "Client",
      "The C++ client, close to its C++ signatures (ResourceType + namespace). Most code uses "
      "tfk8s.Client, the Pythonic front end over this class. Thread-safe; every network call "
      "releases the GIL.");
  client
      .def(py::init<ClientConfig>(), py::arg("config"), NoGil(),
           "Connects with an explicit configuration.")
      .def_static(
          "from_default",
          [](std::string path, std::string context, std::string namespace_override) {
            KubeconfigOptions options;
            options.path = std::move(path);
            options.context = std::move(context);
            options.namespace_override = std::move(namespace_override);
            return Client::FromDefault(options);
          },
          py::arg("path") = "", py::arg("context") = "", py::arg("namespace") = "", NoGil(),
          "Loads the configuration automatically (kubeconfig, then in-cluster).")
      .def_property_readonly(
          "config", [](const Client& c) { return c.config(); },
          "A copy of the configuration in use.")
      .def_property_readonly("default_namespace", &Client::default_namespace,
                             "The namespace used when a call gets '' for a namespaced type.")
      // discovery
      .def("resolve", &Client::Resolve, py::arg("api_version"), py::arg("kind"), NoGil(),
           "The ResourceType of apiVersion + kind, from discovery (cached). Raises NotFound.")
      .def("resolve_preferred", &Client::ResolvePreferred, py::arg("group"), py::arg("kind"),
           py::arg("versions"), NoGil(),
           "The first of `versions` in which the server serves group/kind.")
      .def("server_group_versions", &Client::ServerGroupVersions, NoGil(),
           "Every group version the server serves, preferred versions first.")
      .def("server_version", &Client::ServerVersion, NoGil(), "The server's /version document.")
      .def("invalidate_discovery", &Client::InvalidateDiscovery, NoGil(),
           "Forgets cached discovery (after installing a CRD).")
      // reads
      .def("get",
           py::overload_cast<const ResourceType&, std::string_view, std::string_view,
                             std::string_view>(&Client::Get),
           py::arg("type"), py::arg("namespace"), py::arg("name"), py::arg("subresource") = "",
           NoGil(), "GET one object (or a subresource such as 'status' or 'scale').")
      .def(
          "get_by_kind",
          py::overload_cast<std::string_view, std::string_view, std::string_view, std::string_view>(
              &Client::Get),
          py::arg("api_version"), py::arg("kind"), py::arg("namespace"), py::arg("name"), NoGil(),
          "GET one object by apiVersion and kind.")
      .def(
          "list",
          [](Client& c, const ResourceType& type, std::string_view ns, const ListOptions& options) {
            std::string text;
            {
              py::gil_scoped_release release;
              text = c.ListText(type, ns, options);
            }
            return JsonTextToPython(std::move(text), ListContext(type, ns));
          },
          py::arg("type"), py::arg("namespace"),
          py::arg_v("options", ListOptions{}, "ListOptions()"),
          "One page of a list ('' namespace = all namespaces).")
      .def("list_all", &ListAll, py::arg("type"), py::arg("namespace"),
           py::arg_v("options", ListOptions{}, "ListOptions()"), py::arg("page_size") = 500,
           "Every page of a list, concatenated; metadata.resourceVersion is the first page's.")
      // writes
      .def("create", &Client::Create, py::arg("type"), py::arg("namespace"), py::arg("object"),
           py::arg_v("options", WriteOptions{}, "WriteOptions()"), NoGil(), "POST a new object.")
      .def("replace", &Client::Replace, py::arg("type"), py::arg("namespace"), py::arg("object"),
           py::arg_v("options", WriteOptions{}, "WriteOptions()"), py::arg("subresource") = "",
           NoGil(), "PUT an object; a metadata.resourceVersion makes it conditional (Conflict).")
      .def("patch", &Client::Patch, py::arg("type"), py::arg("namespace"), py::arg("name"),
           py::arg("patch_type"), py::arg("patch"),
           py::arg_v("options", WriteOptions{}, "WriteOptions()"), py::arg("subresource") = "",
           NoGil(), "PATCH an object (or a subresource).")
      .def("delete",
           py::overload_cast<const ResourceType&, std::string_view, std::string_view,
                             const DeleteOptions&>(&Client::Delete),
           py::arg("type"), py::arg("namespace"), py::arg("name"),
           py::arg_v("options", DeleteOptions{}, "DeleteOptions()"), NoGil(),
           "DELETE an object; returns the object or a Status.")
      .def("delete_by_kind",
           py::overload_cast<std::string_view, std::string_view, std::string_view, std::string_view,
                             const DeleteOptions&>(&Client::Delete),
           py::arg("api_version"), py::arg("kind"), py::arg("namespace"), py::arg("name"),
           py::arg_v("options", DeleteOptions{}, "DeleteOptions()"), NoGil(),
           "DELETE by apiVersion and kind.")
      .def("delete_collection", &Client::DeleteCollection, py::arg("type"), py::arg("namespace"),
           py::arg("selectors"), py::arg_v("options", DeleteOptions{}, "DeleteOptions()"), NoGil(),
           "DELETE every object matching the selectors in a namespace.")
      .def("apply", &Client::Apply, py::arg("object"),
           py::arg_v("options", ApplyOptions{}, "ApplyOptions()"), NoGil(),
           "Server-side apply of one complete object.")
      .def(
          "apply_all",
          [](Client& c, const std::vector<Json>& objects, const ApplyOptions& options,
             int max_in_flight) {
            std::vector<ApplyResult> results;
            {
              py::gil_scoped_release release;
              results = c.ApplyAll(objects, options, max_in_flight);
            }
            py::list out;
            for (const auto& r : results) {
              out.append(py::make_tuple(r.ok() ? JsonToPython(r.object) : py::none(),
                                        ExceptionToPython(r.error)));
            }
            return out;
          },
          py::arg("objects"), py::arg_v("options", ApplyOptions{}, "ApplyOptions()"),
          py::arg("max_in_flight") = 32,
          "Server-side apply of many objects concurrently; one (object, None) or (None, error) "
          "tuple per object, in input order.");
}

}  // namespace tfk8s::python
