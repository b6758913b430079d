// Every client operation against the real local cluster.
#include "cluster.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

TEST_SUITE("operations") {
  TEST_CASE("server version and discovery") {
    Client c = AdminClient();
    auto v = c.ServerVersion();
    CHECK(v["gitVersion"].get<std::string>().rfind("v1.20", 0) == 0);
    auto deploy = c.Resolve("apps/v1", "Deployment");
    CHECK(deploy.plural == "deployments");
    CHECK(deploy.namespaced);
    auto node = c.Resolve("v1", "Node");
    CHECK_FALSE(node.namespaced);
    // v1.20 serves CronJob only in batch/v1beta1: the preference list falls back to it.
    auto cron = c.ResolvePreferred("batch", "CronJob", {"v1", "v1beta1"});
    CHECK(cron.version == "v1beta1");
    CHECK(cron.plural == "cronjobs");
    auto gvs = c.ServerGroupVersions();
    CHECK(std::find(gvs.begin(), gvs.end(), "apps/v1") != gvs.end());
    CHECK_THROWS_AS(c.Resolve("apps/v1", "NoSuchKind"), NotFound);
    CHECK_THROWS_AS(c.Resolve("nosuch.example.com/v1", "Thing"), NotFound);
  }

  TEST_CASE("create, get, replace with resourceVersion, patch three ways, delete") {
    Client c = AdminClient();
    TestNamespace ns(c);
    auto created = c.Create(kConfigMaps, ns.name(), ConfigMap("cm", {{"a", "1"}}));
    CHECK(created["metadata"]["uid"].is_string());
    CHECK_THROWS_AS(c.Create(kConfigMaps, ns.name(), ConfigMap("cm")), AlreadyExists);

    auto got = c.Get(kConfigMaps, ns.name(), "cm");
    CHECK(got["data"]["a"] == "1");

    // Replace with the current version succeeds; with a stale one it is a Conflict.
    Json stale = got;
    got["data"]["a"] = "2";
    auto replaced = c.Replace(kConfigMaps, ns.name(), got);
    CHECK(replaced["data"]["a"] == "2");
    stale["data"]["a"] = "3";
    CHECK_THROWS_AS(c.Replace(kConfigMaps, ns.name(), stale), Conflict);

    c.Patch(kConfigMaps, ns.name(), "cm", PatchType::kMerge, {{"data", {{"b", "x"}}}});
    c.Patch(kConfigMaps, ns.name(), "cm", PatchType::kStrategicMerge,
            {{"metadata", {{"labels", {{"l", "v"}}}}}});
    c.Patch(kConfigMaps, ns.name(), "cm", PatchType::kJson,
            Json::array({{{"op", "remove"}, {"path", "/data/a"}}}));
    auto patched = c.Get(kConfigMaps, ns.name(), "cm");
    CHECK(patched["data"] == Json{{"b", "x"}});
    CHECK(patched["metadata"]["labels"]["l"] == "v");

    // A JSON patch that does not apply is the server's error, typed.
    CHECK_THROWS_AS(c.Patch(kConfigMaps, ns.name(), "cm", PatchType::kJson,
                            Json::array({{{"op", "test"}, {"path", "/data/b"}, {"value", "no"}}})),
                    ApiError);

    // Preconditions: a wrong uid refuses the delete.
    DeleteOptions wrong;
    wrong.precondition_uid = "00000000-0000-0000-0000-000000000000";
    CHECK_THROWS_AS(c.Delete(kConfigMaps, ns.name(), "cm", wrong), Conflict);
    DeleteOptions right;
    right.precondition_uid = patched["metadata"]["uid"];
    right.grace_period_seconds = 0;
    c.Delete(kConfigMaps, ns.name(), "cm", right);
    CHECK_THROWS_AS(c.Get(kConfigMaps, ns.name(), "cm"), NotFound);
  }

  TEST_CASE("server validation errors carry field causes") {
    Client c = AdminClient();
    TestNamespace ns(c);
    Json bad = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", "bad"}}},
                {"spec", {{"containers", Json::array()}}}};
    try {
      c.Create(kPods, ns.name(), bad);
      FAIL("expected Invalid");
    } catch (const Invalid& e) {
      CHECK(e.http_code() == 422);
      REQUIRE_FALSE(e.causes().empty());
      CHECK(e.causes()[0].field == "spec.containers");
    }
  }

  TEST_CASE("dry run writes nothing") {
    Client c = AdminClient();
    TestNamespace ns(c);
    WriteOptions dry;
    dry.dry_run = true;
    auto out = c.Create(kConfigMaps, ns.name(), ConfigMap("ghost"), dry);
    CHECK(out["metadata"]["name"] == "ghost");
    CHECK_THROWS_AS(c.Get(kConfigMaps, ns.name(), "ghost"), NotFound);
    ApplyOptions apply_dry;
    apply_dry.dry_run = true;
    Json cm = ConfigMap("ghost2");
    cm["metadata"]["namespace"] = ns.name();
    c.Apply(cm, apply_dry);
    CHECK_THROWS_AS(c.Get(kConfigMaps, ns.name(), "ghost2"), NotFound);
    c.Create(kConfigMaps, ns.name(), ConfigMap("real"));
    DeleteOptions del;
    del.dry_run = true;
    c.Delete(kConfigMaps, ns.name(), "real", del);
    CHECK(c.Get(kConfigMaps, ns.name(), "real")["metadata"]["name"] == "real");
  }

  TEST_CASE("pagination, label and field selectors, deletecollection") {
    Client c = AdminClient();
    TestNamespace ns(c);
    std::vector<Json> objects;
    for (int i = 0; i < 25; ++i) {
      Json cm = ConfigMap("cm-" + std::to_string(i), {{"i", std::to_string(i)}},
                          {{"parity", i % 2 ? "odd" : "even"}});
      cm["metadata"]["namespace"] = ns.name();
      objects.push_back(cm);
    }
    for (const auto& r : c.ApplyAll(objects)) REQUIRE_MESSAGE(r.ok(), r.error_message());

    ListOptions page;
    page.limit = 10;
    auto first = c.List(kConfigMaps, ns.name(), page);
    CHECK(first["items"].size() == 10);
    CHECK_FALSE(first["metadata"]["continue"].get<std::string>().empty());
    auto all = c.ListAll(kConfigMaps, ns.name(), {}, 7);
    CHECK(all["items"].size() >= 25);  // plus kube-root-ca.crt on newer servers

    ListOptions odd;
    odd.label_selector = "parity=odd";
    CHECK(c.ListAll(kConfigMaps, ns.name(), odd)["items"].size() == 12);
    ListOptions by_name;
    by_name.field_selector = "metadata.name=cm-3";
    auto one = c.List(kConfigMaps, ns.name(), by_name);
    REQUIRE(one["items"].size() == 1);
    CHECK(one["items"][0]["data"]["i"] == "3");

    ListOptions even;
    even.label_selector = "parity=even";
    c.DeleteCollection(kConfigMaps, ns.name(), even);
    CHECK(TestNamespace::WaitFor(
        [&] { return c.ListAll(kConfigMaps, ns.name(), even)["items"].empty(); },
        std::chrono::seconds(10)));
    CHECK(c.ListAll(kConfigMaps, ns.name(), odd)["items"].size() == 12);
  }

  TEST_CASE("server-side apply converges and reports conflicts between managers") {
    Client c = AdminClient();
    TestNamespace ns(c);
    Json d = {{"apiVersion", "apps/v1"},
              {"kind", "Deployment"},
              {"metadata", {{"name", "web"}, {"namespace", ns.name()}}},
              {"spec",
               {{"replicas", 1},
                {"selector", {{"matchLabels", {{"app", "web"}}}}},
                {"template",
                 {{"metadata", {{"labels", {{"app", "web"}}}}},
                  {"spec",
                   {{"containers",
                     Json::array({{{"name", "c"},
                                   {"image", "busybox"},
                                   {"ports", Json::array({{{"containerPort", 80},
                                                           {"protocol", "TCP"}}})}}})}}}}}}}};
    auto first = c.Apply(d);
    auto again = c.Apply(d);
    // Re-applying the same intent changes nothing (the controller may still write status).
    CHECK(again["metadata"]["generation"] == first["metadata"]["generation"]);
    Json cm = ConfigMap("applied", {{"k", "v"}});
    cm["metadata"]["namespace"] = ns.name();
    auto cm1 = c.Apply(cm);
    auto cm2 = c.Apply(cm);
    // The same object and the same ownership. Not the same resourceVersion: a server may write a
    // no-op apply again when it lands in a new second, to move managedFields' time (seen here,
    // and kubernetes/kubernetes#121404), so only the time and the version may differ.
    auto without_write_stamps = [](Json o) {
      o["metadata"].erase("resourceVersion");
      for (auto& entry : o["metadata"]["managedFields"]) entry.erase("time");
      return o;
    };
    CHECK(without_write_stamps(cm2) == without_write_stamps(cm1));
    d["spec"]["replicas"] = 2;
    auto changed = c.Apply(d);
    CHECK(changed["spec"]["replicas"] == 2);

    // Another manager claiming the same field conflicts, unless it forces.
    ApplyOptions other;
    other.field_manager = "someone-else";
    Json theirs = d;
    theirs["spec"]["replicas"] = 3;
    CHECK_THROWS_AS(c.Apply(theirs, other), Conflict);
    other.force = true;
    CHECK(c.Apply(theirs, other)["spec"]["replicas"] == 3);

    // Subresources: scale and status.
    auto scale = c.Get(kDeployments, ns.name(), "web", "scale");
    CHECK(scale["kind"] == "Scale");
    CHECK(scale["spec"]["replicas"] == 3);
    c.Patch(kDeployments, ns.name(), "web", PatchType::kMerge, {{"spec", {{"replicas", 1}}}}, {},
            "scale");
    CHECK(c.Get(kDeployments, ns.name(), "web")["spec"]["replicas"] == 1);
    auto status = c.Get(kDeployments, ns.name(), "web", "status");
    CHECK(status.contains("status"));
  }

  TEST_CASE("custom resources through discovery") {
    Client c = AdminClient();
    std::string group = UniqueName("g") + ".tfk8s.test";
    Json crd = {
        {"apiVersion", "apiextensions.k8s.io/v1"},
        {"kind", "CustomResourceDefinition"},
        {"metadata", {{"name", "widgets." + group}}},
        {"spec",
         {{"group", group},
          {"scope", "Namespaced"},
          {"names", {{"plural", "widgets"}, {"singular", "widget"}, {"kind", "Widget"}}},
          {"versions", Json::array({{{"name", "v1"},
                                     {"served", true},
                                     {"storage", true},
                                     {"schema",
                                      {{"openAPIV3Schema",
                                        {{"type", "object"},
                                         {"x-kubernetes-preserve-unknown-fields", true}}}}}}})}}}};
    c.Apply(crd);
    TestNamespace ns(c);
    bool served = TestNamespace::WaitFor(
        [&] {
          c.InvalidateDiscovery();
          try {
            c.Resolve(group + "/v1", "Widget");
            return true;
          } catch (const NotFound&) {
            return false;
          }
        },
        std::chrono::seconds(30));
    REQUIRE(served);
    Json w = {{"apiVersion", group + "/v1"},
              {"kind", "Widget"},
              {"metadata", {{"name", "w1"}, {"namespace", ns.name()}}},
              {"size", 3}};
    c.Apply(w);
    CHECK(c.Get(group + "/v1", "Widget", ns.name(), "w1")["size"] == 3);
    c.Delete(group + "/v1", "Widget", ns.name(), "w1");
    c.Delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets." + group);
  }

  TEST_CASE("ApplyAll: many objects concurrently, failures per object") {
    Client c = AdminClient();
    TestNamespace ns(c);
    std::vector<Json> objects;
    for (int i = 0; i < 40; ++i) {
      Json cm = ConfigMap("many-" + std::to_string(i));
      cm["metadata"]["namespace"] = ns.name();
      objects.push_back(cm);
    }
    Json bad = ConfigMap("Not_A_Valid_Name");
    bad["metadata"]["namespace"] = ns.name();
    objects.push_back(bad);
    auto results = c.ApplyAll(objects);
    REQUIRE(results.size() == 41);
    for (int i = 0; i < 40; ++i) CHECK(results[i].ok());
    CHECK_THROWS_AS(std::rethrow_exception(results[40].error), Invalid);
  }

  TEST_CASE("cascading delete through the garbage collector") {
    Client c = AdminClient();
    TestNamespace ns(c);
    Json owner = c.Create(kConfigMaps, ns.name(), ConfigMap("owner"));
    Json child = ConfigMap("child");
    child["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", "v1"},
                                                         {"kind", "ConfigMap"},
                                                         {"name", "owner"},
                                                         {"uid", owner["metadata"]["uid"]}}});
    c.Create(kConfigMaps, ns.name(), child);
    DeleteOptions bg;
    bg.propagation_policy = "Background";
    c.Delete(kConfigMaps, ns.name(), "owner", bg);
    CHECK(TestNamespace::WaitFor(
        [&] {
          try {
            c.Get(kConfigMaps, ns.name(), "child");
            return false;
          } catch (const NotFound&) {
            return true;
          }
        },
        std::chrono::seconds(60)));
  }
}
