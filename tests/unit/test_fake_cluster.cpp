// tfk8s::testing::FakeCluster: the generic client against the in-memory server (every verb,
// selectors, typed errors, injected failures, watches), and workloads launched with no cluster.
#include <doctest/doctest.h>

#include <atomic>
#include <set>
#include <thread>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/testing/fake_cluster.hpp"
#include "tfk8s/tfcluster.hpp"

using namespace tfk8s;
using tfk8s::testing::FakeCluster;

namespace {

const ResourceType kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};
const ResourceType kPods{"", "v1", "Pod", "pods", true};
const ResourceType kJobs{"batch", "v1", "Job", "jobs", true};

Json ConfigMap(const std::string& name, const Json& labels = Json::object(),
               const Json& data = Json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"data", data}};
}

std::set<std::string> Names(const Json& list) {
  std::set<std::string> out;
  for (const auto& item : list["items"]) out.insert(item["metadata"]["name"].get<std::string>());
  return out;
}

std::set<std::string> Names(const std::vector<Json>& objects) {
  std::set<std::string> out;
  for (const auto& o : objects) out.insert(o["metadata"]["name"].get<std::string>());
  return out;
}

// Nodes every TFCluster pod of the tests fits on (the default placement: nodetype=tensorflow,
// pooltype=shared).
void AddTensorFlowNodes(FakeCluster& fake) {
  const std::map<std::string, std::string> labels = {{"nodetype", "tensorflow"},
                                                     {"pooltype", "shared"}};
  fake.AddNode("cpu-1", labels, "64", "256Gi");
  fake.AddNode("gpu-1", labels, "64", "256Gi", 8);
}

TFClusterSpec SmallCluster() {
  TFClusterSpec s;
  s.name = "mnist";
  s.namespace_name = "team-a";
  s.ps.replicas = 1;
  s.ps.resources = {"1", "2Gi", "", "", 0};
  s.worker.replicas = 2;
  s.worker.resources = {"2", "4Gi", "", "", 1};
  s.worker.script = "python /data/train.py";
  s.chief.replicas = 1;
  s.chief.resources = {"1", "2Gi", "", "", 0};
  return s;
}

}  // namespace

