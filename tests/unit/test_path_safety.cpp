// Path safety: every name, namespace, resource and subresource that reaches a request path is
// checked first. Hostile values are refused with a ValidationError naming the argument and the
// value, and nothing is sent; values that are merely unusual are percent-encoded into exactly
// one segment. (Without this, DELETE of ConfigMap ".." deleted its namespace.)
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "fake_transport.hpp"
#include "tfk8s/client.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/placement.hpp"
#include "tfk8s/quota.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"
#include "tfk8s/validation.hpp"

using namespace tfk8s;
using tfk8s::testing::FakeTransport;
using tfk8s::testing::Respond;

namespace {

const std::string kServer = "https://127.0.0.1:6443";
const ResourceType kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};
const ResourceType kNamespaces{"", "v1", "Namespace", "namespaces", false};

// Answers discovery of /api/v1 and anything else with an empty object.
std::shared_ptr<FakeTransport> MakeFake() {
  return std::make_shared<FakeTransport>([](const internal::HttpRequest& r) {
    if (r.url == kServer + "/api/v1") {
      return Respond(200, R"({"kind":"APIResourceList","groupVersion":"v1","resources":[
        {"name":"configmaps","kind":"ConfigMap","namespaced":true},
        {"name":"namespaces","kind":"Namespace","namespaced":false},
        {"name":"pods","kind":"Pod","namespaced":true},
        {"name":"pods/log","kind":"Pod","namespaced":true}]})");
    }
    return Respond(200, R"({"kind":"ConfigMap","metadata":{"name":"x"}})");
  });
}

Client MakeClient(const std::shared_ptr<FakeTransport>& fake) {
  ClientConfig c;
  c.server = kServer;
  c.token = "t";
  c.default_namespace = "victim";
  c.rate_limit.qps = 0;
  return internal::ClientOver(c, fake);
}

Json ConfigMap(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"data", {{"k", "v"}}}};
}

// Every operation that takes an object name, as (label, call(client, ns, name)).
struct Operation {
  std::string label;
  std::string name_field;       // how the refusal names the name argument
  std::string namespace_field;  // … and the namespace argument
  std::function<void(Client&, const std::string& ns, const std::string& name)> call;
};

std::vector<Operation> NamedOperations() {
  return {
      {"get", "name", "namespace", [](Client& c, auto& ns, auto& n) { c.Get(kConfigMaps, ns, n); }},
      {"get by kind", "name", "namespace",
       [](Client& c, auto& ns, auto& n) { c.Get("v1", "ConfigMap", ns, n); }},
      {"get subresource", "name", "namespace",
       [](Client& c, auto& ns, auto& n) { c.Get(kConfigMaps, ns, n, "status"); }},
      {"replace", "metadata.name", "namespace",
       [](Client& c, auto& ns, auto& n) { c.Replace(kConfigMaps, ns, ConfigMap(ns, n)); }},
      {"patch", "name", "namespace",
       [](Client& c, auto& ns, auto& n) {
         c.Patch(kConfigMaps, ns, n, PatchType::kMerge, {{"metadata", {{"labels", {{"a", "b"}}}}}});
       }},
      {"apply", "metadata.name", "metadata.namespace",
       [](Client& c, auto& ns, auto& n) { c.Apply(ConfigMap(ns, n)); }},
      {"delete", "name", "namespace",
       [](Client& c, auto& ns, auto& n) { c.Delete(kConfigMaps, ns, n); }},
      {"delete by kind", "name", "namespace",
       [](Client& c, auto& ns, auto& n) { c.Delete("v1", "ConfigMap", ns, n); }},
      {"read logs", "name", "namespace", [](Client& c, auto& ns, auto& n) { c.ReadLogs(ns, n); }},
      {"stream logs", "name", "namespace",
       [](Client& c, auto& ns, auto& n) { c.StreamLogs(ns, n); }},
      // Its WebSocket path comes from the same builder, checked before the pod is read.
      {"port-forward", "name", "namespace",
       [](Client& c, auto& ns, auto& n) { c.ForwardPort(ns, n, 8888); }},
  };
}

// Runs `call`, expecting a ValidationError for `field` holding `value`, with nothing sent.
void ExpectRefused(const std::function<void(Client&)>& call, const std::string& field,
                   const std::string& value) {
  auto fake = MakeFake();
  Client client = MakeClient(fake);
  bool refused = false;
  try {
    call(client);
  } catch (const ValidationError& e) {
    refused = true;
    CHECK(e.field() == field);
    CHECK(e.value() == value);
    const std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);  // one line, whatever the value holds
  }
  CHECK_MESSAGE(refused, "not refused: " << field << " = \"" << value << "\"");
  const auto sent = fake->requests();
  const std::string first = sent.empty() ? std::string() : sent.front().url;
  CHECK_MESSAGE(sent.empty(), sent.size() << " request(s) sent, first: " << first);
}

// The last request's path, without the server.
std::string LastPath(const FakeTransport& fake) {
  auto reqs = fake.requests();
  REQUIRE(!reqs.empty());
  std::string url = reqs.back().url.substr(kServer.size());
  return url.substr(0, url.find('?'));
}

}  // namespace

