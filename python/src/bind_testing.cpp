// tfk8s::testing::FakeCluster as _core.FakeCluster: an in-memory API server for unit tests of
// Python code that uses tfk8s. tfk8s.testing (python/tfk8s/testing.py) is the Pythonic front
// end. Every call takes the fake's lock, which client threads also take: the GIL is released so
// a client call running without it on another thread can always finish.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "tfk8s/testing/fake_cluster.hpp"

namespace tfk8s::python {

namespace {

using NoGil = py::call_guard<py::gil_scoped_release>;
using tfk8s::testing::FakeCluster;

}  // namespace

void BindTesting(py::module_& m) {
  py::class_<FakeCluster>(
      m, "FakeCluster",
      "An in-memory Kubernetes API server (v1.20.2) for unit tests: no cluster, no network. Use "
      "tfk8s.testing.FakeCluster.")
      .def(py::init<>(), NoGil(),
           "An empty cluster with the namespaces default, kube-system and kube-public.")
      .def(
          "client", [](const FakeCluster& f, std::string ns) { return f.client(std::move(ns)); },
          py::arg("namespace") = "default", NoGil(),
          "A client of this cluster (no retries, no rate limit).")
      .def(
          "client",
          [](const FakeCluster& f, const ClientConfig& config) { return f.client(config); },
          py::arg("config"), NoGil(),
          "A client of this cluster with the given retry policy, rate limit and namespace.")
      .def("add", &FakeCluster::Add, py::arg("object"), NoGil(),
           "Stores an object as if it had been created (status kept; replaces one of the same "
           "name).")
      .def("add_node", &FakeCluster::AddNode, py::arg("name"),
           py::arg("labels") = std::map<std::string, std::string>{}, py::arg("cpu") = "32",
           py::arg("memory") = "128Gi", py::arg("gpus") = 0, NoGil(),
           "A Ready, schedulable Node with these labels and allocatable resources.")
      .def("add_resource", &FakeCluster::AddResource, py::arg("type"), NoGil(),
           "Serves one more kind (a custom resource, say).")
      .def("fail_next", &FakeCluster::FailNext, py::arg("http_code"), py::arg("reason"),
           py::arg("message"), NoGil(),
           "Makes the next non-discovery request fail with this Status (calls queue up).")
      .def("find", &FakeCluster::Find, py::arg("api_version"), py::arg("kind"),
           py::arg("namespace"), py::arg("name"), NoGil(), "The stored object, or None.")
      .def("objects", &FakeCluster::Objects, py::arg("api_version"), py::arg("kind"),
           py::arg("namespace") = "", NoGil(),
           "Every stored object of a kind in a namespace ('' = all), by namespace and name.")
      .def(
          "requests",
          [](const FakeCluster& f) {
            std::vector<tfk8s::testing::RecordedRequest> requests;
            {
              py::gil_scoped_release release;
              requests = f.requests();
            }
            return ToJsonList(requests);
          },
          "Every request received (dicts: method, path, query, body, content_type).")
      .def("clear_requests", &FakeCluster::ClearRequests, NoGil(),
           "Forgets the recorded requests.");
}

}  // namespace tfk8s::python
