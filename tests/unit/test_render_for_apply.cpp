// The GitOps path (#40): what `tfk8s render` prints for `kubectl apply` (RenderForApply: the
// server's API versions, ownerReferences to a root that exists, a fixed name for an on-demand
// run), and Delete() removing what such an apply created before the root existed, and nothing
// that is not the workload's. On the FakeCluster (a v1.20 server: CronJob in batch/v1beta1).
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/testing/fake_cluster.hpp"
#include "tfk8s/tfcluster.hpp"
#include "workloads/unowned.hpp"

using namespace tfk8s;
using tfk8s::testing::FakeCluster;

namespace {

TFClusterSpec Cluster() {
  TFClusterSpec s;
  s.name = "mnist";
  s.namespace_name = "team-a";
  s.owner = "alice";
  s.ps.replicas = 1;
  s.ps.resources = {"1", "2Gi", "", "", 0};
  s.worker.replicas = 2;
  s.worker.resources = {"1", "2Gi", "", "", 0};
  s.worker.script = "python /data/train.py";
  return s;
}

DevInstanceSpec Dev() {
  DevInstanceSpec s;
  s.owner = "alice";
  s.name = "lab";
  s.namespace_name = "team-a";
  s.image = "tfk8s.local/dev:1";
  s.resources = {"1", "2Gi", "", "", 0};
  s.home.enabled = false;
  return s;
}

ScheduledJobSpec Task(const std::string& schedule) {
  ScheduledJobSpec s;
  s.name = "nightly";
  s.namespace_name = "team-a";
  s.image = "tensorflow/tensorflow:2.4.0";
  s.entry_path = "train.py";
  s.exec_command = "python3";
  s.resources = {"1", "2Gi", "", "", 0};
  s.schedule = schedule;
  return s;
}

void AddNodes(FakeCluster& fake) {
  fake.AddNode("n1", {{"nodetype", "tensorflow"}, {"pooltype", "shared"}}, "32", "128Gi");
}

// What `kubectl apply -f` of the objects does.
void KubectlApply(Client& client, const std::vector<Json>& objects) {
  for (const auto& o : objects) client.Apply(o);
}

// The namespace's objects of these kinds, as "Kind/name".
std::set<std::string> Present(Client& client, const std::vector<ResourceType>& types) {
  std::set<std::string> out;
  for (const auto& t : types) {
    Json list = client.ListAll(t, "team-a");  // kept: a temporary's items would dangle
    for (const auto& item : list["items"]) {
      out.insert(t.kind + "/" + item["metadata"]["name"].get<std::string>());
    }
  }
  return out;
}

const ResourceType kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};
const ResourceType kServices{"", "v1", "Service", "services", true};
const ResourceType kJobs{"batch", "v1", "Job", "jobs", true};
const ResourceType kStatefulSets{"apps", "v1", "StatefulSet", "statefulsets", true};
const ResourceType kServiceAccounts{"", "v1", "ServiceAccount", "serviceaccounts", true};

bool HasOwner(const Json& object) {
  return object["metadata"].contains("ownerReferences") &&
         !object["metadata"]["ownerReferences"].empty();
}

}  // namespace

