// Quota demand, pre-flight, queue rendering and validation, usage tables. No server (the
// client-backed calls run over a fake transport).
#include <doctest/doctest.h>

#include <atomic>
#include <functional>

#include "error_text.hpp"
#include "fake_transport.hpp"
#include "tfk8s/quota.hpp"
#include "tfk8s/testing/fake_cluster.hpp"

using namespace tfk8s;
using tfk8s::testing::FakeTransport;
using tfk8s::testing::Respond;

namespace {

Quantity Q(std::string_view s) { return Quantity::Parse(s); }

Json Container(const std::string& name, const Json& requests, const Json& limits = nullptr) {
  Json c{{"name", name}, {"image", "busybox"}};
  if (!requests.is_null()) c["resources"]["requests"] = requests;
  if (!limits.is_null()) c["resources"]["limits"] = limits;
  return c;
}

Json PodSpec(const Json& containers, const Json& init = nullptr) {
  Json spec{{"containers", containers}};
  if (!init.is_null()) spec["initContainers"] = init;
  return spec;
}

Json Pod(const std::string& name, const Json& spec) {
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", name}}}, {"spec", spec}};
}

Json WorkloadObject(const std::string& api_version, const std::string& kind,
                    const std::string& name, const Json& spec) {
  return {
      {"apiVersion", api_version}, {"kind", kind}, {"metadata", {{"name", name}}}, {"spec", spec}};
}

Json Template(const Json& pod_spec) {
  return {{"metadata", {{"labels", {{"app", "x"}}}}}, {"spec", pod_spec}};
}

Json QuotaObject(const std::string& name, const Json& hard, const Json& used = nullptr,
                 const Json& extra_spec = nullptr) {
  Json q{{"apiVersion", "v1"},
         {"kind", "ResourceQuota"},
         {"metadata", {{"name", name}, {"namespace", "team-a"}}},
         {"spec", {{"hard", hard}}}};
  if (!extra_spec.is_null()) q["spec"].update(extra_spec);
  if (!used.is_null()) q["status"] = {{"hard", hard}, {"used", used}};
  return q;
}

ValidationError CatchValidation(const std::function<void()>& f) {
  try {
    f();
  } catch (const ValidationError& e) {
    return e;
  }
  FAIL("expected a ValidationError");
  throw;  // unreachable
}

ClientConfig FakeConfig() {
  ClientConfig c;
  c.server = "https://127.0.0.1:6443";
  c.token = "t";
  c.rate_limit.qps = 0;
  c.retry.initial_backoff = std::chrono::milliseconds(1);
  c.retry.max_backoff = std::chrono::milliseconds(2);
  return c;
}

}  // namespace