TEST_SUITE("fake_cluster") {
  TEST_CASE("discovery serves the workload kinds, CronJob only in batch/v1beta1, and v1.20.2") {
    FakeCluster fake;
    Client client = fake.client();
    CHECK(client.ServerVersion()["gitVersion"] == "v1.20.2");
    CHECK(client.Resolve("v1", "Pod") == kPods);
    CHECK(client.Resolve("apps/v1", "StatefulSet").plural == "statefulsets");
    CHECK_FALSE(client.Resolve("v1", "Node").namespaced);
    CHECK(client.Resolve("rbac.authorization.k8s.io/v1", "RoleBinding").plural == "rolebindings");
    CHECK(client.ResolvePreferred("batch", "CronJob", {"v1", "v1beta1"}).version == "v1beta1");
    CHECK_THROWS_AS(client.Resolve("batch/v1", "CronJob"), NotFound);
    CHECK_THROWS_AS(client.Resolve("example.com/v1", "Widget"), NotFound);
    auto versions = client.ServerGroupVersions();
    CHECK(std::find(versions.begin(), versions.end(), "storage.k8s.io/v1") != versions.end());

    // A custom resource, once added, is served like any other kind.
    fake.AddResource({"example.com", "v1", "Widget", "widgets", true});
    client.InvalidateDiscovery();
    ResourceType widgets = client.Resolve("example.com/v1", "Widget");
    client.Create(widgets, "default",
                  {{"apiVersion", "example.com/v1"},
                   {"kind", "Widget"},
                   {"metadata", {{"name", "w"}}},
                   {"spec", {{"size", 3}}}});
    CHECK(fake.Find("example.com/v1", "Widget", "default", "w").value()["spec"]["size"] == 3);
  }

  TEST_CASE("create assigns metadata, get returns it, AlreadyExists and NotFound are typed") {
    FakeCluster fake;
    Client client = fake.client("team-a");
    Json created = client.Create(kConfigMaps, "", ConfigMap("settings", {}, {{"lr", "0.01"}}));
    const Json& md = created["metadata"];
    CHECK(md["namespace"] == "team-a");
    CHECK_FALSE(md["uid"].get<std::string>().empty());
    CHECK_FALSE(md["creationTimestamp"].get<std::string>().empty());
    const auto rv = std::stoll(md["resourceVersion"].get<std::string>());
    CHECK(rv > 0);

    Json got = client.Get(kConfigMaps, "team-a", "settings");
    CHECK(got == created);
    CHECK(got["apiVersion"] == "v1");
    CHECK(got["kind"] == "ConfigMap");

    // A second object gets a newer version and another uid.
    Json other = client.Create(kConfigMaps, "team-a", ConfigMap("other"));
    CHECK(std::stoll(other["metadata"]["resourceVersion"].get<std::string>()) > rv);
    CHECK(other["metadata"]["uid"] != md["uid"]);

    try {
      client.Create(kConfigMaps, "team-a", ConfigMap("settings"));
      FAIL("expected AlreadyExists");
    } catch (const AlreadyExists& e) {
      CHECK(e.http_code() == 409);
      CHECK(e.reason() == "AlreadyExists");
      CHECK(e.server_message() == "configmaps \"settings\" already exists");
    }
    try {
      client.Get(kJobs, "team-a", "missing");
      FAIL("expected NotFound");
    } catch (const NotFound& e) {
      CHECK(e.http_code() == 404);
      CHECK(e.server_message() == "jobs.batch \"missing\" not found");
    }
    CHECK_THROWS_AS(client.Get("v1", "ConfigMap", "default", "settings"), NotFound);

    // Generated names, and a missing name refused as the server does (422 with a cause).
    Json generated = ConfigMap("");
    generated["metadata"].erase("name");
    generated["metadata"]["generateName"] = "run-";
    std::string name = client.Create(kConfigMaps, "team-a", generated)["metadata"]["name"];
    CHECK(name.rfind("run-", 0) == 0);
    CHECK(name.size() > 4);
    generated["metadata"].erase("generateName");
    try {
      client.Create(kConfigMaps, "team-a", generated);
      FAIL("expected Invalid");
    } catch (const Invalid& e) {
      REQUIRE(e.causes().size() == 1);
      CHECK(e.causes()[0].field == "metadata.name");
    }
  }

  TEST_CASE("list: label selectors (equality, sets, existence), field selectors, namespaces") {
    FakeCluster fake;
    Client client = fake.client();
    client.Create(kConfigMaps, "a", ConfigMap("web", {{"app", "web"}, {"tier", "front"}}));
    client.Create(kConfigMaps, "a", ConfigMap("db", {{"app", "db"}, {"tier", "back"}}));
    client.Create(kConfigMaps, "a", ConfigMap("cache", {{"app", "cache"}}));
    client.Create(kConfigMaps, "b", ConfigMap("web", {{"app", "web"}, {"replicas", "3"}}));

    auto list = [&](const std::string& ns, const std::string& labels,
                    const std::string& fields = "") {
      ListOptions o;
      o.label_selector = labels;
      o.field_selector = fields;
      return Names(client.List(kConfigMaps, ns, o));
    };
    using S = std::set<std::string>;
    CHECK(list("a", "") == S{"cache", "db", "web"});
    CHECK(list("a", "app=web") == S{"web"});
    CHECK(list("a", "app==db") == S{"db"});
    CHECK(list("a", "app!=web") == S{"cache", "db"});
    CHECK(list("a", "tier!=front") == S{"cache", "db"});  // no label satisfies !=
    CHECK(list("a", "app in (web, db)") == S{"db", "web"});
    CHECK(list("a", "app notin (web,db)") == S{"cache"});
    CHECK(list("a", "tier notin (back)") == S{"cache", "web"});
    CHECK(list("a", "tier") == S{"db", "web"});
    CHECK(list("a", "!tier") == S{"cache"});
    CHECK(list("a", "app in (web,db),tier=back") == S{"db"});
    CHECK(list("a", " app = web , tier ") == S{"web"});
    CHECK(list("b", "replicas>2") == S{"web"});
    CHECK(list("b", "replicas<3") == S{});
    CHECK(list("a", "", "metadata.name=db") == S{"db"});
    CHECK(list("a", "", "metadata.name!=db") == S{"cache", "web"});
    CHECK(list("a", "app=web", "metadata.namespace==a") == S{"web"});

    // All namespaces: items from both, ordered by namespace then name.
    Json all = client.List(kConfigMaps, "", ListOptions{"app=web"});
    REQUIRE(all["items"].size() == 2);
    CHECK(all["items"][0]["metadata"]["namespace"] == "a");
    CHECK(all["items"][1]["metadata"]["namespace"] == "b");
    // Like the server's lists: a kind and a version on the list, none on the items.
    CHECK(all["kind"] == "ConfigMapList");
    CHECK_FALSE(all["metadata"]["resourceVersion"].get<std::string>().empty());
    CHECK_FALSE(all["items"][0].contains("kind"));

    // A selector the server cannot parse is a BadRequest.
    CHECK_THROWS_AS(list("a", "app in web"), BadRequest);
    CHECK_THROWS_AS(list("a", "app in ()"), BadRequest);
    CHECK_THROWS_AS(list("a", "=x"), BadRequest);

    // Pages: ListAll follows continue tokens.
    Json paged = client.ListAll(kConfigMaps, "", {}, 1);
    CHECK(paged["items"].size() == 4);
    ListOptions first;
    first.limit = 2;
    Json page = client.List(kConfigMaps, "", first);
    CHECK(page["items"].size() == 2);
    CHECK(page["metadata"]["remainingItemCount"] == 2);
  }

  TEST_CASE("replace, merge / JSON / strategic patches, status subresource, conflicts") {
    FakeCluster fake;
    Client client = fake.client();
    Json cm = client.Create(kConfigMaps, "default", ConfigMap("cm", {{"a", "1"}}, {{"k", "v"}}));

    Json stale = cm;
    cm["data"]["k"] = "v2";
    Json replaced = client.Replace(kConfigMaps, "default", cm);
    CHECK(replaced["data"]["k"] == "v2");
    CHECK(replaced["metadata"]["uid"] == cm["metadata"]["uid"]);
    CHECK(replaced["metadata"]["resourceVersion"] != cm["metadata"]["resourceVersion"]);
    // A replace with an outdated resourceVersion is a Conflict.
    stale["data"]["k"] = "lost";
    CHECK_THROWS_AS(client.Replace(kConfigMaps, "default", stale), Conflict);
    Json missing = ConfigMap("nope");
    CHECK_THROWS_AS(client.Replace(kConfigMaps, "default", missing), NotFound);

    Json merged =
        client.Patch(kConfigMaps, "default", "cm", PatchType::kMerge,
                     {{"data", {{"extra", "x"}}}, {"metadata", {{"labels", {{"a", nullptr}}}}}});
    CHECK(merged["data"] == Json{{"k", "v2"}, {"extra", "x"}});
    CHECK_FALSE(merged["metadata"]["labels"].contains("a"));
    Json patched =
        client.Patch(kConfigMaps, "default", "cm", PatchType::kJson,
                     Json::array({{{"op", "replace"}, {"path", "/data/k"}, {"value", "j"}}}));
    CHECK(patched["data"]["k"] == "j");
    CHECK_THROWS_AS(
        client.Patch(kConfigMaps, "default", "cm", PatchType::kJson,
                     Json::array({{{"op", "test"}, {"path", "/data/k"}, {"value", "no"}}})),
        Invalid);
    Json strategic = client.Patch(kConfigMaps, "default", "cm", PatchType::kStrategicMerge,
                                  {{"data", {{"s", "1"}}}});
    CHECK(strategic["data"]["s"] == "1");
    CHECK_THROWS_AS(
        client.Patch(kConfigMaps, "default", "absent", PatchType::kMerge, {{"data", {}}}),
        NotFound);

    // Status belongs to the status subresource: writes to the object keep it, and the other way
    // round; generation counts spec changes only.
    Json job = {{"apiVersion", "batch/v1"},
                {"kind", "Job"},
                {"metadata", {{"name", "train"}}},
                {"spec", {{"backoffLimit", 1}}},
                {"status", {{"active", 5}}}};
    Json created = client.Create(kJobs, "default", job);
    CHECK_FALSE(created.contains("status"));  // a create drops it, as on the server
    CHECK(created["metadata"]["generation"] == 1);
    Json with_status = client.Patch(kJobs, "default", "train", PatchType::kMerge,
                                    {{"status", {{"succeeded", 1}}}}, {}, "status");
    CHECK(with_status["status"]["succeeded"] == 1);
    CHECK(with_status["metadata"]["generation"] == 1);
    Json spec_change =
        client.Patch(kJobs, "default", "train", PatchType::kMerge,
                     {{"spec", {{"backoffLimit", 2}}}, {"status", {{"succeeded", 0}}}});
    CHECK(spec_change["spec"]["backoffLimit"] == 2);
    CHECK(spec_change["status"]["succeeded"] == 1);
    CHECK(spec_change["metadata"]["generation"] == 2);
    CHECK(client.Get(kJobs, "default", "train", "status")["status"]["succeeded"] == 1);
  }

  TEST_CASE("server-side apply creates, merges into the stored object and is idempotent") {
    FakeCluster fake;
    Client client = fake.client("team-a");
    Json cm = ConfigMap("applied", {{"app", "x"}}, {{"a", "1"}, {"b", "2"}});
    Json first = client.Apply(cm);
    CHECK(first["metadata"]["namespace"] == "team-a");
    CHECK(first["data"] == Json{{"a", "1"}, {"b", "2"}});
    auto requests = fake.requests();
    REQUIRE_FALSE(requests.empty());
    const auto& apply = requests.back();
    CHECK(apply.method == "PATCH");
    CHECK(apply.path == "/api/v1/namespaces/team-a/configmaps/applied");
    CHECK(apply.content_type == "application/apply-patch+yaml");
    CHECK(apply.query.find("fieldManager=tfk8s") != std::string::npos);
    CHECK(apply.body["data"]["a"] == "1");

    // Applying the same object again changes nothing: same resourceVersion.
    Json again = client.Apply(cm);
    CHECK(again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]);

    // Merged into what is stored: fields set by others stay (a simplification of field
    // ownership, see docs/testing.md).
    client.Patch(kConfigMaps, "team-a", "applied", PatchType::kMerge, {{"data", {{"c", "3"}}}});
    Json changed = ConfigMap("applied", {{"app", "x"}}, {{"a", "10"}});
    Json merged = client.Apply(changed);
    CHECK(merged["data"] == Json{{"a", "10"}, {"b", "2"}, {"c", "3"}});
    CHECK(merged["metadata"]["uid"] == first["metadata"]["uid"]);

    // A dry run answers without storing.
    ApplyOptions dry;
    dry.dry_run = true;
    Json dry_object = ConfigMap("dry");
    CHECK(client.Apply(dry_object, dry)["metadata"]["name"] == "dry");
    CHECK_FALSE(fake.Find("v1", "ConfigMap", "team-a", "dry").has_value());

    // ApplyAll from many threads at once.
    std::vector<Json> many;
    for (int i = 0; i < 40; ++i) many.push_back(ConfigMap("many-" + std::to_string(i)));
    auto results = client.ApplyAll(many, {}, 8);
    for (const auto& r : results) CHECK(r.ok());
    CHECK(fake.Objects("v1", "ConfigMap", "team-a").size() == 41);
  }

  TEST_CASE("delete: object, preconditions, owner cascade, orphans, collections, namespaces") {
    FakeCluster fake;
    Client client = fake.client();
    Json owner = client.Create(kConfigMaps, "default", ConfigMap("owner"));
    Json child = ConfigMap("child", {{"set", "x"}});
    child["metadata"]["ownerReferences"] = {{{"apiVersion", "v1"},
                                             {"kind", "ConfigMap"},
                                             {"name", "owner"},
                                             {"uid", owner["metadata"]["uid"]}}};
    client.Create(kConfigMaps, "default", child);
    Json grandchild = ConfigMap("grandchild");
    grandchild["metadata"]["ownerReferences"] = {
        {{"apiVersion", "v1"},
         {"kind", "ConfigMap"},
         {"name", "child"},
         {"uid", fake.Find("v1", "ConfigMap", "default", "child").value()["metadata"]["uid"]}}};
    client.Create(kConfigMaps, "default", grandchild);

    DeleteOptions wrong_uid;
    wrong_uid.precondition_uid = "not-the-uid";
    CHECK_THROWS_AS(client.Delete(kConfigMaps, "default", "owner", wrong_uid), Conflict);
    DeleteOptions dry;
    dry.dry_run = true;
    client.Delete(kConfigMaps, "default", "owner", dry);
    CHECK(fake.Find("v1", "ConfigMap", "default", "owner").has_value());

    Json answer = client.Delete(kConfigMaps, "default", "owner");
    CHECK(answer["status"] == "Success");
    CHECK(Names(fake.Objects("v1", "ConfigMap", "default")).empty());  // the GC's work, at once
    CHECK_THROWS_AS(client.Delete(kConfigMaps, "default", "owner"), NotFound);

    // Orphan: the dependent stays, without its owner reference.
    Json owner2 = client.Create(kConfigMaps, "default", ConfigMap("owner2"));
    child["metadata"]["ownerReferences"][0]["uid"] = owner2["metadata"]["uid"];
    client.Create(kConfigMaps, "default", child);
    DeleteOptions orphan;
    orphan.propagation_policy = "Orphan";
    client.Delete(kConfigMaps, "default", "owner2", orphan);
    auto left = fake.Find("v1", "ConfigMap", "default", "child");
    REQUIRE(left.has_value());
    CHECK_FALSE((*left)["metadata"].contains("ownerReferences"));

    // Collections by selector.
    client.Create(kConfigMaps, "default", ConfigMap("other", {{"set", "y"}}));
    client.DeleteCollection(kConfigMaps, "default", ListOptions{"set=x"});
    CHECK(Names(fake.Objects("v1", "ConfigMap", "default")) == std::set<std::string>{"other"});

    // Deleting a namespace deletes what is in it.
    client.Create(ResourceType{"", "v1", "Namespace", "namespaces", false}, "",
                  {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "gone"}}}});
    client.Create(kConfigMaps, "gone", ConfigMap("inside"));
    client.Delete("v1", "Namespace", "", "gone");
    CHECK(fake.Objects("v1", "ConfigMap", "gone").empty());
    CHECK(fake.Find("v1", "Namespace", "", "default").has_value());
  }

  TEST_CASE("FailNext injects typed errors, once each, in order, discovery is not affected") {
    FakeCluster fake;
    Client client = fake.client();
    fake.FailNext(403, "Forbidden", "configmaps is forbidden: User \"alice\" cannot create");
    fake.FailNext(403, "Forbidden",
                  "exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1");
    fake.FailNext(500, "InternalError", "etcd is sad");
    try {
      client.Apply(ConfigMap("x"));  // discovery first: it is not the one that fails
      FAIL("expected Forbidden");
    } catch (const QuotaExceeded&) {
      FAIL("the first failure is a plain Forbidden");
    } catch (const Forbidden& e) {
      CHECK(e.http_code() == 403);
      CHECK(e.server_message().find("cannot create") != std::string::npos);
    }
    try {
      client.Create(kPods, "default", {{"metadata", {{"name", "p"}}}});
      FAIL("expected QuotaExceeded");
    } catch (const QuotaExceeded& e) {
      CHECK(e.resources() == std::vector<std::string>{"pods"});
    }
    // The client from FakeCluster::client() does not retry, so even a read sees the 500.
    CHECK_THROWS_AS(client.Get(kConfigMaps, "default", "x"), ServerError);
    // Then the server answers normally again: the failed apply stored nothing.
    CHECK_THROWS_AS(client.Get(kConfigMaps, "default", "x"), NotFound);

    // Even a client with a retry policy of its own sees an injected 503: like client-go, it
    // repeats a 5xx only when the server sends Retry-After, which FailNext does not.
    ClientConfig config;
    config.retry.initial_backoff = std::chrono::milliseconds(1);
    config.retry.max_backoff = std::chrono::milliseconds(2);
    Client retrying = fake.client(config);
    client.Create(kConfigMaps, "default", ConfigMap("x"));
    fake.FailNext(503, "ServiceUnavailable", "try again");
    CHECK_THROWS_AS(retrying.Get(kConfigMaps, "default", "x"), ServerError);
    CHECK(retrying.Get(kConfigMaps, "default", "x")["metadata"]["name"] == "x");
  }

  TEST_CASE("requests are recorded: method, path, query, body, content type, and cleared") {
    FakeCluster fake;
    Client client = fake.client();
    fake.ClearRequests();
    ListOptions o;
    o.label_selector = "app=web";
    client.List(kPods, "default", o);
    client.Create(kConfigMaps, "default", ConfigMap("x"));
    auto requests = fake.requests();
    REQUIRE(requests.size() == 2);
    CHECK(requests[0].method == "GET");
    CHECK(requests[0].path == "/api/v1/namespaces/default/pods");
    CHECK(requests[0].query == "labelSelector=app%3Dweb&timeout=60s");
    CHECK(requests[0].body.is_null());
    CHECK(requests[1].method == "POST");
    CHECK(requests[1].content_type == "application/json");
    CHECK(requests[1].body["metadata"]["name"] == "x");
    fake.ClearRequests();
    CHECK(fake.requests().empty());
  }

  TEST_CASE("seeding with Add, Find and Objects, Add replaces and keeps identity") {
    FakeCluster fake;
    fake.Add({{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}, {"namespace", "team-a"}, {"labels", {{"app", "x"}}}}},
              {"status", {{"phase", "Pending"}}}});
    auto pod = fake.Find("v1", "Pod", "team-a", "p");
    REQUIRE(pod.has_value());
    const std::string uid = (*pod)["metadata"]["uid"];
    CHECK((*pod)["status"]["phase"] == "Pending");  // Add keeps status: the test is the kubelet
    (*pod)["status"]["phase"] = "Running";
    fake.Add(*pod);
    CHECK(fake.Find("v1", "Pod", "team-a", "p").value()["status"]["phase"] == "Running");
    CHECK(fake.Find("v1", "Pod", "team-a", "p").value()["metadata"]["uid"] == uid);
    CHECK_FALSE(fake.Find("v1", "Pod", "team-a", "q").has_value());
    CHECK(fake.Objects("v1", "Pod").size() == 1);
    CHECK(fake.Objects("v1", "Pod", "elsewhere").empty());
    CHECK(Names(fake.Objects("v1", "Namespace")) ==
          std::set<std::string>{"default", "kube-public", "kube-system"});
    CHECK_THROWS_AS(fake.Add({{"apiVersion", "v1"}, {"kind", "Pod"}}), ValidationError);
    CHECK_THROWS_AS(fake.Find("v9", "Pod", "", "p"), ValidationError);

    fake.AddNode("n1", {{"nodetype", "tensorflow"}}, "16", "64Gi", 4);
    Json node = fake.Find("v1", "Node", "", "n1").value();
    CHECK(node["metadata"]["labels"]["nodetype"] == "tensorflow");
    CHECK(node["status"]["allocatable"]["nvidia.com/gpu"] == "4");
    CHECK(node["status"]["allocatable"]["cpu"] == "16");
  }

  TEST_CASE("watches: current objects as ADDED, then live changes, resume, timeouts, informers") {
    FakeCluster fake;
    Client client = fake.client();
    client.Create(kConfigMaps, "default", ConfigMap("before", {{"w", "yes"}}));
    WatchOptions o;
    o.label_selector = "w=yes";
    o.allow_bookmarks = false;
    WatchStream watch = client.Watch(kConfigMaps, "default", o);
    auto first = watch.Next(std::chrono::seconds(2));
    REQUIRE(first.has_value());
    CHECK(first->type == WatchEventType::kAdded);
    CHECK(first->object["metadata"]["name"] == "before");

    client.Create(kConfigMaps, "default", ConfigMap("ignored", {{"w", "no"}}));
    Json after = client.Create(kConfigMaps, "default", ConfigMap("after", {{"w", "yes"}}));
    auto added = watch.Next(std::chrono::seconds(2));
    REQUIRE(added.has_value());
    CHECK(added->type == WatchEventType::kAdded);
    CHECK(added->object["metadata"]["name"] == "after");
    // A label change that leaves the selection is a DELETED for this watch.
    client.Patch(kConfigMaps, "default", "after", PatchType::kMerge,
                 {{"metadata", {{"labels", {{"w", "no"}}}}}});
    auto left = watch.Next(std::chrono::seconds(2));
    REQUIRE(left.has_value());
    CHECK(left->type == WatchEventType::kDeleted);
    watch.Cancel();

    // Resuming from a version replays what happened after it.
    WatchOptions resume;
    resume.resource_version = after["metadata"]["resourceVersion"];
    resume.timeout_seconds = 1;
    WatchStream replay = client.Watch(kConfigMaps, "default", resume);
    auto modified = replay.Next(std::chrono::seconds(2));
    REQUIRE(modified.has_value());
    CHECK(modified->type == WatchEventType::kModified);
    CHECK(modified->object["metadata"]["labels"]["w"] == "no");
    // timeoutSeconds ends the stream, as on the server.
    auto end = replay.Next(std::chrono::seconds(5));
    CHECK_FALSE(end.has_value());
    CHECK(replay.ended());

    // An informer sees the list, then a change made from another thread.
    ListOptions selectors;
    selectors.field_selector = "metadata.name=late";
    Informer informer(client, kConfigMaps, "default", selectors);
    std::thread writer([&] { client.Create(kConfigMaps, "default", ConfigMap("late")); });
    std::optional<WatchEvent> event;
    for (int i = 0; i < 20 && !event; ++i) event = informer.Next(std::chrono::milliseconds(200));
    writer.join();
    REQUIRE(event.has_value());
    CHECK(event->object["metadata"]["name"] == "late");
    informer.Cancel();
  }

  TEST_CASE("concurrent clients from many threads see a consistent store") {
    FakeCluster fake;
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        Client client = fake.client();
        for (int i = 0; i < 25; ++i) {
          try {
            client.Apply(ConfigMap("cm-" + std::to_string(t) + "-" + std::to_string(i)));
          } catch (...) {
            ++failures;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    CHECK(failures == 0);
    CHECK(fake.Objects("v1", "ConfigMap", "default").size() == 200);
  }

  TEST_CASE("a TFCluster launches with no cluster: root ConfigMap, Services, Jobs, owners") {
    FakeCluster fake;
    AddTensorFlowNodes(fake);
    Client client = fake.client("team-a");
    TFCluster cluster(client, SmallCluster());
    CHECK(cluster.Preflight().fits);
    auto applied = cluster.Apply();
    REQUIRE_FALSE(applied.empty());
    CHECK(applied.front()["kind"] == "ConfigMap");

    auto root = fake.Find("v1", "ConfigMap", "team-a", "mnist");
    REQUIRE(root.has_value());
    const std::string root_uid = (*root)["metadata"]["uid"];
    using S = std::set<std::string>;
    const S replicas{"mnist-chief-0", "mnist-ps-0", "mnist-worker-0", "mnist-worker-1"};
    CHECK(Names(fake.Objects("batch/v1", "Job", "team-a")) == replicas);
    // One headless Service per role: the pods' subdomain.
    CHECK(Names(fake.Objects("v1", "Service", "team-a")) ==
          S{"mnist-chief", "mnist-ps", "mnist-worker"});
    for (const auto& job : fake.Objects("batch/v1", "Job", "team-a")) {
      // Every child is owned by the root, so one delete cascades.
      REQUIRE(job["metadata"].contains("ownerReferences"));
      CHECK(job["metadata"]["ownerReferences"][0]["uid"] == root_uid);
    }
    // The worker's TF_CONFIG names every replica by hostname under its role's Service.
    Json worker = fake.Find("batch/v1", "Job", "team-a", "mnist-worker-1").value();
    std::string tf_config;
    for (const auto& e : worker["spec"]["template"]["spec"]["containers"][0]["env"]) {
      if (e["name"] == "TF_CONFIG") tf_config = e["value"];
    }
    Json parsed = Json::parse(tf_config);
    CHECK(parsed["task"] == Json{{"type", "worker"}, {"index", 1}});
    CHECK(parsed["cluster"]["ps"].size() == 1);
    CHECK(parsed["cluster"]["worker"].size() == 2);
    CHECK(parsed["cluster"]["worker"][1] == "mnist-worker-1.mnist-worker:2222");

    // The writes were server-side applies.
    int applies = 0;
    for (const auto& r : fake.requests()) {
      if (r.method == "PATCH" && r.content_type == "application/apply-patch+yaml") ++applies;
    }
    CHECK(applies == 1 + 4 + 3);  // root, Jobs, a Service per role

    // The cluster can be loaded back and listed from what the fake stores.
    CHECK(TFCluster::List(client, "team-a") == std::vector<std::string>{"mnist"});
    CHECK(TFCluster::Load(client, "team-a", "mnist").spec().worker.replicas == 2);

    // No controllers run: the test plays them, adding Running pods for the Jobs' templates,
    // owned by their Jobs as the Job controller would make them.
    CHECK(cluster.Status().NotReady() == 4);
    for (const auto& job : fake.Objects("batch/v1", "Job", "team-a")) {
      const std::string name = job["metadata"]["name"];
      fake.Add(
          {{"apiVersion", "v1"},
           {"kind", "Pod"},
           {"metadata",
            {{"name", name + "-abcde"},
             {"namespace", "team-a"},
             {"labels", job["spec"]["template"]["metadata"]["labels"]},
             {"ownerReferences",
              {{{"apiVersion", "batch/v1"},
                {"kind", "Job"},
                {"name", name},
                {"uid", job["metadata"]["uid"]},
                {"controller", true}}}}}},
           {"spec", job["spec"]["template"]["spec"]},
           {"status",
            {{"phase", "Running"}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
    }
    TFClusterStatus ready =
        cluster.Wait({.until = WaitUntil::kReady, .timeout = std::chrono::seconds(10)});
    CHECK(ready.phase == TFClusterPhase::kRunning);
    CHECK(ready.NotReady() == 0);

    // StatusOf reads the root and the pods at once. While every replica's pod is Running the
    // Jobs cannot change the result and are not read; once one is not, they are.
    auto job_lists = [&fake] {
      int n = 0;
      for (const auto& r : fake.requests()) {
        n += r.method == "GET" && r.path == "/apis/batch/v1/namespaces/team-a/jobs";
      }
      return n;
    };
    fake.ClearRequests();
    TFClusterStatus of = TFCluster::StatusOf(client, "team-a", "mnist");
    CHECK(of.phase == TFClusterPhase::kRunning);
    CHECK(of.replicas.size() == 4);
    CHECK(cluster.Status().NotReady() == 0);
    CHECK(job_lists() == 0);
    // worker-1's Job fails: the Job controller deletes its pod, then records the condition.
    client.Delete("v1", "Pod", "team-a", "mnist-worker-1-abcde");
    Json failed_job = *fake.Find("batch/v1", "Job", "team-a", "mnist-worker-1");
    failed_job["status"]["conditions"] =
        Json::array({Json{{"type", "Failed"},
                          {"status", "True"},
                          {"reason", "BackoffLimitExceeded"},
                          {"message", "Job has reached the specified backoff limit"}}});
    fake.Add(failed_job);
    of = TFCluster::StatusOf(client, "team-a", "mnist");
    CHECK(job_lists() == 1);
    CHECK(of.phase == TFClusterPhase::kFailed);
    CHECK(of.message.find("worker-1 failed: BackoffLimitExceeded") != std::string::npos);
    CHECK(cluster.Status().phase == TFClusterPhase::kFailed);
    CHECK_THROWS_AS(TFCluster::StatusOf(client, "team-a", "nosuch"), NotFound);

    // Scaling down prunes the replica that is no longer rendered.
    cluster.Scale("worker", 1);
    CHECK(Names(fake.Objects("batch/v1", "Job", "team-a")) ==
          S{"mnist-chief-0", "mnist-ps-0", "mnist-worker-0"});
    CHECK_FALSE(fake.Find("v1", "Service", "team-a", "mnist-worker-1").has_value());

    // One delete of the root cascades through the owner references.
    cluster.Delete();
    CHECK(fake.Objects("batch/v1", "Job", "team-a").empty());
    CHECK(fake.Objects("v1", "Service", "team-a").empty());
    CHECK(fake.Objects("v1", "Pod", "team-a").empty());
    CHECK_FALSE(fake.Find("v1", "ConfigMap", "team-a", "mnist").has_value());
  }

  TEST_CASE("a TFCluster's status tells where its session is reached, node ports included") {
    FakeCluster fake;
    AddTensorFlowNodes(fake);
    Client client = fake.client("team-a");
    TFClusterSpec spec = SmallCluster();
    spec.session = TFSessionSpec{};
    spec.session->resources = {"1", "1Gi", "", "", 0};
    TFCluster cluster(client, spec);
    cluster.Apply();
    TFClusterStatus st = cluster.Status();
    REQUIRE(st.session.has_value());
    CHECK(st.session->user == "root");
    REQUIRE(st.session->Find("jupyter").has_value());
    CHECK(st.session->Find("jupyter")->cluster_address == "mnist-session.team-a.svc:8888");
    CHECK(st.session->Find("jupyter")->connect == "http://mnist-session.team-a.svc:8888/");
    CHECK(st.session->Find("ssh")->connect == "ssh -p 22 root@mnist-session-ssh.team-a.svc");
    CHECK(st.Table().find("session: user root") != std::string::npos);
    CHECK(st.Table().find("ssh -p 22 root@mnist-session-ssh.team-a.svc") != std::string::npos);
    Json j = st.ToJson();
    CHECK(j["session"]["endpoints"][0]["tool"] == "jupyter");
    // No password anywhere in the status.
    const std::string password = cluster.Session().password;
    CHECK(j.dump().find(password) == std::string::npos);
    CHECK(TFCluster::StatusOf(client, "team-a", "mnist").session->endpoints.size() == 2);

    // A NodePort session: the node ports the server gave its Services (the fake gives none, so
    // the test plays the server).
    spec.name = "seed";
    spec.session->service_type = "NodePort";
    TFCluster exposed(client, spec);
    exposed.Apply();
    for (const auto& [service, port] :
         {std::pair{"seed-session", 30088}, std::pair{"seed-session-ssh", 30022}}) {
      Json svc = *fake.Find("v1", "Service", "team-a", service);
      svc["spec"]["ports"][0]["nodePort"] = port;
      fake.Add(svc);
    }
    st = exposed.Status();
    CHECK(st.session->Find("jupyter")->external_port == 30088);
    CHECK(st.session->Find("ssh")->external_port == 30022);
    CHECK(exposed.Session().access.Find("ssh")->external_port == 30022);
    // Without a session there is none in the status.
    CHECK_FALSE(TFCluster::StatusOf(client, "team-a", "mnist").session->endpoints.empty());
    TFClusterSpec plain = SmallCluster();
    plain.name = "plain";
    TFCluster(client, plain).Apply();
    CHECK_FALSE(TFCluster::StatusOf(client, "team-a", "plain").session.has_value());
    CHECK(TFCluster::StatusOf(client, "team-a", "plain").ToJson()["session"].is_null());
  }

  TEST_CASE("a TFCluster that fits no node is refused by the pre-flight, nothing is created") {
    FakeCluster fake;
    fake.AddNode("small", {{"nodetype", "tensorflow"}, {"pooltype", "shared"}}, "1", "1Gi");
    Client client = fake.client("team-a");
    TFCluster cluster(client, SmallCluster());
    CHECK_THROWS_AS(cluster.Apply(), TFClusterFailed);
    CHECK_FALSE(fake.Find("v1", "ConfigMap", "team-a", "mnist").has_value());
    CHECK(fake.Objects("batch/v1", "Job", "team-a").empty());
    // Without the pre-flight the objects are created: placement is the scheduler's business,
    // and none runs here.
    TFApplyOptions no_preflight;
    no_preflight.preflight = false;
    cluster.Apply(no_preflight);
    CHECK(fake.Objects("batch/v1", "Job", "team-a").size() == 4);
  }

  TEST_CASE("a TFCluster refused by a quota: the ResourceQuota seeded in the fake counts") {
    FakeCluster fake;
    AddTensorFlowNodes(fake);
    fake.Add({{"apiVersion", "v1"},
              {"kind", "ResourceQuota"},
              {"metadata", {{"name", "team-a"}, {"namespace", "team-a"}}},
              {"spec", {{"hard", {{"requests.nvidia.com/gpu", "1"}}}}},
              {"status",
               {{"hard", {{"requests.nvidia.com/gpu", "1"}}},
                {"used", {{"requests.nvidia.com/gpu", "0"}}}}}});
    TFCluster cluster(fake.client("team-a"), SmallCluster());  // two workers with one GPU each
    try {
      cluster.Apply();
      FAIL("expected QuotaExceeded");
    } catch (const QuotaExceeded& e) {
      CHECK(e.resources() == std::vector<std::string>{"requests.nvidia.com/gpu"});
    }
    CHECK(fake.Objects("batch/v1", "Job", "team-a").empty());
  }

  TEST_CASE("a ScheduledJob applies its CronJob in batch/v1beta1, as a v1.20 server serves it") {
    FakeCluster fake;
    fake.AddNode("n1", {{"nodetype", "tensorflow"}, {"pooltype", "shared"}}, "32", "128Gi");
    Client client = fake.client("team-a");
    ScheduledJobSpec spec;
    spec.name = "nightly";
    spec.namespace_name = "team-a";
    spec.image = "tensorflow/tensorflow:2.4.0";
    spec.entry_path = "train.py";
    spec.exec_command = "python3";
    spec.resources = {"2", "4Gi", "", "", 0};
    spec.schedule = "30 2 * * *";
    ScheduledJob job(client, spec);
    Json cronjob = job.Apply();
    CHECK(cronjob["apiVersion"] == "batch/v1beta1");
    auto stored = fake.Find("batch/v1beta1", "CronJob", "team-a", "nightly");
    REQUIRE(stored.has_value());
    CHECK((*stored)["spec"]["schedule"] == "30 2 * * *");
    CHECK(ScheduledJob::List(client, "team-a") == std::vector<std::string>{"nightly"});
    job.Suspend();
    CHECK(fake.Find("batch/v1beta1", "CronJob", "team-a", "nightly").value()["spec"]["suspend"] ==
          true);
    job.Resume();
    CHECK(fake.Find("batch/v1beta1", "CronJob", "team-a", "nightly").value()["spec"]["suspend"] ==
          false);
  }

  TEST_CASE("an on-demand ScheduledJob refuses Suspend and Resume: no schedule, nothing sent") {
    FakeCluster fake;
    fake.AddNode("n1", {{"nodetype", "tensorflow"}, {"pooltype", "shared"}}, "32", "128Gi");
    Client client = fake.client("team-a");
    ScheduledJobSpec spec;
    spec.name = "once";
    spec.namespace_name = "team-a";
    spec.image = "tensorflow/tensorflow:2.4.0";
    spec.entry_path = "train.py";
    spec.resources = {"2", "4Gi", "", "", 0};
    ScheduledJob(client, spec).RunNow();
    ScheduledJob task = ScheduledJob::Load(client, "team-a", "once");
    const Json run_before = fake.Objects("batch/v1", "Job", "team-a").at(0);
    fake.ClearRequests();
    for (const char* verb : {"suspend", "resume"}) {
      CAPTURE(verb);
      try {
        if (std::string(verb) == "suspend") {
          task.Suspend();
        } else {
          task.Resume();
        }
        FAIL("not refused");
      } catch (const ValidationError& e) {
        const std::string what = e.what();
        CHECK(e.field() == "schedule");
        CHECK_MESSAGE(what.find("team-a/once runs on demand") != std::string::npos, what);
        CHECK_MESSAGE(what.find(std::string("no schedule to ") + verb) != std::string::npos, what);
      }
    }
    CHECK(fake.requests().empty());  // refused before any request
    CHECK_FALSE(task.spec().suspend);
    CHECK(fake.Objects("batch/v1beta1", "CronJob", "team-a").empty());
    const std::vector<Json> runs = fake.Objects("batch/v1", "Job", "team-a");
    REQUIRE(runs.size() == 1);
    CHECK(runs[0]["metadata"]["resourceVersion"] == run_before["metadata"]["resourceVersion"]);
  }

  TEST_CASE("a DevInstance is created with its StatefulSet, Secret and NodePort Services") {
    FakeCluster fake;
    fake.AddNode("n1", {{"nodetype", "tensorflow"}, {"pooltype", "shared"}}, "32", "128Gi");
    Client client = fake.client("team-a");
    DevInstanceSpec spec;
    spec.owner = "alice";
    spec.name = "lab";
    spec.namespace_name = "team-a";
    spec.resources = {"2", "4Gi", "", "", 0};
    spec.expose.backend = DevExposure::kNodePort;
    DevInstance lab(client, spec);
    DevStartResult started = lab.Create();
    CHECK(fake.Find("apps/v1", "StatefulSet", "team-a", "lab").has_value());
    CHECK_FALSE(fake.Objects("v1", "Secret", "team-a").empty());
    CHECK_FALSE(fake.Objects("v1", "Service", "team-a").empty());
    CHECK(fake.Find("v1", "PersistentVolumeClaim", "team-a", HomeClaimName("alice")).has_value());
    CHECK_FALSE(started.password.empty());
    // The access information comes from the node ports the fake assigned to the Services.
    auto jupyter = started.access.Find("jupyter");
    REQUIRE(jupyter.has_value());
    CHECK(jupyter->external_port >= 30000);
    CHECK_THROWS_AS(lab.Create(), AlreadyExists);
  }

  TEST_CASE("a label selector narrows DevInstance::List and the idle culler") {
    FakeCluster fake;
    fake.AddNode("n1", {{"nodetype", "tensorflow"}, {"pooltype", "shared"}}, "32", "128Gi");
    Client client = fake.client("team-a");
    for (const char* team : {"vision", "nlp"}) {
      DevInstanceSpec spec;
      spec.owner = "alice";
      spec.name = std::string(team) + "-lab";
      spec.namespace_name = "team-a";
      spec.resources = {"1", "1Gi", "", "", 0};
      spec.home.enabled = false;
      spec.labels = {{"team", team}};
      DevInstance(client, spec).Create();
    }
    auto names = [](const std::vector<DevInstanceSummary>& list) {
      std::vector<std::string> out;
      for (const auto& s : list) out.push_back(s.name);
      return out;
    };
    CHECK(names(DevInstance::List(client, "team-a")) ==
          std::vector<std::string>{"nlp-lab", "vision-lab"});
    CHECK(names(DevInstance::List(client, "team-a", "", "team=vision")) ==
          std::vector<std::string>{"vision-lab"});
    CHECK(names(DevInstance::List(client, "team-a", "alice", "team notin (vision)")) ==
          std::vector<std::string>{"nlp-lab"});
    DevCullOptions o;
    o.namespace_name = "team-a";
    o.action = DevIdleAction::kReport;
    o.label_selector = "team=vision";
    std::vector<std::string> decided;
    for (const auto& d : CullIdleDevInstances(client, o)) decided.push_back(d.name);
    CHECK(decided == std::vector<std::string>{"vision-lab"});
  }

  TEST_CASE("a ScheduledJobWatcher's label selector narrows every list and watch") {
    FakeCluster fake;
    Client client = fake.client("team-a");
    ScheduledJobWatcherOptions o;
    o.namespace_name = "team-a";
    o.label_selector = "team=vision";
    o.clean_up_tf_clusters = true;
    o.bound_history = true;
    ScheduledJobWatcher watcher(client, o);
    watcher.Start();
    // Its four informers (runs, schedules, cluster roots, cluster Jobs) list first.
    auto lists = [&] {
      std::vector<std::string> queries;
      for (const auto& r : fake.requests()) {
        if (r.method == "GET" && r.query.find("labelSelector=") != std::string::npos &&
            r.query.find("watch=") == std::string::npos) {
          queries.push_back(r.path + "?" + r.query);
        }
      }
      return queries;
    };
    for (int i = 0; i < 500 && lists().size() < 4; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    watcher.Stop();
    const auto queries = lists();
    REQUIRE(queries.size() >= 4);
    std::set<std::string> paths;
    for (const auto& q : queries) {
      CAPTURE(q);
      CHECK(q.find("team%3Dvision") != std::string::npos);
      paths.insert(q.substr(0, q.find('?')));
    }
    CHECK(paths == std::set<std::string>{"/api/v1/namespaces/team-a/configmaps",
                                         "/apis/batch/v1/namespaces/team-a/jobs",
                                         "/apis/batch/v1beta1/namespaces/team-a/cronjobs"});
  }

  TEST_CASE("every workload lists across namespaces with namespace and name, names need one") {
    FakeCluster fake;
    AddTensorFlowNodes(fake);
    Client client = fake.client();
    for (const char* ns : {"team-b", "team-a"}) {
      TFClusterSpec cluster = SmallCluster();
      cluster.namespace_name = ns;
      TFCluster(client, cluster).Apply();
      ScheduledJobSpec job;
      job.name = "nightly";
      job.namespace_name = ns;
      job.image = "python:3";
      job.entry_path = "train.py";
      job.schedule = "30 2 * * *";
      ScheduledJob(client, job).Apply();
      DevInstanceSpec dev;
      dev.owner = std::string(ns) == "team-a" ? "alice" : "bob";
      dev.name = "lab";
      dev.namespace_name = ns;
      dev.resources = {"1", "1Gi", "", "", 0};
      DevInstance(client, dev).Create();
    }
    const std::vector<WorkloadRef> clusters = {{"team-a", "mnist", ""}, {"team-b", "mnist", ""}};
    CHECK(TFCluster::ListRefs(client) == clusters);
    CHECK(TFCluster::ListRefs(client, "team-b") == std::vector<WorkloadRef>{clusters[1]});
    CHECK(ScheduledJob::ListRefs(client) ==
          std::vector<WorkloadRef>{{"team-a", "nightly", ""}, {"team-b", "nightly", ""}});
    CHECK(DevInstance::ListRefs(client) ==
          std::vector<WorkloadRef>{{"team-a", "lab", "alice"}, {"team-b", "lab", "bob"}});
    CHECK(DevInstance::ListRefs(client, "", "bob") ==
          std::vector<WorkloadRef>{{"team-b", "lab", "bob"}});
    CHECK(clusters[0].ToJson() ==
          Json{{"namespace", "team-a"}, {"name", "mnist"}, {"owner", ""}, {"created", nullptr}});
    // A listed ref says when its root was created (what `tfk8s list` prints as AGE); equality
    // is by identity alone.
    const WorkloadRef listed = TFCluster::ListRefs(client, "team-a").at(0);
    CHECK(listed.created.size() == 20);  // 2024-05-01T10:00:00Z
    CHECK(listed.created.back() == 'Z');
    CHECK(listed == clusters[0]);
    // Names alone would be ambiguous across namespaces: refused before anything is sent.
    fake.ClearRequests();
    CHECK_THROWS_WITH_AS(TFCluster::List(client, ""), doctest::Contains("namespace"),
                         ValidationError);
    CHECK_THROWS_WITH_AS(ScheduledJob::List(client, ""), doctest::Contains("ListRefs"),
                         ValidationError);
    CHECK(fake.requests().empty());
    CHECK(TFCluster::List(client, "team-a") == std::vector<std::string>{"mnist"});
  }
}