TEST_SUITE("render_for_apply") {
  TEST_CASE("TFCluster: no owner before the root exists, the root's UID once it does") {
    FakeCluster fake;
    AddNodes(fake);
    Client client = fake.client("team-a");
    TFCluster cluster(client, Cluster());
    std::vector<Json> first = cluster.RenderForApply();
    REQUIRE(first.size() > 2);
    CHECK(first == cluster.Render());
    for (const auto& o : first) CHECK_FALSE(HasOwner(o));
    KubectlApply(client, first);
    std::string uid = fake.Find("v1", "ConfigMap", "team-a", "mnist").value()["metadata"]["uid"];
    std::vector<Json> second = cluster.RenderForApply();
    REQUIRE(second.size() == first.size());
    CHECK_FALSE(HasOwner(second.front()));  // the root owns, it is not owned
    for (std::size_t i = 1; i < second.size(); ++i) {
      INFO(second[i]["kind"], "/", second[i]["metadata"]["name"]);
      REQUIRE(HasOwner(second[i]));
      CHECK(second[i]["metadata"]["ownerReferences"][0]["uid"] == uid);
      CHECK(second[i]["metadata"]["ownerReferences"][0]["kind"] == "ConfigMap");
      CHECK(second[i]["metadata"]["ownerReferences"][0]["name"] == "mnist");
    }
  }

  TEST_CASE("TFCluster: another owner's root of the same name is refused") {
    FakeCluster fake;
    AddNodes(fake);
    Client client = fake.client("team-a");
    TFClusterSpec bobs = Cluster();
    bobs.owner = "bob";
    KubectlApply(client, TFCluster(client, bobs).Render());
    CHECK_THROWS_AS((void)TFCluster(client, Cluster()).RenderForApply(), ValidationError);
  }

  TEST_CASE("TFCluster: delete removes what kubectl apply created without owners, only that") {
    FakeCluster fake;
    AddNodes(fake);
    Client client = fake.client("team-a");
    TFCluster cluster(client, Cluster());
    std::vector<Json> objects = cluster.RenderForApply();
    KubectlApply(client, objects);
    // Beside it: an object of a rendered name without the cluster's labels (someone's own),
    // and one with them but owned by something else: neither is the cluster's to delete.
    std::string worker_service;
    for (const auto& o : objects) {
      if (o["kind"] == "Service") worker_service = o["metadata"]["name"];
    }
    REQUIRE_FALSE(worker_service.empty());
    client.Delete(kServices, "team-a", worker_service);
    client.Apply({{"apiVersion", "v1"},
                  {"kind", "Service"},
                  {"metadata", {{"name", worker_service}, {"namespace", "team-a"}}},
                  {"spec", {{"ports", Json::array({{{"port", 80}}})}}}});
    Json foreign;  // one of the cluster's labelled Jobs, owned by another object
    for (const auto& o : objects) {
      if (o["kind"] == "Job") foreign = o;
    }
    REQUIRE(foreign.is_object());
    const std::string foreign_name = foreign["metadata"]["name"];
    std::string other_uid = client.Apply(
        {{"apiVersion", "v1"},
         {"kind", "ConfigMap"},
         {"metadata", {{"name", "other"}, {"namespace", "team-a"}}}})["metadata"]["uid"];
    client.Delete(kJobs, "team-a", foreign_name);
    foreign["metadata"]["ownerReferences"] = Json::array(
        {{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", "other"}, {"uid", other_uid}}});
    client.Apply(foreign);
    CHECK(Present(client, {kJobs, kServices, kStatefulSets}).size() >= 3);

    TFCluster::Load(client, "team-a", "mnist").Delete({});
    std::set<std::string> left = Present(client, {kConfigMaps, kJobs, kServices, kStatefulSets});
    CHECK(left == std::set<std::string>{"ConfigMap/other", "Service/" + worker_service,
                                        "Job/" + foreign_name});
  }

  TEST_CASE("unowned objects these credentials may not read are skipped, the others deleted") {
    FakeCluster fake;
    AddNodes(fake);
    Client client = fake.client("team-a");
    std::vector<Json> objects = TFCluster(client, Cluster()).Render();
    KubectlApply(client, objects);
    fake.FailNext(403, "Forbidden", "may not get it");  // the first child's GET
    auto deleted = internal::DeleteUnownedRendered(
        client, objects, {{"tfk8s.io/cluster", "mnist"}, {"app.kubernetes.io/managed-by", "tfk8s"}},
        "Background");
    CHECK(deleted.size() == objects.size() - 2);  // not the root, not the unreadable one
    const Json& first = objects[1];
    CHECK(fake.Find(first["apiVersion"].get<std::string>(), first["kind"].get<std::string>(),
                    "team-a", first["metadata"]["name"].get<std::string>())
              .has_value());
  }

  TEST_CASE("DevInstance: owned once the StatefulSet exists, delete removes unowned leftovers") {
    FakeCluster fake;
    AddNodes(fake);
    Client client = fake.client("team-a");
    DevInstance dev(client, Dev());
    std::vector<Json> first = dev.RenderForApply();
    for (const auto& o : first) CHECK_FALSE(HasOwner(o));
    KubectlApply(client, first);
    std::string uid =
        fake.Find("apps/v1", "StatefulSet", "team-a", "lab").value()["metadata"]["uid"];
    std::vector<Json> second = dev.RenderForApply();
    CHECK_FALSE(HasOwner(second.front()));
    for (std::size_t i = 1; i < second.size(); ++i) {
      INFO(second[i]["kind"], "/", second[i]["metadata"]["name"]);
      REQUIRE(HasOwner(second[i]));
      CHECK(second[i]["metadata"]["ownerReferences"][0]["uid"] == uid);
    }
    REQUIRE_FALSE(Present(client, {kServices}).empty());
    DevInstance::Load(client, "team-a", "lab").Delete({});
    CHECK(Present(client, {kStatefulSets, kServices, kServiceAccounts}).empty());
  }

  TEST_CASE("ScheduledJob: the server's CronJob version, an on-demand run named by content") {
    FakeCluster fake;
    AddNodes(fake);
    Client client = fake.client("team-a");
    std::vector<Json> cron = ScheduledJob(client, Task("0 3 * * *")).RenderForApply();
    REQUIRE(cron.size() == 1);
    CHECK(cron[0]["apiVersion"] == "batch/v1beta1");  // a v1.20 server has no batch/v1 CronJob
    CHECK(RenderScheduledJob(Task("0 3 * * *"))[0]["apiVersion"] == "batch/v1");

    std::vector<Json> run = ScheduledJob(client, Task("")).RenderForApply();
    REQUIRE(run.size() == 1);
    const Json& meta = run[0]["metadata"];
    CHECK_FALSE(meta.contains("generateName"));
    std::string name = meta.value("name", "");
    CHECK(name.rfind("nightly-", 0) == 0);
    CHECK(name.size() == std::string("nightly-").size() + 10);
    // The same spec, the same run; another spec, another.
    CHECK(ScheduledJob(client, Task("")).RenderForApply() == run);
    ScheduledJobSpec changed = Task("");
    changed.entry_path = "other.py";
    CHECK(ScheduledJob(client, changed).RenderForApply()[0]["metadata"]["name"] != name);
    ScheduledJobRenderOptions offline;
    offline.fixed_run_name = true;
    CHECK(RenderScheduledJob(Task(""), offline) == run);
    // Applied as kubectl would, it is the task's run.
    KubectlApply(client, run);
    CHECK(ScheduledJob::Load(client, "team-a", "nightly").History().size() == 1);
  }
}