TEST_SUITE("path_safety") {
  TEST_CASE("hostile names are refused by every named operation, nothing is sent") {
    const std::vector<std::string> hostile = {
        "",       ".",     "..", "a/b",         "/",         "../x",
        "%2e%2e", "a%2Fb", "%",  "line\nbreak", "tab\there", std::string("nul\0x", 5),
        "del\x7f"};
    for (const auto& op : NamedOperations()) {
      for (const auto& name : hostile) {
        CAPTURE(op.label);
        CAPTURE(name);
        ExpectRefused([&](Client& c) { op.call(c, "victim", name); }, op.name_field, name);
      }
    }
  }

  TEST_CASE("hostile namespaces are refused by every operation, nothing is sent") {
    const std::vector<std::string> hostile = {
        ".",   "..",    "a/b", "%2e%2e",      "a%2Fb",
        "a b", "UPPER", "é",   "line\nbreak", std::string(64, 'n')};
    for (const auto& op : NamedOperations()) {
      for (const auto& ns : hostile) {
        CAPTURE(op.label);
        CAPTURE(ns);
        ExpectRefused([&](Client& c) { op.call(c, ns, "ok"); }, op.namespace_field, ns);
      }
    }
    for (const auto& ns : hostile) {
      CAPTURE(ns);
      ExpectRefused([&](Client& c) { c.List(kConfigMaps, ns); }, "namespace", ns);
      ExpectRefused([&](Client& c) { c.ListText(kConfigMaps, ns); }, "namespace", ns);
      ExpectRefused([&](Client& c) { c.Watch(kConfigMaps, ns, {}); }, "namespace", ns);
      ExpectRefused([&](Client& c) { c.Create(kConfigMaps, ns, ConfigMap(ns, "ok")); }, "namespace",
                    ns);
      ExpectRefused([&](Client& c) { c.DeleteCollection(kConfigMaps, ns, {}); }, "namespace", ns);
    }
  }

  TEST_CASE("unusual but harmless names are percent-encoded into exactly one segment") {
    struct Case {
      std::string name;
      std::string encoded;
    };
    const std::string long_name(254, 'x');
    const std::vector<Case> cases = {{"a b", "a%20b"},
                                     {"é", "%C3%A9"},
                                     {"a?b#c", "a%3Fb%23c"},
                                     {"system:node", "system%3Anode"},
                                     {long_name, long_name}};
    for (const auto& op : NamedOperations()) {
      for (const auto& c : cases) {
        CAPTURE(op.label);
        CAPTURE(c.name);
        auto fake = MakeFake();
        Client client = MakeClient(fake);
        try {
          op.call(client, "victim", c.name);
        } catch (const Conflict&) {
          // The fake's pod is not Running: port-forward stops after reading it.
          CHECK(op.label == "port-forward");
        }
        std::string path = LastPath(*fake);
        const bool pods = op.label.find("logs") != std::string::npos || op.label == "port-forward";
        const std::string prefix =
            pods ? "/api/v1/namespaces/victim/pods/" : "/api/v1/namespaces/victim/configmaps/";
        REQUIRE(path.rfind(prefix, 0) == 0);
        std::string rest = path.substr(prefix.size());
        CHECK(rest.rfind(c.encoded, 0) == 0);
        std::string tail = rest.substr(c.encoded.size());
        CHECK((tail.empty() || tail == "/status" || tail == "/log"));
      }
    }
  }

  TEST_CASE("an empty name is never a collection call, delete-collection is its own call") {
    auto fake = MakeFake();
    Client client = MakeClient(fake);
    CHECK_THROWS_AS(client.Delete(kConfigMaps, "victim", ""), ValidationError);
    CHECK_THROWS_AS(client.Get(kConfigMaps, "victim", ""), ValidationError);
    CHECK(fake->requests().empty());
    client.DeleteCollection(kConfigMaps, "victim", {});
    REQUIRE(fake->requests().size() == 1);
    CHECK(LastPath(*fake) == "/api/v1/namespaces/victim/configmaps");
    CHECK(fake->requests().back().method == "DELETE");
  }

  TEST_CASE("subresources, resources and group versions are checked segment by segment") {
    // (subresource, the segment refused)
    const std::vector<std::pair<std::string, std::string>> subresources = {
        {".", "."},     {"..", ".."}, {"a/..", ".."}, {"a//b", ""},
        {"%2e", "%2e"}, {"/", ""},    {"log/", ""}};
    for (const auto& [sub, segment] : subresources) {
      CAPTURE(sub);
      ExpectRefused([&](Client& c) { c.Get(kConfigMaps, "victim", "ok", sub); }, "subresource",
                    segment);
    }
    CHECK(kConfigMaps.ObjectPath("n", "p", "proxy/healthz") ==
          "/api/v1/namespaces/n/configmaps/p/proxy/healthz");
    for (std::string plural : {"", ".", "..", "a/b", "%2e"}) {
      CAPTURE(plural);
      ResourceType bad{"", "v1", "X", plural, true};
      ExpectRefused([&](Client& c) { c.Get(bad, "victim", "ok"); }, "resource", plural);
      ExpectRefused([&](Client& c) { c.List(bad, "victim"); }, "resource", plural);
    }
    ResourceType bad_group{"..", "v1", "X", "xs", true};
    ExpectRefused([&](Client& c) { c.List(bad_group, ""); }, "group", "..");
    ExpectRefused([&](Client& c) { c.Get("../v1", "ConfigMap", "victim", "ok"); }, "group", "..");
    ExpectRefused([&](Client& c) { c.Get("apps/..", "X", "victim", "ok"); }, "version", "..");
    ExpectRefused([&](Client& c) { c.Resolve("a/b/c", "X"); }, "version", "b/c");
  }

  TEST_CASE("a namespaced object needs a namespace, cluster-scoped ones ignore it") {
    CHECK_THROWS_AS((void)kConfigMaps.ObjectPath("", "x"), ValidationError);
    CHECK(kNamespaces.ObjectPath("", "team-a") == "/api/v1/namespaces/team-a");
    CHECK(kConfigMaps.CollectionPath("") == "/api/v1/configmaps");  // all namespaces
    ExpectRefused([&](Client& c) { c.Delete(kNamespaces, "", ".."); }, "name", "..");
    ExpectRefused([&](Client& c) { c.Delete(kNamespaces, "", ""); }, "name", "");
  }

  TEST_CASE("selector and query values are percent-encoded") {
    auto fake = MakeFake();
    Client client = MakeClient(fake);
    ListOptions o;
    o.label_selector = "a=b&limit=1/../x#y";
    o.field_selector = "metadata.name=..";
    client.List(kConfigMaps, "victim", o);
    auto url = fake->requests().back().url;
    CHECK(url == kServer +
                     "/api/v1/namespaces/victim/configmaps?labelSelector=a%3Db%26limit%3D1%2F.."
                     "%2Fx%23y&fieldSelector=metadata.name%3D..&timeout=60s");
  }

  TEST_CASE("workloads check names before any request") {
    const std::vector<std::string> hostile = {"",    ".",      "..", "a/b", "a,b",
                                              "x=y", "%2e%2e", "A",  "a b", std::string(254, 'x')};
    for (const auto& name : hostile) {
      CAPTURE(name);
      ExpectRefused([&](Client& c) { TFCluster::Load(c, "victim", name); }, "name", name);
      ExpectRefused([&](Client& c) { DevInstance::Load(c, "victim", name); }, "name", name);
      ExpectRefused([&](Client& c) { ScheduledJob::Load(c, "victim", name); }, "name", name);
      ExpectRefused([&](Client& c) { DeleteQuota(c, name); }, "name", name);
      ExpectRefused([&](Client& c) { SetNodeLabels(c, name, {{"cputype", "x"}}); }, "node", name);
    }
    ExpectRefused([&](Client& c) { TFCluster::Load(c, "..", "ok"); }, "namespace", "..");
    ExpectRefused([&](Client& c) { DevInstance::Load(c, "a/b", "ok"); }, "namespace", "a/b");
    ExpectRefused([&](Client& c) { ScheduledJob::Load(c, "..", "ok"); }, "namespace", "..");
  }

  TEST_CASE("Service-named workloads need DNS-1035 labels, with Kubernetes' message") {
    const std::string msg =
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
        "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name' or "
        "'abc-123')";
    CHECK(validation::IsDns1035Label("my-name").empty());
    CHECK(validation::IsDns1035Label("a").empty());
    CHECK(validation::IsDns1035Label("1abc") == std::vector<std::string>{msg});
    CHECK(validation::IsDns1035Label("") == std::vector<std::string>{msg});
    CHECK(validation::IsDns1035Label("a.b") == std::vector<std::string>{msg});
    CHECK(validation::IsDns1035Label(std::string(64, 'a')) ==
          std::vector<std::string>{"must be no more than 63 characters"});
    for (const std::string name : {"1abc", "-a", "a-", "a.b", "Abc"}) {
      CAPTURE(name);
      ExpectRefused([&](Client& c) { TFCluster::Load(c, "victim", name); }, "name", name);
      ExpectRefused([&](Client& c) { DevInstance::Load(c, "victim", name); }, "name", name);
    }
  }

  TEST_CASE("path-segment rules and messages are apimachinery's") {
    using V = std::vector<std::string>;
    CHECK(validation::IsValidPathSegmentName(".") == V{"may not be '.'"});
    CHECK(validation::IsValidPathSegmentName("..") == V{"may not be '..'"});
    CHECK(validation::IsValidPathSegmentName("a/%") ==
          V{"may not contain '/'", "may not contain '%'"});
    CHECK(validation::IsValidPathSegmentName("...").empty());
    CHECK(validation::IsValidPathSegmentName("system:kube-scheduler").empty());
    try {
      validation::RequirePathSegment("name", "a\nb\"c");
      FAIL("not refused");
    } catch (const ValidationError& e) {
      CHECK(std::string(e.what()) ==
            "invalid name \"a\\nb\\\"c\": may not contain control characters");
    }
  }
}