TEST_SUITE("quota") {
  TEST_CASE("resource lists add exactly and print canonically") {
    ResourceList a{{"requests.cpu", Q("500m")}, {"requests.memory", Q("1.5Gi")}};
    ResourceList b{{"requests.cpu", Q("0.25")}, {"requests.memory", Q("512Mi")}, {"pods", Q("1")}};
    AddTo(a, b);
    CHECK(a.at("requests.cpu") == Q("750m"));
    CHECK(a.at("requests.cpu").ToString() == "750m");
    CHECK(a.at("requests.memory").ToString() == "2Gi");
    CHECK(a.at("pods") == Q("1"));
    CHECK(ToString(a) == "pods=1, requests.cpu=750m, requests.memory=2Gi");
    CHECK(ToString(ResourceList{}).empty());
    // 3 × 100m is exactly 300m (no floating point drift), and compares with "0.3".
    ResourceList three;
    for (int i = 0; i < 3; ++i) AddTo(three, {{"cpu", Q("100m")}});
    CHECK(three.at("cpu") == Q("0.3"));
    CHECK(three.at("cpu") < Q("301m"));
  }

  TEST_CASE("ParseResourceList accepts strings and numbers and names bad values") {
    auto list = ParseResourceList(Json{{"cpu", "2"}, {"nvidia.com/gpu", 4}, {"memory", 0.5}}, "x");
    CHECK(list.at("cpu") == Q("2"));
    CHECK(list.at("nvidia.com/gpu") == Q("4"));
    CHECK(list.at("memory") == Q("500m"));
    auto e = CatchValidation([] { ParseResourceList(Json{{"cpu", "2 cores"}}, "spec.hard"); });
    CHECK(e.field() == "spec.hard[cpu]");
    CHECK(e.value() == "2 cores");
  }

  TEST_CASE("pod demand: sum of app containers vs the largest init container") {
    Json spec =
        PodSpec(Json::array({Container("a", {{"cpu", "500m"}, {"memory", "1Gi"}}, {{"cpu", "1"}}),
                             Container("b", {{"cpu", "250m"}, {"memory", "512Mi"}})}),
                Json::array({Container("init-big-cpu", {{"cpu", "2"}}),
                             Container("init-mem", {{"memory", "1Gi"}})}));
    ResourceList d = QuotaDemandOf({Pod("p", spec)});
    // cpu: max(0.75 summed, 2 init) = 2; memory: max(1.5Gi, 1Gi) = 1.5Gi.
    CHECK(d.at("requests.cpu") == Q("2"));
    CHECK(d.at("cpu") == Q("2"));
    CHECK(d.at("requests.memory") == Q("1536Mi"));
    CHECK(d.at("memory") == Q("1536Mi"));
    // Only container a states a cpu limit; init containers state none.
    CHECK(d.at("limits.cpu") == Q("1"));
    CHECK(d.count("limits.memory") == 0);
    CHECK(d.at("pods") == Q("1"));
    CHECK(d.at("count/pods") == Q("1"));
  }

  TEST_CASE("requests default to limits, and GPUs count only as requests.nvidia.com/gpu") {
    Json spec = PodSpec(Json::array(
        {Container("w", nullptr, {{"cpu", "4"}, {"memory", "8Gi"}, {"nvidia.com/gpu", 2}})}));
    ResourceList d = QuotaDemandOf({Pod("p", spec)});
    CHECK(d.at("requests.cpu") == Q("4"));
    CHECK(d.at("limits.cpu") == Q("4"));
    CHECK(d.at("requests.memory") == Q("8Gi"));
    CHECK(d.at("requests.nvidia.com/gpu") == Q("2"));
    CHECK(d.count("limits.nvidia.com/gpu") == 0);
    CHECK(d.count("nvidia.com/gpu") == 0);
    // An explicit request is not overwritten by the limit.
    Json burst = PodSpec(Json::array({Container("w", {{"cpu", "1"}}, {{"cpu", "4"}})}));
    ResourceList b = QuotaDemandOf({Pod("p", burst)});
    CHECK(b.at("requests.cpu") == Q("1"));
    CHECK(b.at("limits.cpu") == Q("4"));
  }

  TEST_CASE("hugepages and ephemeral storage") {
    Json spec = PodSpec(
        Json::array({Container("w", {{"hugepages-2Mi", "4Mi"}, {"ephemeral-storage", "1Gi"}},
                               {{"hugepages-2Mi", "4Mi"}, {"ephemeral-storage", "2Gi"}})}));
    ResourceList d = QuotaDemandOf({Pod("p", spec)});
    CHECK(d.at("hugepages-2Mi") == Q("4Mi"));
    CHECK(d.at("requests.hugepages-2Mi") == Q("4Mi"));
    CHECK(d.at("requests.ephemeral-storage") == Q("1Gi"));
    CHECK(d.at("ephemeral-storage") == Q("1Gi"));
    CHECK(d.at("limits.ephemeral-storage") == Q("2Gi"));
  }

  TEST_CASE("controllers multiply by replicas and count their own objects") {
    Json pod = PodSpec(Json::array({Container("c", {{"cpu", "500m"}, {"memory", "1Gi"}})}));
    ResourceList d = QuotaDemandOf(
        {WorkloadObject("apps/v1", "Deployment", "web",
                        {{"replicas", 3}, {"template", Template(pod)}}),
         WorkloadObject("apps/v1", "ReplicaSet", "rs", {{"template", Template(pod)}}),  // default 1
         WorkloadObject("v1", "ReplicationController", "rc",
                        {{"replicas", 0}, {"template", Template(pod)}})});
    CHECK(d.at("pods") == Q("4"));
    CHECK(d.at("count/pods") == Q("4"));
    CHECK(d.at("requests.cpu") == Q("2"));
    CHECK(d.at("requests.memory") == Q("4Gi"));
    CHECK(d.at("count/deployments.apps") == Q("1"));
    // The Deployment's own ReplicaSet plus the explicit one.
    CHECK(d.at("count/replicasets.apps") == Q("2"));
    CHECK(d.at("replicationcontrollers") == Q("1"));
    CHECK(d.at("count/replicationcontrollers") == Q("1"));
  }

  TEST_CASE("StatefulSet: pods and one claim per replica per template") {
    Json pod = PodSpec(Json::array({Container("c", nullptr, {{"nvidia.com/gpu", "1"}})}));
    Json claim{{"metadata", {{"name", "data"}}},
               {"spec",
                {{"accessModes", {"ReadWriteOnce"}},
                 {"storageClassName", "fast"},
                 {"resources", {{"requests", {{"storage", "10Gi"}}}}}}}};
    ResourceList d = QuotaDemandOf({WorkloadObject(
        "apps/v1", "StatefulSet", "w",
        {{"replicas", 4}, {"template", Template(pod)}, {"volumeClaimTemplates", {claim}}})});
    CHECK(d.at("pods") == Q("4"));
    CHECK(d.at("requests.nvidia.com/gpu") == Q("4"));
    CHECK(d.at("persistentvolumeclaims") == Q("4"));
    CHECK(d.at("requests.storage") == Q("40Gi"));
    CHECK(d.at("fast.storageclass.storage.k8s.io/requests.storage") == Q("40Gi"));
    CHECK(d.at("fast.storageclass.storage.k8s.io/persistentvolumeclaims") == Q("4"));
    CHECK(d.at("count/statefulsets.apps") == Q("1"));
  }

  TEST_CASE("Jobs run min(parallelism, completions), CronJobs one run, suspended ones none") {
    Json pod = PodSpec(Json::array({Container("c", {{"cpu", "1"}})}));
    auto job = [&](const Json& extra) {
      Json spec{{"template", Template(pod)}};
      spec.update(extra);
      return WorkloadObject("batch/v1", "Job", "j", spec);
    };
    CHECK(QuotaDemandOf({job(Json::object())}).at("requests.cpu") == Q("1"));
    CHECK(QuotaDemandOf({job({{"parallelism", 5}})}).at("requests.cpu") == Q("5"));
    CHECK(QuotaDemandOf({job({{"parallelism", 5}, {"completions", 2}})}).at("pods") == Q("2"));
    CHECK(QuotaDemandOf({job({{"parallelism", 2}, {"completions", 8}})}).at("pods") == Q("2"));
    CHECK(QuotaDemandOf({job({{"parallelism", 0}})}).count("pods") == 0);

    Json cron = WorkloadObject(
        "batch/v1beta1", "CronJob", "c",
        {{"schedule", "*/5 * * * *"},
         {"jobTemplate", {{"spec", {{"parallelism", 3}, {"template", Template(pod)}}}}}});
    ResourceList d = QuotaDemandOf({cron});
    CHECK(d.at("pods") == Q("3"));
    CHECK(d.at("requests.cpu") == Q("3"));
    CHECK(d.at("count/cronjobs.batch") == Q("1"));
    CHECK(d.at("count/jobs.batch") == Q("1"));
    cron["spec"]["suspend"] = true;
    ResourceList s = QuotaDemandOf({cron});
    CHECK(s.count("pods") == 0);
    CHECK(s.count("count/jobs.batch") == 0);
    CHECK(s.at("count/cronjobs.batch") == Q("1"));
  }

  TEST_CASE("services count node ports and load balancers") {
    auto svc = [](const std::string& type, int ports) {
      Json p = Json::array();
      for (int i = 0; i < ports; ++i) p.push_back({{"port", 8000 + i}, {"protocol", "TCP"}});
      Json spec{{"ports", p}};
      if (!type.empty()) spec["type"] = type;
      return WorkloadObject("v1", "Service", "s" + type, spec);
    };
    ResourceList d = QuotaDemandOf({svc("", 1), svc("NodePort", 2), svc("LoadBalancer", 3)});
    CHECK(d.at("services") == Q("3"));
    CHECK(d.at("count/services") == Q("3"));
    CHECK(d.at("services.nodeports") == Q("5"));
    CHECK(d.at("services.loadbalancers") == Q("1"));
    // A ClusterIP service alone has no zero-valued node port entries (admission ignores zeros).
    ResourceList c = QuotaDemandOf({svc("ClusterIP", 2)});
    CHECK(c.count("services.nodeports") == 0);
  }

  TEST_CASE("claims: storage rounded up to whole bytes, class from annotation/spec/default") {
    auto pvc = [](const Json& spec, const Json& annotations = nullptr) {
      Json o = WorkloadObject("v1", "PersistentVolumeClaim", "c", spec);
      if (!annotations.is_null()) o["metadata"]["annotations"] = annotations;
      return o;
    };
    Json base{{"resources", {{"requests", {{"storage", "1.5"}}}}}};
    ResourceList d = QuotaDemandOf({pvc(base)});
    CHECK(d.at("requests.storage") == Q("2"));  // 1.5 bytes count as 2
    CHECK(d.at("persistentvolumeclaims") == Q("1"));
    CHECK(d.size() == 3);  // + count/persistentvolumeclaims; no class

    DemandContext ctx;
    ctx.default_storage_class = "standard";
    ResourceList dc = QuotaDemandOf({pvc(base)}, ctx);
    CHECK(dc.at("standard.storageclass.storage.k8s.io/requests.storage") == Q("2"));
    // An explicit empty class means "no class": the default is not applied.
    Json none = base;
    none["storageClassName"] = "";
    CHECK(QuotaDemandOf({pvc(none)}, ctx).size() == 3);
    // The beta annotation wins over spec.storageClassName.
    Json gold = base;
    gold["storageClassName"] = "silver";
    ResourceList da =
        QuotaDemandOf({pvc(gold, {{"volume.beta.kubernetes.io/storage-class", "gold"}})}, ctx);
    CHECK(da.count("gold.storageclass.storage.k8s.io/persistentvolumeclaims") == 1);
    CHECK(da.count("silver.storageclass.storage.k8s.io/persistentvolumeclaims") == 0);
  }

  TEST_CASE("LimitRange defaults fill in what containers leave out, after limits->requests") {
    Json lr{{"apiVersion", "v1"},
            {"kind", "LimitRange"},
            {"metadata", {{"name", "d"}}},
            {"spec",
             {{"limits",
               {{{"type", "Container"},
                 {"default", {{"cpu", "1"}, {"memory", "1Gi"}}},
                 {"defaultRequest", {{"cpu", "250m"}}}}}}}}};
    DemandContext ctx;
    ctx.limit_ranges = {lr};
    Json spec = PodSpec(
        Json::array({Container("empty", nullptr), Container("limited", nullptr, {{"cpu", "2"}})}));
    ResourceList d = QuotaDemandOf({Pod("p", spec)}, ctx);
    // empty: request 250m (defaultRequest), limit 1; memory request defaults to the default
    // limit (SetDefaults_LimitRangeItem), limit 1Gi.
    // limited: request 2 (from its own limit), memory defaults as above.
    CHECK(d.at("requests.cpu") == Q("2250m"));
    CHECK(d.at("limits.cpu") == Q("3"));
    CHECK(d.at("requests.memory") == Q("2Gi"));
    CHECK(d.at("limits.memory") == Q("2Gi"));
  }

  TEST_CASE("terminated pods and DaemonSets add no compute") {
    Json done = Pod("p", PodSpec(Json::array({Container("c", {{"cpu", "1"}})})));
    done["status"]["phase"] = "Succeeded";
    ResourceList d = QuotaDemandOf({done});
    CHECK(d.at("count/pods") == Q("1"));
    CHECK(d.count("pods") == 0);
    CHECK(d.count("requests.cpu") == 0);
    Json ds = WorkloadObject(
        "apps/v1", "DaemonSet", "d",
        {{"template", Template(PodSpec(Json::array({Container("c", {{"cpu", "1"}})})))}});
    ResourceList dd = QuotaDemandOf({ds});
    CHECK(dd.count("pods") == 0);
    CHECK(dd.at("count/daemonsets.apps") == Q("1"));
  }

  TEST_CASE("PodDemandOf takes a template, a PodSpec or a Pod") {
    Json spec = PodSpec(Json::array({Container("c", {{"cpu", "1"}}, {{"nvidia.com/gpu", "1"}})}));
    for (const Json& t : {Template(spec), spec, Pod("p", spec)}) {
      ResourceList d = PodDemandOf(t, 4);
      CHECK(d.at("pods") == Q("4"));
      CHECK(d.at("requests.cpu") == Q("4"));
      CHECK(d.at("requests.nvidia.com/gpu") == Q("4"));
      CHECK(d.count("count/replicasets.apps") == 0);
    }
    CHECK(PodDemandOf(spec, 0).empty());
    CHECK_THROWS_AS(PodDemandOf(spec, -1), ValidationError);
  }

  TEST_CASE("malformed objects fail with the field named") {
    Json bad =
        WorkloadObject("apps/v1", "Deployment", "web",
                       {{"replicas", "three"}, {"template", Template(PodSpec(Json::array()))}});
    auto e = CatchValidation([&] { QuotaDemandOf({bad}); });
    CHECK(e.field() == "objects[0](Deployment/web).spec.replicas");
    Json bad_q = Pod("p", PodSpec(Json::array({Container("c", {{"cpu", "lots"}})})));
    auto e2 = CatchValidation([&] { QuotaDemandOf({bad_q}); });
    CHECK(e2.field() == "spec.containers[0].resources.requests[cpu]");
    CHECK(e2.value() == "lots");
  }

  TEST_CASE("EvaluateQuota: fits, and shortfalls with requested/used/hard/remaining") {
    Json pod = PodSpec(
        Json::array({Container("w", {{"cpu", "2"}, {"memory", "4Gi"}},
                               {{"cpu", "2"}, {"memory", "4Gi"}, {"nvidia.com/gpu", "2"}})}));
    std::vector<Json> objects{WorkloadObject("apps/v1", "StatefulSet", "w",
                                             {{"replicas", 4}, {"template", Template(pod)}})};
    Json hard{{"requests.cpu", "16"}, {"requests.nvidia.com/gpu", "8"}, {"pods", "10"}};
    // Empty namespace: 8 cpu, 8 GPUs, 4 pods fit exactly (used + requested == hard is allowed).
    FitResult ok = EvaluateQuota(
        objects,
        {QuotaObject("team-a", hard,
                     {{"requests.cpu", "8"}, {"requests.nvidia.com/gpu", "0"}, {"pods", "6"}})});
    CHECK(ok.fits);
    CHECK(ok.shortfalls.empty());
    CHECK(ok.Message().empty());

    FitResult no = EvaluateQuota(
        objects,
        {QuotaObject("team-a", hard,
                     {{"requests.cpu", "9"}, {"requests.nvidia.com/gpu", "4"}, {"pods", "0"}})});
    CHECK_FALSE(no.fits);
    REQUIRE(no.shortfalls.size() == 2);
    const Shortfall& gpu = no.shortfalls[1];
    CHECK(no.shortfalls[0].resource == "requests.cpu");
    CHECK(gpu.resource == "requests.nvidia.com/gpu");
    CHECK(gpu.quota == "team-a");
    CHECK(gpu.requested == Q("8"));
    CHECK(gpu.used == Q("4"));
    CHECK(gpu.hard == Q("8"));
    CHECK(gpu.remaining == Q("4"));
    CHECK(no.Message() ==
          "requests.cpu: requested 8, remaining 7 (hard 16, used 9) in quota team-a\n"
          "requests.nvidia.com/gpu: requested 8, remaining 4 (hard 8, used 4) in quota team-a");
  }

  TEST_CASE("EvaluateQuota: no quota fits, keys outside hard are ignored, over-committed") {
    Json pod = PodSpec(Json::array({Container("w", {{"cpu", "1"}}, {{"cpu", "1"}})}));
    std::vector<Json> objects{Pod("p", pod)};
    CHECK(EvaluateQuota(objects, {}).fits);
    CHECK(EvaluateQuota(objects, {QuotaObject("q", {{"requests.nvidia.com/gpu", "1"}},
                                              {{"requests.nvidia.com/gpu", "1"}})})
              .fits);
    // Used above hard (the quota was lowered): remaining is negative.
    FitResult r =
        EvaluateQuota(objects, {QuotaObject("q", {{"limits.cpu", "2"}}, {{"limits.cpu", "3"}})});
    REQUIRE(r.shortfalls.size() == 1);
    CHECK(r.shortfalls[0].remaining == Q("-1"));
    // A quota without status yet: spec.hard is what will be enforced; used counts as zero.
    Json fresh = QuotaObject("q", {{"limits.cpu", "500m"}});
    FitResult f = EvaluateQuota(objects, {fresh});
    REQUIRE(f.shortfalls.size() == 1);
    CHECK(f.shortfalls[0].used == Q("0"));
  }

  TEST_CASE("EvaluateQuota checks every quota and names each") {
    Json pod = PodSpec(Json::array(
        {Container("w", {{"cpu", "1"}, {"memory", "1Gi"}}, {{"cpu", "1"}, {"memory", "1Gi"}})}));
    std::vector<Json> objects{WorkloadObject("apps/v1", "Deployment", "d",
                                             {{"replicas", 3}, {"template", Template(pod)}})};
    FitResult r = EvaluateQuota(
        objects, {QuotaObject("compute", {{"requests.cpu", "10"}}, {{"requests.cpu", "0"}}),
                  QuotaObject("objects", {{"pods", "2"}, {"count/deployments.apps", "1"}},
                              {{"pods", "0"}, {"count/deployments.apps", "1"}})});
    CHECK_FALSE(r.fits);
    REQUIRE(r.shortfalls.size() == 2);
    CHECK(r.shortfalls[0].quota == "objects");
    CHECK(r.shortfalls[0].resource == "count/deployments.apps");
    CHECK(r.shortfalls[1].resource == "pods");
    CHECK(r.shortfalls[1].requested == Q("3"));
  }

  TEST_CASE("EvaluateQuota honours scopes") {
    Json best_effort = PodSpec(Json::array({Container("c", nullptr)}));
    Json burstable = PodSpec(Json::array({Container("c", {{"cpu", "1"}})}));
    Json job_pod = burstable;
    job_pod["activeDeadlineSeconds"] = 600;
    Json high = burstable;
    high["priorityClassName"] = "high";
    Json be_quota =
        QuotaObject("be", {{"pods", "1"}}, {{"pods", "1"}}, {{"scopes", {"BestEffort"}}});
    // The BestEffort quota is full, but only best-effort pods count against it.
    CHECK(EvaluateQuota({Pod("a", burstable)}, {be_quota}).fits);
    CHECK_FALSE(EvaluateQuota({Pod("a", best_effort)}, {be_quota}).fits);
    // Scoped quotas never match non-pod objects.
    Json svc = WorkloadObject("v1", "Service", "s", {{"ports", {{{"port", 80}}}}});
    Json scoped_svc = QuotaObject("s", {{"services", "0"}}, {{"services", "0"}},
                                  {{"scopes", {"NotTerminating"}}});
    CHECK(EvaluateQuota({svc}, {scoped_svc}).fits);

    Json terminating =
        QuotaObject("t", {{"pods", "0"}}, {{"pods", "0"}}, {{"scopes", {"Terminating"}}});
    CHECK(EvaluateQuota({Pod("a", burstable)}, {terminating}).fits);
    CHECK_FALSE(EvaluateQuota({Pod("a", job_pod)}, {terminating}).fits);

    Json by_class = QuotaObject(
        "pc", {{"pods", "0"}}, {{"pods", "0"}},
        {{"scopeSelector",
          {{"matchExpressions",
            {{{"scopeName", "PriorityClass"}, {"operator", "In"}, {"values", {"high"}}}}}}}});
    CHECK(EvaluateQuota({Pod("a", burstable)}, {by_class}).fits);
    CHECK_FALSE(EvaluateQuota({Pod("a", high)}, {by_class}).fits);
  }

  TEST_CASE("EvaluateQuota reports pods the server would refuse with 'must specify'") {
    Json pod = PodSpec(Json::array({Container("main", {{"cpu", "1"}}),
                                    Container("sidecar", {{"cpu", "100m"}}, {{"cpu", "100m"}})}));
    Json q = QuotaObject("team-a", {{"limits.cpu", "10"}, {"requests.cpu", "10"}},
                         {{"limits.cpu", "0"}, {"requests.cpu", "0"}});
    FitResult r = EvaluateQuota({Pod("p", pod)}, {q});
    CHECK_FALSE(r.fits);
    CHECK(r.shortfalls.empty());
    REQUIRE(r.problems.size() == 1);
    CHECK(r.problems[0].find("Pod/p") == 0);
    CHECK(r.problems[0].find("must specify limits.cpu") != std::string::npos);
    CHECK(r.problems[0].find("\"main\"") != std::string::npos);
    CHECK(r.problems[0].find("sidecar") == std::string::npos);
    // A LimitRange default limit fixes it, as on the server.
    Json lr{{"spec", {{"limits", {{{"type", "Container"}, {"default", {{"cpu", "1"}}}}}}}}};
    DemandContext ctx;
    ctx.limit_ranges = {lr};
    CHECK(EvaluateQuota({Pod("p", pod)}, {q}, ctx).fits);
  }

  TEST_CASE("FitResult::Merge") {
    FitResult a;
    FitResult b;
    b.fits = false;
    b.problems.push_back("x");
    a.Merge(b);
    CHECK_FALSE(a.fits);
    CHECK(a.Message() == "x");
  }

  TEST_CASE("RenderQuota: golden JSON") {
    QuotaSpec spec;
    spec.name = "team-a";
    spec.labels = {{"team", "vision"}};
    spec.annotations = {{"example.com/owner", "Alice <alice@example.com>"}};
    spec.hard = {{"requests.cpu", "32"},
                 {"limits.cpu", "64"},
                 {"requests.memory", "128Gi"},
                 {"limits.memory", "256Gi"},
                 {"requests.nvidia.com/gpu", "4"},
                 {"requests.storage", "1Ti"},
                 {"pods", "50"},
                 {"persistentvolumeclaims", "10"},
                 {"services", "20"}};
    spec.limit_range = LimitRangeSpec{
        {{"cpu", "0.5"}, {"memory", "1Gi"}}, {{"cpu", "1"}, {"memory", "2048Mi"}}, {}, {}};
    const Json expected = Json::parse(R"([
      {"apiVersion": "v1", "kind": "Namespace",
       "metadata": {"name": "team-a",
                    "labels": {"team": "vision", "app.kubernetes.io/managed-by": "tfk8s",
                               "tfk8s.io/queue": "true"},
                    "annotations": {"example.com/owner": "Alice <alice@example.com>"}}},
      {"apiVersion": "v1", "kind": "ResourceQuota",
       "metadata": {"name": "team-a", "namespace": "team-a",
                    "labels": {"app.kubernetes.io/managed-by": "tfk8s", "tfk8s.io/queue": "team-a"}},
       "spec": {"hard": {"requests.cpu": "32", "limits.cpu": "64", "requests.memory": "128Gi",
                         "limits.memory": "256Gi", "requests.nvidia.com/gpu": "4",
                         "requests.storage": "1Ti", "pods": "50",
                         "persistentvolumeclaims": "10", "services": "20"}}},
      {"apiVersion": "v1", "kind": "LimitRange",
       "metadata": {"name": "team-a", "namespace": "team-a",
                    "labels": {"app.kubernetes.io/managed-by": "tfk8s", "tfk8s.io/queue": "team-a"}},
       "spec": {"limits": [{"type": "Container",
                            "default": {"cpu": "1", "memory": "2Gi"},
                            "defaultRequest": {"cpu": "500m", "memory": "1Gi"}}]}}
    ])");
    const std::vector<Json> objects = RenderQuota(spec);
    REQUIRE(objects.size() == 3);
    for (std::size_t i = 0; i < objects.size(); ++i) {
      INFO(objects[i].dump(2));
      CHECK(objects[i] == expected[i]);
    }
    // Without a LimitRange and without hard limits only the namespace is rendered.
    QuotaSpec bare;
    bare.name = "team-b";
    CHECK(RenderQuota(bare).size() == 1);
  }

  TEST_CASE(
      "RenderQuota with members: a personal namespace each, team labels, the team's quota "
      "readers") {
    QuotaSpec spec;
    spec.name = "vision";
    spec.hard = {{"pods", "10"}};
    spec.limit_range = LimitRangeSpec{{{"cpu", "500m"}}, {}, {}, {}};
    spec.members = {"alice", "bob"};
    const std::vector<Json> objects = RenderQuota(spec);
    // Per namespace: Namespace, ResourceQuota, LimitRange, Role, RoleBinding.
    REQUIRE(objects.size() == 15);
    const std::vector<std::string> namespaces = {"vision", "vision-alice", "vision-bob"};
    const std::vector<std::string> owners = {"", "alice", "bob"};
    for (std::size_t n = 0; n < 3; ++n) {
      CAPTURE(namespaces[n]);
      const Json& ns = objects[n * 5];
      REQUIRE(ns["kind"] == "Namespace");
      CHECK(ns["metadata"]["name"] == namespaces[n]);
      const Json& labels = ns["metadata"]["labels"];
      CHECK(labels["tfk8s.io/team"] == "vision");
      CHECK(labels["app.kubernetes.io/managed-by"] == "tfk8s");
      if (owners[n].empty()) {
        CHECK_FALSE(labels.contains("tfk8s.io/owner"));  // the team's namespace is shared
        CHECK_FALSE(labels.contains("pod-security.kubernetes.io/enforce"));
      } else {
        CHECK(labels["tfk8s.io/owner"] == owners[n]);
        CHECK(labels["pod-security.kubernetes.io/enforce"] == "baseline");
      }
      const Json& quota = objects[n * 5 + 1];
      CHECK(quota["kind"] == "ResourceQuota");
      CHECK(quota["metadata"]["namespace"] == namespaces[n]);
      CHECK(quota["metadata"]["name"] == "vision");
      CHECK(quota["spec"]["hard"] == Json{{"pods", "10"}});
      CHECK(quota["metadata"]["annotations"]["tfk8s.io/team-namespaces"] ==
            "vision,vision-alice,vision-bob");
      CHECK(objects[n * 5 + 2]["kind"] == "LimitRange");
      const Json& role = objects[n * 5 + 3];
      CHECK(role["kind"] == "Role");
      CHECK(role["metadata"]["name"] == "tfk8s-team-quota-reader");
      CHECK(role["rules"] == Json::parse(
                                 R"([{"apiGroups": [""], "resources": ["resourcequotas"],
                                      "verbs": ["get"]}])"));
      const Json& binding = objects[n * 5 + 4];
      CHECK(binding["kind"] == "RoleBinding");
      REQUIRE(binding["subjects"].size() == 3);
      CHECK(binding["subjects"][2]["name"] == "system:serviceaccounts:vision-bob");
    }
    // The spec's labels reach every namespace, and may choose another Pod Security level.
    spec.labels = {{"pod-security.kubernetes.io/enforce", "restricted"}};
    CHECK(RenderQuota(spec)[5]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] ==
          "restricted");
    // JSON round trip.
    CHECK(QuotaSpec::FromJson(spec.ToJson()).members == spec.members);
    CHECK_FALSE(QuotaSpec{"x", {}, {}, {}, {}, {}}.ToJson().contains("members"));
    CHECK(CatchValidation([] {
            QuotaSpec::FromJson({{"name", "x"}, {"members", "alice"}});
          }).field() == "members");
    CHECK(CatchValidation([] {
            QuotaSpec::FromJson({{"name", "x"}, {"members", Json::array({"alice", 3})}});
          }).field() == "members[1]");
  }

  TEST_CASE("QuotaSpecOf reads back what RenderQuota wrote, without what tfk8s and servers add") {
    QuotaSpec spec;
    spec.name = "vision";
    spec.labels = {{"team-lead", "dana"}, {"pod-security.kubernetes.io/enforce", "restricted"}};
    spec.annotations = {{"note", "gpu queue"}};
    spec.hard = {{"requests.cpu", "32"}, {"requests.memory", "64Gi"}, {"pods", "10"}};
    spec.limit_range = LimitRangeSpec{{{"cpu", "500m"}}, {{"memory", "2Gi"}}, {}, {}};
    spec.members = {"alice", "bob"};
    const std::vector<Json> objects = RenderQuota(spec);
    Json ns = objects[0];
    // What a v1.21+ server and kubectl add to a Namespace.
    ns["metadata"]["labels"]["kubernetes.io/metadata.name"] = "vision";
    ns["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}";
    REQUIRE(objects[1]["kind"] == "ResourceQuota");
    REQUIRE(objects[2]["kind"] == "LimitRange");
    const QuotaSpec back = QuotaSpecOf(ns, objects[1], objects[2]);
    CHECK(back.ToJson() == spec.ToJson());
    CHECK(RenderQuota(back) == objects);
    // A queue with only a LimitRange, or only a quota.
    const QuotaSpec no_quota = QuotaSpecOf(ns, nullptr, objects[2]);
    CHECK(no_quota.hard.empty());
    CHECK(no_quota.members.empty());  // recorded only on the quota
    REQUIRE(no_quota.limit_range);
    CHECK(no_quota.limit_range->default_requests == spec.limit_range->default_requests);
    CHECK_FALSE(QuotaSpecOf(ns, objects[1], nullptr).limit_range);
    // Shapes that are not a server's.
    Json bad = objects[1];
    bad["spec"]["hard"]["pods"] = 10;
    CHECK_THROWS_AS(QuotaSpecOf(ns, bad, nullptr), DecodeError);
    CHECK_THROWS_AS(QuotaSpecOf(Json::object(), nullptr, nullptr), DecodeError);
  }

  TEST_CASE("GetQuotaSpec keeps a member only when its namespace is the one apply made for it") {
    tfk8s::testing::FakeCluster fake;
    QuotaSpec spec;
    spec.name = "vision";
    spec.labels = {{"team-lead", "dana"}};
    spec.hard = {{"pods", "10"}};
    spec.members = {"alice", "bob"};
    for (const Json& o : RenderQuota(spec)) fake.Add(o);
    Client client = fake.client("vision");
    CHECK(GetQuotaSpec(client, "vision").ToJson() == spec.ToJson());
    // The annotation edited by hand to name a member whose namespace tfk8s did not make (or
    // that does not exist): not a member, so applying the result creates nothing for it.
    Json quota = fake.Find("v1", "ResourceQuota", "vision", "vision").value();
    quota["metadata"]["annotations"]["tfk8s.io/team-namespaces"] =
        "vision,vision-alice,vision-bob,vision-mallory,vision-eve";
    fake.Add(quota);
    fake.Add(
        {{"apiVersion", "v1"},
         {"kind", "Namespace"},
         {"metadata", {{"name", "vision-mallory"}, {"labels", {{"tfk8s.io/team", "vision"}}}}}});
    CHECK(GetQuotaSpec(client, "vision").members == std::vector<std::string>{"alice", "bob"});
    CHECK_THROWS_AS(GetQuotaSpec(client, "nlp"), NotFound);
  }

  TEST_CASE("ValidateQuotaSpec: members") {
    QuotaSpec spec;
    spec.name = "vision";
    spec.members = {"alice", "Bob"};
    CHECK(CatchValidation([&] { ValidateQuotaSpec(spec); }).field() == "members[1]");
    spec.members = {"alice", "alice"};
    auto twice = CatchValidation([&] { ValidateQuotaSpec(spec); });
    CHECK(twice.field() == "members[1]");
    CHECK(std::string(twice.what()).find("listed twice") != std::string::npos);
    spec.members = {std::string(60, 'a')};
    CHECK(std::string(CatchValidation([&] { ValidateQuotaSpec(spec); }).what())
              .find("longer than 63") != std::string::npos);
    spec.members = {"alice"};
    spec.labels = {{"tfk8s.io/owner", "alice"}};
    auto owner = CatchValidation([&] { ValidateQuotaSpec(spec); });
    CHECK(owner.field() == "labels[tfk8s.io/owner]");
    CHECK(std::string(owner.what()).find("vision-<member>") != std::string::npos);
    spec.labels = {{"tfk8s.io/team", "vision"}};
    CHECK(CatchValidation([&] { ValidateQuotaSpec(spec); }).field() == "labels[tfk8s.io/team]");
    // A single-user team without members: its namespace may be labelled personal to the user.
    spec.members.clear();
    spec.labels = {{"tfk8s.io/owner", "alice"}};
    CHECK_NOTHROW(ValidateQuotaSpec(spec));
    CHECK(RenderQuota(spec)[0]["metadata"]["labels"]["tfk8s.io/owner"] == "alice");
  }

  TEST_CASE("ValidateQuotaSpec names the field and value") {
    QuotaSpec spec;
    spec.name = "team-a";
    spec.hard = {{"limits.nvidia.com/gpu", "4"}};
    auto gpu = CatchValidation([&] { ValidateQuotaSpec(spec); });
    CHECK(gpu.field() == "hard[limits.nvidia.com/gpu]");
    CHECK(gpu.value() == "4");
    CHECK(std::string(gpu.what()).find("requests.nvidia.com/gpu") != std::string::npos);
    CHECK(std::string(gpu.what()).find("can only be limited through") != std::string::npos);

    spec.hard = {{"nvidia.com/gpu", "4"}};
    CHECK(std::string(CatchValidation([&] { ValidateQuotaSpec(spec); }).what())
              .find("requests.nvidia.com/gpu") != std::string::npos);

    spec.hard = {{"requests.cpu", "lots"}};
    auto bad = CatchValidation([&] { ValidateQuotaSpec(spec); });
    CHECK(bad.field() == "hard[requests.cpu]");
    CHECK(bad.value() == "lots");

    spec.hard = {{"requests.gpu", "1"}};
    CHECK(CatchValidation([&] { ValidateQuotaSpec(spec); }).field() == "hard[requests.gpu]");
    spec.hard = {{"pods", "2.5"}};
    CHECK(std::string(CatchValidation([&] { ValidateQuotaSpec(spec); }).what())
              .find("must be an integer") != std::string::npos);
    spec.hard = {{"requests.nvidia.com/gpu", "500m"}};
    CHECK_THROWS_AS(ValidateQuotaSpec(spec), ValidationError);
    spec.hard = {{"requests.memory", "-1Gi"}};
    CHECK(CatchValidation([&] { ValidateQuotaSpec(spec); }).value() == "-1Gi");

    // Every key the issue lists, plus the other forms Kubernetes accepts.
    spec.hard = {{"limits.cpu", "1"},
                 {"limits.memory", "1Gi"},
                 {"requests.cpu", "1"},
                 {"requests.memory", "1Gi"},
                 {"requests.nvidia.com/gpu", "2"},
                 {"requests.storage", "1Ti"},
                 {"pods", "10"},
                 {"persistentvolumeclaims", "3"},
                 {"services", "4"},
                 {"cpu", "1"},
                 {"count/deployments.apps", "2"},
                 {"count/jobs.batch", "2"},
                 {"gold.storageclass.storage.k8s.io/requests.storage", "10Gi"},
                 {"requests.hugepages-2Mi", "4Mi"},
                 {"services.nodeports", "2"}};
    CHECK_NOTHROW(ValidateQuotaSpec(spec));

    spec.name = "Team_A";
    CHECK(CatchValidation([&] { ValidateQuotaSpec(spec); }).field() == "name");
    spec.name = "team-a";
    spec.labels = {{"tfk8s.io/queue", "x"}};
    CHECK(CatchValidation([&] { ValidateQuotaSpec(spec); }).field() == "labels[tfk8s.io/queue]");
    spec.labels = {{"team", "bad value!"}};
    CHECK(CatchValidation([&] { ValidateQuotaSpec(spec); }).value() == "bad value!");
    spec.labels.clear();

    spec.limit_range = LimitRangeSpec{{{"cpu", "2"}}, {{"cpu", "1"}}, {}, {}};
    auto lr = CatchValidation([&] { ValidateQuotaSpec(spec); });
    CHECK(lr.field() == "limit_range.default_requests[cpu]");
    CHECK(std::string(lr.what()).find("default_limits[cpu]") != std::string::npos);
    spec.limit_range = LimitRangeSpec{{{"gpu", "1"}}, {}, {}, {}};
    CHECK(CatchValidation([&] { ValidateQuotaSpec(spec); }).field() ==
          "limit_range.default_requests[gpu]");
    spec.limit_range = LimitRangeSpec{};
    CHECK(CatchValidation([&] { ValidateQuotaSpec(spec); }).field() == "limit_range");
    // RenderQuota validates too.
    CHECK_THROWS_AS(RenderQuota(spec), ValidationError);
  }

  TEST_CASE("OverCommitted: limits = requests × ratio, exactly") {
    QuotaSpec spec;
    spec.name = "team-a";
    spec.hard = {{"requests.cpu", "8"}, {"requests.memory", "64Gi"}, {"limits.cpu", "1"}};
    spec.limit_range = LimitRangeSpec{{{"cpu", "250m"}, {"memory", "1Gi"}}, {}, {}, {}};
    QuotaSpec over = OverCommitted(spec, 1.5);
    CHECK(over.hard.at("limits.cpu") == "12");
    CHECK(over.hard.at("limits.memory") == "96Gi");
    CHECK(over.hard.at("requests.cpu") == "8");
    CHECK(over.limit_range->default_limits.at("cpu") == "375m");
    CHECK(over.limit_range->default_limits.at("memory") == "1536Mi");
    CHECK(OverCommitted(spec, 1.0).hard.at("limits.memory") == "64Gi");
    CHECK(OverCommitted(spec, 2.125).hard.at("limits.cpu") == "17");
    CHECK_NOTHROW(ValidateQuotaSpec(over));
    CHECK(CatchValidation([&] { OverCommitted(spec, 0.5); }).field() == "ratio");
    CHECK_THROWS_AS(OverCommitted(spec, 1.0001), ValidationError);
  }

  TEST_CASE("UsageOf: hard, used, remaining as kubectl describe shows them") {
    Json q = QuotaObject("team-a", {{"requests.cpu", "4"}, {"requests.memory", "8Gi"}},
                         {{"requests.cpu", "1500m"}, {"requests.memory", "9Gi"}});
    q["spec"]["hard"]["pods"] = "10";  // not yet in status
    QuotaUsage u = UsageOf(q);
    CHECK(u.ns == "team-a");
    CHECK(u.name == "team-a");
    CHECK_FALSE(u.ready);
    REQUIRE(u.resources.size() == 3);
    CHECK(u.resources[0].resource == "pods");
    CHECK(u.resources[0].used.IsZero());
    auto cpu = u.Find("requests.cpu");
    REQUIRE(cpu.has_value());
    CHECK(cpu->remaining.ToString() == "2500m");
    CHECK(cpu->Fraction() == doctest::Approx(0.375));
    CHECK(u.Find("requests.memory")->remaining.ToString() == "-1Gi");
    CHECK_FALSE(u.Find("limits.cpu").has_value());
    q["status"]["hard"]["pods"] = "10";
    q["status"]["used"]["pods"] = "2";
    CHECK(UsageOf(q).ready);

    auto rows = UsageRows({UsageOf(q)});
    REQUIRE(rows.size() == 4);
    CHECK(rows[0] == std::vector<std::string>{"NAMESPACE", "QUOTA", "RESOURCE", "USED", "HARD",
                                              "REMAINING", "USE%"});
    // Amounts in Kubernetes' notation, as kubectl describe quota prints them.
    CHECK(rows[1] == std::vector<std::string>{"team-a", "team-a", "pods", "2", "10", "8", "20%"});
    CHECK(rows[2] == std::vector<std::string>{"team-a", "team-a", "requests.cpu", "1500m", "4",
                                              "2500m", "38%"});
    CHECK(rows[3] == std::vector<std::string>{"team-a", "team-a", "requests.memory", "9Gi", "8Gi",
                                              "-1Gi", "113%"});
    const std::string table = FormatUsageTable({UsageOf(q)});
    CHECK(table ==
          "NAMESPACE  QUOTA   RESOURCE         USED   HARD  REMAINING  USE%\n"
          "team-a     team-a  pods             2      10    8          20%\n"
          "team-a     team-a  requests.cpu     1500m  4     2500m      38%\n"
          "team-a     team-a  requests.memory  9Gi    8Gi   -1Gi       113%\n");
  }

  TEST_CASE("quota-exceeded messages: more cases") {
    // Several resources at once, as prettyPrint joins them.
    CHECK(ParseQuotaExceededResources(
              "pods \"p\" is forbidden: exceeded quota: team-a, requested: "
              "limits.cpu=2,requests.nvidia.com/gpu=8, used: limits.cpu=0,"
              "requests.nvidia.com/gpu=0, limited: limits.cpu=1,requests.nvidia.com/gpu=4") ==
          std::vector<std::string>{"limits.cpu", "requests.nvidia.com/gpu"});
    // Per-storage-class keys contain a slash and dots.
    CHECK(ParseQuotaExceededResources(
              "persistentvolumeclaims \"c\" is forbidden: exceeded quota: q, requested: "
              "gold.storageclass.storage.k8s.io/requests.storage=10Gi, used: "
              "gold.storageclass.storage.k8s.io/requests.storage=0, limited: "
              "gold.storageclass.storage.k8s.io/requests.storage=5Gi") ==
          std::vector<std::string>{"gold.storageclass.storage.k8s.io/requests.storage"});
    // "failed quota" (must specify) and "status unknown" are not exceeded-quota messages.
    CHECK(ParseQuotaExceededResources("failed quota: q: must specify limits.cpu").empty());
    CHECK(ParseQuotaExceededResources("status unknown for quota: q, resources: pods").empty());
  }

  TEST_CASE("status unknown for quota is recognised and retried briefly") {
    const std::string body =
        R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"p\" is )"
        R"(forbidden: status unknown for quota: team-a, resources: pods","reason":"Forbidden",)"
        R"("code":403})";
    auto error = MakeApiError(403, body, "create pods/p");
    try {
      std::rethrow_exception(error);
    } catch (const Forbidden& e) {
      CHECK(IsQuotaStatusUnknown(e));
      CHECK(e.kind() == ErrorKind::kForbidden);
    }
    CHECK_FALSE(IsQuotaStatusUnknown(std::runtime_error("status unknown for quota")));
    int calls = 0;
    Json out = RetryWhileQuotaUnknown([&] {
      if (++calls < 3) std::rethrow_exception(error);
      return Json{{"ok", true}};
    });
    CHECK(calls == 3);
    CHECK(out["ok"] == true);
    // Other errors pass straight through; a budget that runs out rethrows the last one.
    calls = 0;
    CHECK_THROWS_AS(RetryWhileQuotaUnknown([&]() -> Json {
                      ++calls;
                      ThrowApiError(403,
                                    R"({"kind":"Status","message":"exceeded quota: q, )"
                                    R"(requested: pods=1, used: pods=1, limited: pods=1",)"
                                    R"("reason":"Forbidden","code":403})",
                                    "x");
                    }),
                    QuotaExceeded);
    CHECK(calls == 1);
    CHECK_THROWS_AS(RetryWhileQuotaUnknown([&]() -> Json { std::rethrow_exception(error); },
                                           std::chrono::milliseconds(120)),
                    Forbidden);
  }

  TEST_CASE("CheckQuota reads quotas and limit ranges, and sends no writes") {
    std::atomic<int> writes{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (r.method != "GET") ++writes;
      if (r.url.find("/resourcequotas") != std::string::npos) {
        Json list{{"kind", "ResourceQuotaList"},
                  {"items",
                   {QuotaObject("team-a", {{"requests.nvidia.com/gpu", "4"}},
                                {{"requests.nvidia.com/gpu", "2"}})}}};
        return Respond(200, list.dump());
      }
      return Respond(200, R"({"kind":"LimitRangeList","items":[]})");
    });
    Client client = internal::ClientOver(FakeConfig(), fake);
    Json pod = PodSpec(Json::array({Container("w", nullptr, {{"nvidia.com/gpu", "2"}})}));
    FitResult r = CheckQuotaForPods(client, "team-a", pod, 2);
    CHECK_FALSE(r.fits);
    REQUIRE(r.shortfalls.size() == 1);
    CHECK(r.shortfalls[0].requested == Q("4"));
    CHECK(r.shortfalls[0].remaining == Q("2"));
    CHECK(CheckQuotaForPods(client, "team-a", pod, 1).fits);
    CHECK(CheckQuota(client, "team-a", {Pod("p", pod)}).fits);
    CHECK(writes == 0);
    auto reqs = fake->requests();
    REQUIRE(reqs.size() == 6);
    CHECK(reqs[0].url.find("/api/v1/namespaces/team-a/resourcequotas") != std::string::npos);
    CHECK(reqs[1].url.find("/api/v1/namespaces/team-a/limitranges") != std::string::npos);
    // Bad input fails before any request.
    CHECK_THROWS_AS(CheckQuotaForPods(client, "team-a", pod, -1), ValidationError);
    CHECK(fake->requests().size() == 6);
  }
}

