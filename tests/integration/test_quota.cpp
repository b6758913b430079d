// Team queues against the real apiserver and quota controller: ApplyQuota, usage versus what
// kubectl shows, the server's QuotaExceeded, and pre-flight agreeing with admission both ways.
#include <cstdio>
#include <memory>
#include <set>

#include "cluster.hpp"
#include "tfk8s/quota.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

const ResourceType kResourceQuotas{"", "v1", "ResourceQuota", "resourcequotas", true};
const ResourceType kLimitRanges{"", "v1", "LimitRange", "limitranges", true};
const ResourceType kPvcs{"", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true};
const ResourceType kServices{"", "v1", "Service", "services", true};
const ResourceType kReplicaSets{"apps", "v1", "ReplicaSet", "replicasets", true};

Json PodWith(const std::string& name, const Json& requests, const Json& limits,
             const Json& init_containers = nullptr) {
  Json resources = Json::object();
  if (!requests.is_null()) resources["requests"] = requests;
  if (!limits.is_null()) resources["limits"] = limits;
  Json spec{{"containers", {{{"name", "main"}, {"image", "busybox"}, {"resources", resources}}}},
            {"tolerations",
             {{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}}},
            {"terminationGracePeriodSeconds", 0}};
  if (!init_containers.is_null()) spec["initContainers"] = init_containers;
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", name}}}, {"spec", spec}};
}

Json Claim(const std::string& name, const std::string& storage) {
  return {{"apiVersion", "v1"},
          {"kind", "PersistentVolumeClaim"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"accessModes", {"ReadWriteOnce"}},
            {"resources", {{"requests", {{"storage", storage}}}}}}}};
}

Json NodePortService(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"type", "NodePort"},
            {"selector", {{"app", name}}},
            {"ports", {{{"port", 8888}, {"protocol", "TCP"}}}}}}};
}

// kubectl against the test cluster; "" when kubectl is not installed.
std::string Kubectl(const std::string& args) {
  const std::string cmd = "kubectl --kubeconfig=" + Kubeconfig() + " " + args + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return "";
  std::string out;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
  return out;
}

bool HaveKubectl() { return std::system("kubectl version --client >/dev/null 2>&1") == 0; }

// The "Resource  Used  Hard" rows of `kubectl describe quota`.
std::map<std::string, std::pair<std::string, std::string>> DescribeQuota(const std::string& ns,
                                                                         const std::string& name) {
  std::map<std::string, std::pair<std::string, std::string>> rows;
  std::istringstream in(Kubectl("describe quota -n " + ns + " " + name));
  std::string line;
  bool table = false;
  while (std::getline(in, line)) {
    if (line.rfind("--------", 0) == 0) {
      table = true;
      continue;
    }
    if (!table) continue;
    std::istringstream fields(line);
    std::string resource, used, hard;
    if (fields >> resource >> used >> hard) rows[resource] = {used, hard};
  }
  return rows;
}

QuotaSpec TeamSpec(const std::string& name) {
  QuotaSpec spec;
  spec.name = name;
  spec.labels = {{"team", "vision"}};
  spec.hard = {{"requests.cpu", "4"},
               {"limits.cpu", "8"},
               {"requests.memory", "8Gi"},
               {"limits.memory", "16Gi"},
               {"requests.nvidia.com/gpu", "2"},
               {"requests.storage", "10Gi"},
               {"pods", "5"},
               {"persistentvolumeclaims", "2"},
               {"services", "2"}};
  spec.limit_range = LimitRangeSpec{
      {{"cpu", "500m"}, {"memory", "512Mi"}}, {{"cpu", "1"}, {"memory", "1Gi"}}, {}, {}};
  return spec;
}

std::set<std::string> Names(const std::vector<Shortfall>& shortfalls) {
  std::set<std::string> out;
  for (const auto& s : shortfalls) out.insert(s.resource);
  return out;
}

}  // namespace

