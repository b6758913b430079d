// Path safety against the real API server: a sacrificial namespace and its ConfigMaps survive
// every hostile call, and each call raises its typed error. Before the path checks, DELETE of
// ConfigMap ".." deleted the namespace and DELETE of "" deleted every ConfigMap in it.
#include <functional>
#include <string>
#include <vector>

#include "client/connection.hpp"
#include "cluster.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

struct Snapshot {
  std::string ns_uid;
  std::string ns_resource_version;
  std::vector<std::string> config_maps;  // "name@resourceVersion", sorted by the server
};

Snapshot Take(Client& c, const std::string& ns) {
  Snapshot s;
  Json n = c.Get(kNamespaces, "", ns);
  REQUIRE_FALSE(n["metadata"].contains("deletionTimestamp"));
  s.ns_uid = n["metadata"]["uid"];
  s.ns_resource_version = n["metadata"]["resourceVersion"];
  const Json list = c.List(kConfigMaps, ns);  // kept: iterating a temporary's member dangles
  for (const auto& cm : list["items"]) {
    s.config_maps.push_back(cm["metadata"]["name"].get<std::string>() + "@" +
                            cm["metadata"]["resourceVersion"].get<std::string>());
  }
  return s;
}

void CheckUnchanged(const Snapshot& before, const Snapshot& after) {
  CHECK(after.ns_uid == before.ns_uid);
  CHECK(after.ns_resource_version == before.ns_resource_version);
  CHECK(after.config_maps == before.config_maps);
}

Json Cm(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"data", {{"k", "v"}}}};
}

}  // namespace

TEST_SUITE("path_safety") {
  TEST_CASE("a sacrificial namespace survives every hostile name; each call is refused typed") {
    Client c = AdminClient();
    TestNamespace ns(c, "victim");
    const std::string n = ns.name();
    for (const char* name : {"keep-1", "keep-2", "keep-3"}) c.Create(kConfigMaps, n, Cm(n, name));
    c.Get(kNamespaces, "", n);  // the namespace is there
    const Snapshot before = Take(c, n);
    REQUIRE(before.config_maps.size() >= 3);

    const Json label_patch = {{"metadata", {{"labels", {{"pwned", "yes"}}}}}};
    const std::vector<std::string> hostile = {"..",     ".",     "",      "a/b",
                                              "%2e%2e", "a%2Fb", "../..", "line\nbreak"};
    std::vector<std::function<void(const std::string&)>> calls = {
        [&](const std::string& x) { c.Delete(kConfigMaps, n, x); },
        [&](const std::string& x) { c.Delete("v1", "ConfigMap", n, x); },
        [&](const std::string& x) { c.Patch(kConfigMaps, n, x, PatchType::kMerge, label_patch); },
        [&](const std::string& x) { c.Get(kConfigMaps, n, x); },
        [&](const std::string& x) { c.Get("v1", "ConfigMap", n, x); },
        [&](const std::string& x) { c.Get(kNamespaces, "", x); },
        [&](const std::string& x) { c.Delete(kNamespaces, "", x); },
        [&](const std::string& x) { c.Apply(Cm(n, x)); },
        [&](const std::string& x) { c.Replace(kConfigMaps, n, Cm(n, x)); },
        [&](const std::string& x) { c.ReadLogs(n, x); },
        [&](const std::string& x) { TFCluster::Load(c, n, x); },
        [&](const std::string& x) { DevInstance::Load(c, n, x); },
        [&](const std::string& x) { ScheduledJob::Load(c, n, x); },
    };
    for (const auto& name : hostile) {
      for (std::size_t i = 0; i < calls.size(); ++i) {
        CAPTURE(name);
        CAPTURE(i);
        CHECK_THROWS_AS(calls[i](name), ValidationError);
      }
    }
    // Hostile subresources (each segment is checked; "" means none).
    for (const std::string sub : {"..", ".", "a/..", "%2e", "line\nbreak", "status/"}) {
      CAPTURE(sub);
      CHECK_THROWS_AS(c.Get(kConfigMaps, n, "keep-1", sub), ValidationError);
      CHECK_THROWS_AS(c.Patch(kConfigMaps, n, "keep-1", PatchType::kMerge, label_patch, {}, sub),
                      ValidationError);
    }
    // Hostile namespaces: "..", a slash … never reach the path either.
    for (const std::string bad_ns : {"..", ".", "a/b", "%2e%2e"}) {
      CAPTURE(bad_ns);
      CHECK_THROWS_AS(c.Delete(kConfigMaps, bad_ns, "keep-1"), ValidationError);
      CHECK_THROWS_AS(c.DeleteCollection(kConfigMaps, bad_ns, {}), ValidationError);
      CHECK_THROWS_AS(c.List(kConfigMaps, bad_ns), ValidationError);
    }
    CheckUnchanged(before, Take(c, n));
  }

  TEST_CASE("unusual names reach the server as one segment and get its typed answer") {
    Client c = AdminClient();
    TestNamespace ns(c, "victim");
    const std::string n = ns.name();
    c.Create(kConfigMaps, n, Cm(n, "keep"));
    const Snapshot before = Take(c, n);
    for (const std::string name :
         {std::string("a b"), std::string("é"), std::string(254, 'x'), std::string("a?b#c")}) {
      CAPTURE(name);
      CHECK_THROWS_AS(c.Get(kConfigMaps, n, name), NotFound);
      CHECK_THROWS_AS(c.Delete(kConfigMaps, n, name), NotFound);
      CHECK_THROWS_AS(c.Patch(kConfigMaps, n, name, PatchType::kMerge, {{"data", {{"k", "w"}}}}),
                      NotFound);
      CHECK_THROWS_AS(c.Apply(Cm(n, name)), Invalid);  // the server's own name rule
    }
    CheckUnchanged(before, Take(c, n));
  }

  TEST_CASE("the transport sends dot segments as they are (second line of defence)") {
    // Straight to the connection, below the client's checks: were libcurl to resolve "..", this
    // GET would return the Namespace object itself.
    Client c = AdminClient();
    TestNamespace ns(c, "victim");
    internal::RequestSpec spec;
    spec.path = "/api/v1/namespaces/" + ns.name() + "/configmaps/..";
    spec.idempotent = true;
    spec.context = "raw get";
    std::string kind;
    try {
      auto response = internal::ConnectionOf(c)->Execute(spec);
      Json body = Json::parse(response.body, nullptr, false);
      if (body.is_object()) kind = body.value("kind", "");
    } catch (const Error& e) {
      kind = std::string("error: ") + e.what();
    }
    CAPTURE(kind);
    CHECK(kind != "Namespace");
    c.Get(kNamespaces, "", ns.name());  // still there
  }
}