// The JSON form `tfk8s quota apply -f` and the Python layer read.
TEST_CASE("QuotaSpec JSON: round trip, numbers as quantities, fields named in errors") {
  Json j = {{"name", "team-a"},
            {"labels", {{"team", "a"}}},
            {"annotations", Json::object()},
            {"hard", {{"requests.cpu", 8}, {"pods", "10"}}},
            {"limit_range",
             {{"default_requests", {{"cpu", "500m"}}},
              {"default_limits", Json::object()},
              {"max", Json::object()},
              {"min", Json::object()}}}};
  QuotaSpec spec = QuotaSpec::FromJson(j);
  CHECK(spec.hard.at("requests.cpu") == "8");
  REQUIRE(spec.limit_range.has_value());
  CHECK(spec.limit_range->default_requests.at("cpu") == "500m");
  CHECK(QuotaSpec::FromJson(spec.ToJson()).ToJson() == spec.ToJson());
  CHECK(tfk8s::testing::ValidationMessage([] {
          QuotaSpec::FromJson({{"hard", {{"cpu", true}}}});
        }).find("hard[cpu]") != std::string::npos);
  CHECK(tfk8s::testing::ValidationMessage([] {
          QuotaSpec::FromJson({{"limit_range", {{"max", "x"}}}});
        }).find("limit_range.max") != std::string::npos);
  CHECK_THROWS_AS(QuotaSpec::FromJson(Json::array()), ValidationError);
}