TEST_SUITE("quota") {
  TEST_CASE("ApplyQuota makes a labelled queue whose usage is known at once; re-apply converges") {
    Client c = AdminClient();
    TestNamespace ns(c, "queue");
    QuotaSpec spec = TeamSpec(ns.name());
    QuotaUsage usage = ApplyQuota(c, spec);
    CHECK(usage.ready);
    CHECK(usage.ns == ns.name());
    REQUIRE(usage.resources.size() == spec.hard.size());
    for (const auto& r : usage.resources) {
      INFO(r.resource);
      CHECK(r.used.IsZero());
      CHECK(r.hard == Quantity::Parse(spec.hard.at(r.resource)));
      CHECK(r.remaining == r.hard);
    }
    Json namespace_object = c.Get(kNamespaces, "", ns.name());
    CHECK(namespace_object["metadata"]["labels"]["tfk8s.io/queue"] == "true");
    // The namespace existed before (the test made it): tfk8s does not claim it as its own,
    // which would let DeleteQuota(delete_namespace) delete it.
    CHECK_FALSE(namespace_object["metadata"]["labels"].contains("app.kubernetes.io/managed-by"));
    CHECK(namespace_object["metadata"]["labels"]["team"] == "vision");
    Json lr = c.Get(kLimitRanges, ns.name(), ns.name());
    CHECK(lr["spec"]["limits"][0]["defaultRequest"]["cpu"] == "500m");

    // Every queue, with usage, in one call.
    auto queues = ListQueues(c);
    CHECK(std::any_of(queues.begin(), queues.end(),
                      [&](const QuotaUsage& q) { return q.ns == ns.name(); }));

    // Changing the spec converges: new limit, dropped key, LimitRange removed.
    spec.hard["requests.cpu"] = "6";
    spec.hard.erase("services");
    spec.limit_range.reset();
    QuotaUsage changed = ApplyQuota(c, spec);
    CHECK(changed.ready);
    CHECK(changed.Find("requests.cpu")->hard == Quantity::Parse("6"));
    CHECK_FALSE(changed.Find("services").has_value());
    CHECK_THROWS_AS(c.Get(kLimitRanges, ns.name(), ns.name()), NotFound);

    // Validation happens before any request.
    spec.hard["limits.nvidia.com/gpu"] = "2";
    CHECK_THROWS_AS(ApplyQuota(c, spec), ValidationError);
  }

  TEST_CASE(
      "a pod over the GPU quota is rejected as QuotaExceeded naming requests.nvidia.com/gpu") {
    Client c = AdminClient();
    TestNamespace ns(c, "gpuq");
    ApplyQuota(c, TeamSpec(ns.name()));
    Json pod = PodWith("greedy", {{"cpu", "1"}, {"memory", "1Gi"}},
                       {{"cpu", "1"}, {"memory", "1Gi"}, {"nvidia.com/gpu", 3}});
    FitResult preflight = CheckQuota(c, ns.name(), {pod});
    CHECK_FALSE(preflight.fits);
    REQUIRE(preflight.shortfalls.size() == 1);
    CHECK(preflight.Message() ==
          "requests.nvidia.com/gpu: requested 3, remaining 2 (hard 2, used 0) in quota " +
              ns.name());
    try {
      c.Create(kPods, ns.name(), pod);
      FAIL("the apiserver admitted a pod over the GPU quota");
    } catch (const QuotaExceeded& e) {
      CHECK(e.http_code() == 403);
      CHECK(e.resources() == std::vector<std::string>{"requests.nvidia.com/gpu"});
      CHECK(std::string(e.what()).find("exceeded quota: " + ns.name()) != std::string::npos);
    }
  }

  TEST_CASE("usage equals kubectl's view and the demand tfk8s computes for the same objects") {
    Client c = AdminClient();
    TestNamespace ns(c, "usage");
    ApplyQuota(c, TeamSpec(ns.name()));
    std::vector<Json> objects{
        // Limits only (requests default to them), GPUs.
        PodWith("trainer", nullptr, {{"cpu", "1500m"}, {"memory", "3Gi"}, {"nvidia.com/gpu", 1}}),
        // No resources: the LimitRange defaults apply.
        PodWith("defaults", nullptr, nullptr),
        // A big init container dominates the small app container.
        PodWith("init", {{"cpu", "100m"}, {"memory", "64Mi"}},
                {{"cpu", "100m"}, {"memory", "64Mi"}},
                {{{"name", "setup"},
                  {"image", "busybox"},
                  {"resources",
                   {{"requests", {{"cpu", "700m"}, {"memory", "1Gi"}}},
                    {"limits", {{"cpu", "700m"}, {"memory", "1Gi"}}}}}}}),
        Claim("data", "2.5Gi"), NodePortService("notebook")};
    for (const auto& o : objects) {
      const ResourceType type = o["kind"] == "Pod"       ? kPods
                                : o["kind"] == "Service" ? kServices
                                                         : kPvcs;
      c.Create(type, ns.name(), o);
    }
    // Admission wrote the new usage synchronously; the controller agrees once it recomputed.
    QuotaUsage usage;
    CHECK(TestNamespace::WaitFor(
        [&] {
          usage = GetQuotaUsage(c, ns.name()).at(0);
          return usage.ready && usage.Find("pods")->used == Quantity::FromInt(3);
        },
        std::chrono::seconds(20)));

    // The server's bookkeeping equals tfk8s' own arithmetic for the same objects.
    DemandContext ctx;
    ctx.limit_ranges = c.List(kLimitRanges, ns.name())["items"].get<std::vector<Json>>();
    ResourceList demand = QuotaDemandOf(objects, ctx);
    for (const auto& r : usage.resources) {
      INFO(r.resource);
      auto it = demand.find(r.resource);
      CHECK(r.used == (it == demand.end() ? Quantity() : it->second));
    }
    CHECK(usage.Find("requests.cpu")->used.ToString() == "2700m");  // 1.5 + 0.5 + 0.7
    CHECK(usage.Find("limits.memory")->used.ToString() == "5Gi");   // 3 + 1 + 1
    CHECK(usage.Find("requests.storage")->used.ToString() == "2560Mi");
    CHECK(usage.Find("requests.cpu")->remaining.ToString() == "1300m");

    // The same numbers, as text, as kubectl prints them.
    REQUIRE_MESSAGE(HaveKubectl(), "kubectl is not installed (tools/install-deps.sh installs it)");
    Json raw = Json::parse(Kubectl("get quota -n " + ns.name() + " " + ns.name() + " -o json"));
    auto described = DescribeQuota(ns.name(), ns.name());
    REQUIRE(described.size() == usage.resources.size());
    for (const auto& r : usage.resources) {
      INFO(r.resource);
      CHECK(raw["status"]["used"][r.resource] == r.used.ToString());
      CHECK(raw["status"]["hard"][r.resource] == r.hard.ToString());
      CHECK(described[r.resource].first == r.used.ToString());
      CHECK(described[r.resource].second == r.hard.ToString());
    }
    // The table prints the quantities kubectl describe quota prints, row by row.
    const auto rows = UsageRows({usage});
    REQUIRE(rows.size() == usage.resources.size() + 1);
    for (std::size_t i = 1; i < rows.size(); ++i) {
      INFO(rows[i][2]);
      CHECK(rows[i][3] == described[rows[i][2]].first);   // USED
      CHECK(rows[i][4] == described[rows[i][2]].second);  // HARD
    }
    CHECK(FormatUsageTable({usage}).find(" 2700m ") != std::string::npos);  // CPU used
  }

  TEST_CASE("pre-flight agrees with the apiserver in both directions") {
    Client c = AdminClient();
    TestNamespace ns(c, "agree");
    QuotaSpec spec;
    spec.name = ns.name();
    spec.hard = {{"requests.cpu", "2"},
                 {"limits.cpu", "4"},
                 {"pods", "3"},
                 {"requests.nvidia.com/gpu", "1"},
                 {"requests.storage", "5Gi"},
                 {"persistentvolumeclaims", "1"},
                 {"services", "1"}};
    ApplyQuota(c, spec);

    struct Case {
      std::string what;
      Json object;
      ResourceType type;
    };
    const Json init_1cpu = {
        {{"name", "setup"}, {"image", "busybox"}, {"resources", {{"limits", {{"cpu", "1"}}}}}}};
    const std::vector<Case> cases{
        {"fits: 1 cpu of 2", PodWith("a", {{"cpu", "1"}}, {{"cpu", "2"}}), kPods},
        {"too much cpu", PodWith("b", {{"cpu", "1500m"}}, {{"cpu", "1500m"}}), kPods},
        {"no cpu limit: 'must specify'", PodWith("c", {{"cpu", "100m"}}, nullptr), kPods},
        {"fits: init container counts as its max",
         PodWith("d", {{"cpu", "500m"}}, {{"cpu", "500m"}}, init_1cpu), kPods},
        {"quota now full", PodWith("e", {{"cpu", "100m"}}, {{"cpu", "100m"}}), kPods},
        {"GPU fits", PodWith("f", nullptr, {{"nvidia.com/gpu", 1}, {"cpu", "0"}}), kPods},
        {"too much storage", Claim("big", "10Gi"), kPvcs},
        {"storage fits", Claim("small", "5Gi"), kPvcs},
        {"one claim too many", Claim("more", "1Mi"), kPvcs},
        {"service fits", NodePortService("svc-a"), kServices},
        {"one service too many", NodePortService("svc-b"), kServices},
        {"pods count full", PodWith("g", nullptr, {{"cpu", "0"}}), kPods},
    };
    int accepted = 0;
    int refused = 0;
    for (const auto& k : cases) {
      CAPTURE(k.what);
      FitResult preflight = CheckQuota(c, ns.name(), {k.object});
      CAPTURE(preflight.Message());
      bool created = false;
      try {
        c.Create(k.type, ns.name(), k.object);
        created = true;
        ++accepted;
      } catch (const QuotaExceeded& e) {
        ++refused;
        // The server names exactly the resources the pre-flight found short.
        CHECK(std::set<std::string>(e.resources().begin(), e.resources().end()) ==
              Names(preflight.shortfalls));
      } catch (const Forbidden& e) {
        ++refused;
        // "failed quota: must specify": the pre-flight reported it as a problem.
        CHECK(std::string(e.what()).find("must specify") != std::string::npos);
        CHECK(preflight.shortfalls.empty());
        REQUIRE(preflight.problems.size() == 1);
        CHECK(preflight.problems[0].find("must specify limits.cpu") != std::string::npos);
      }
      CHECK(created == preflight.fits);
    }
    CHECK(accepted == 5);
    CHECK(refused == 7);
  }

  TEST_CASE(
      "a Deployment that does not fit: pre-flight says no; the ReplicaSet's pods are refused") {
    Client c = AdminClient();
    TestNamespace ns(c, "deploy");
    QuotaSpec spec;
    spec.name = ns.name();
    spec.hard = {{"requests.nvidia.com/gpu", "2"}};
    ApplyQuota(c, spec);
    Json pod = PodWith("w", nullptr, {{"nvidia.com/gpu", 1}});
    Json deployment{
        {"apiVersion", "apps/v1"},
        {"kind", "Deployment"},
        {"metadata", {{"name", "workers"}}},
        {"spec",
         {{"replicas", 3},
          {"selector", {{"matchLabels", {{"app", "w"}}}}},
          {"template", {{"metadata", {{"labels", {{"app", "w"}}}}}, {"spec", pod["spec"]}}}}}};
    FitResult preflight = CheckQuota(c, ns.name(), {deployment});
    CHECK_FALSE(preflight.fits);
    REQUIRE(preflight.shortfalls.size() == 1);
    CHECK(preflight.shortfalls[0].requested == Quantity::FromInt(3));
    // With two replicas it fits.
    deployment["spec"]["replicas"] = 2;
    CHECK(CheckQuota(c, ns.name(), {deployment}).fits);
    deployment["spec"]["replicas"] = 3;

    // The server accepts the Deployment; the quota then refuses its third pod.
    c.Create(kDeployments, ns.name(), deployment);
    std::string failure;
    CHECK(TestNamespace::WaitFor(
        [&] {
          const Json sets = c.List(kReplicaSets, ns.name());
          for (const auto& rs : sets["items"]) {
            for (const auto& cond : rs["status"].value("conditions", Json::array())) {
              if (cond.value("type", "") == "ReplicaFailure") failure = cond.value("message", "");
            }
          }
          return !failure.empty();
        },
        std::chrono::seconds(30)));
    CHECK(failure.find("exceeded quota") != std::string::npos);
    CHECK(ParseQuotaExceededResources(failure) ==
          std::vector<std::string>{"requests.nvidia.com/gpu"});
  }

  TEST_CASE("a new quota is not enforced until the controller has computed its status") {
    Client c = AdminClient();
    TestNamespace ns(c, "fresh");
    Json quota{{"apiVersion", "v1"},
               {"kind", "ResourceQuota"},
               {"metadata", {{"name", "q"}}},
               {"spec", {{"hard", {{"pods", "1"}}}}}};
    Json created = c.Create(kResourceQuotas, ns.name(), quota);
    // The registry clears the status on create: this is the window in which admission ignores
    // the quota (nothing to compare with), which WaitForQuotaReady closes.
    CHECK_FALSE(UsageOf(created).ready);
    WaitForQuotaReady(c, ns.name(), std::chrono::seconds(20));
    CHECK(GetQuotaUsage(c, ns.name()).at(0).ready);
    c.Create(kPods, ns.name(), PodWith("one", nullptr, nullptr));
    CHECK_THROWS_AS(c.Create(kPods, ns.name(), PodWith("two", nullptr, nullptr)), QuotaExceeded);
    // A namespace without quota is ready at once.
    TestNamespace empty(c, "noquota");
    const auto start = std::chrono::steady_clock::now();
    WaitForQuotaReady(c, empty.name(), std::chrono::seconds(5));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  }

  TEST_CASE("'status unknown for quota' is recognised, waited for and retried") {
    Client c = AdminClient();
    TestNamespace ns(c, "unknown");
    QuotaSpec spec;
    spec.name = ns.name();
    spec.hard = {{"pods", "5"}};
    ApplyQuota(c, spec);
    // Make the status claim a hard limit without usage, as a controller that has not reached the
    // resource yet would leave it. With status.hard equal to spec.hard the controller does not
    // look again until its periodic resync, so the state is stable for this test.
    Json q = c.Get(kResourceQuotas, ns.name(), ns.name());
    q["status"] = {{"hard", {{"pods", "5"}}}, {"used", Json::object()}};
    c.Replace(kResourceQuotas, ns.name(), q, {}, "status");
    try {
      c.Create(kPods, ns.name(), PodWith("p", nullptr, nullptr));
      FAIL("expected status unknown");
    } catch (const Forbidden& e) {
      CHECK(IsQuotaStatusUnknown(e));
      CHECK(e.kind() == ErrorKind::kForbidden);  // not QuotaExceeded: nothing was exceeded
      CHECK(ParseQuotaExceededResources(e.server_message()).empty());
    }
    CHECK_FALSE(GetQuotaUsage(c, ns.name()).at(0).ready);
    CHECK_THROWS_AS(WaitForQuotaReady(c, ns.name(), std::chrono::milliseconds(500)), Timeout);

    // A spec change makes the controller recompute; the retry bridges the gap.
    c.Patch(kResourceQuotas, ns.name(), ns.name(), PatchType::kMerge,
            {{"spec", {{"hard", {{"pods", "6"}}}}}});
    int attempts = 0;
    Json pod = RetryWhileQuotaUnknown(
        [&] {
          ++attempts;
          return c.Create(kPods, ns.name(), PodWith("p", nullptr, nullptr));
        },
        std::chrono::seconds(15));
    CHECK(pod["metadata"]["name"] == "p");
    CHECK(attempts >= 1);
    WaitForQuotaReady(c, ns.name(), std::chrono::seconds(10));
  }

  TEST_CASE("DeleteQuota deletes a namespace only when tfk8s created it, that very namespace") {
    Client c = AdminClient();
    // Not tfk8s's: made by someone else, then given a queue. Refused, nothing deleted.
    TestNamespace theirs(c, "theirs");
    ApplyQuota(c, TeamSpec(theirs.name()));
    const Json before = c.Get(kNamespaces, "", theirs.name());
    try {
      DeleteQuota(c, theirs.name(), /*delete_namespace=*/true);
      FAIL("an unmanaged namespace was deleted");
    } catch (const ValidationError& e) {
      CHECK(e.field() == "name");
      CHECK(e.value() == theirs.name());
      CHECK_MESSAGE(std::string(e.what()).find("not created by tfk8s") != std::string::npos,
                    e.what());
    }
    const Json after = c.Get(kNamespaces, "", theirs.name());
    CHECK(after["metadata"]["uid"] == before["metadata"]["uid"]);
    CHECK_FALSE(after["metadata"].contains("deletionTimestamp"));
    CHECK(after["status"]["phase"] == "Active");
    CHECK_NOTHROW(c.Get(kResourceQuotas, theirs.name(), theirs.name()));  // the queue stays too

    // tfk8s's own: ApplyQuota created it, so it carries the label and is deleted.
    const std::string mine = UniqueName("mine");
    struct Cleanup {
      Client c;
      std::string name;
      ~Cleanup() {
        try {
          c.Delete(kNamespaces, "", name);
        } catch (...) {
        }
      }
    } cleanup{c, mine};
    ApplyQuota(c, TeamSpec(mine));
    const Json created = c.Get(kNamespaces, "", mine);
    CHECK(created["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "tfk8s");
    DeleteQuota(c, mine, /*delete_namespace=*/true);
    bool gone = TestNamespace::WaitFor(
        [&] {
          try {
            return c.Get(kNamespaces, "", mine)["metadata"].contains("deletionTimestamp");
          } catch (const NotFound&) {
            return true;
          }
        },
        std::chrono::seconds(10));
    CHECK(gone);
    // Gone already (or going): asking again is not an error.
    CHECK_NOTHROW(DeleteQuota(c, mine, /*delete_namespace=*/true));
  }
}
