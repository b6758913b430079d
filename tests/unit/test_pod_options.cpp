// The pod options of the shared pod vocabulary (tfk8s/pod.hpp): image pull policy and secrets,
// service account, priority class, security context. One rule for every workload: each pod every
// workload renders carries them, they are checked by tfk8s::validation with the field named, and
// they survive each spec's JSON round trip.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/pod_security.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"
#include "tfk8s/validation.hpp"
#include "workloads/pod.hpp"

using namespace tfk8s;

namespace {

PodOptions Options() {
  PodOptions o;
  o.image_pull_policy = "Never";
  o.image_pull_secrets = {"registry-a", "registry-b"};
  o.service_account = "trainer";
  o.automount_service_account_token = true;
  o.priority_class = "team-a.high";
  o.security_context.run_as_user = 1000;
  o.security_context.run_as_group = 1000;
  o.security_context.run_as_non_root = true;
  o.security_context.fs_group = 2000;
  o.security_context.allow_privilege_escalation = false;
  o.security_context.read_only_root_filesystem = true;
  o.security_context.drop_capabilities = {"ALL"};
  o.security_context.add_capabilities = {"NET_BIND_SERVICE"};
  o.security_context.seccomp_profile = "RuntimeDefault";
  return o;
}

TFClusterSpec Cluster() {
  TFClusterSpec s;
  s.name = "kit";
  s.ps.replicas = 1;
  s.worker.replicas = 2;
  s.session = TFSessionSpec{};
  s.tensorboard = TFTensorBoardSpec{};
  s.storage = TFStorageSpec{};
  return s;
}

ScheduledJobSpec Job() {
  ScheduledJobSpec s;
  s.name = "kit";
  s.image = "python:3";
  s.entry_path = "train.py";
  s.schedule = "0 3 * * *";
  return s;
}

DevInstanceSpec Dev() {
  DevInstanceSpec s;
  s.owner = "alice";
  s.name = "kit";
  s.resources = {"1", "1Gi", "", "", 0};
  return s;
}

// Every pod spec among rendered objects (pod templates of Jobs, CronJobs, StatefulSets,
// Deployments and ReplicaSets).
std::vector<Json> PodSpecs(const std::vector<Json>& objects) {
  std::vector<Json> pods;
  for (const Json& o : objects) {
    const std::string kind = o.value("kind", "");
    if (kind == "CronJob") {
      pods.push_back(o["spec"]["jobTemplate"]["spec"]["template"]["spec"]);
    } else if (kind == "Job" || kind == "StatefulSet" || kind == "Deployment" ||
               kind == "ReplicaSet") {
      pods.push_back(o["spec"]["template"]["spec"]);
    }
  }
  return pods;
}

void CheckCarriesOptions(const Json& pod) {
  CAPTURE(pod.dump());
  CHECK(pod["serviceAccountName"] == "trainer");
  CHECK(pod["automountServiceAccountToken"] == true);
  CHECK(pod["priorityClassName"] == "team-a.high");
  CHECK(pod["imagePullSecrets"] == Json::parse(R"([{"name":"registry-a"},{"name":"registry-b"}])"));
  CHECK(pod["securityContext"] == Json::parse(R"({"runAsUser":1000,"runAsGroup":1000,
      "runAsNonRoot":true,"fsGroup":2000,"seccompProfile":{"type":"RuntimeDefault"}})"));
  REQUIRE(pod["containers"].size() >= 1);
  for (const Json& c : pod["containers"]) {
    CHECK(c["imagePullPolicy"] == "Never");
    CHECK(c["securityContext"] == Json::parse(R"({"allowPrivilegeEscalation":false,
        "readOnlyRootFilesystem":true,"capabilities":{"drop":["ALL"],"add":["NET_BIND_SERVICE"]}})"));
  }
}

}  // namespace

TEST_SUITE("workload kit") {
  TEST_CASE("every pod of every workload carries the pod options") {
    TFClusterSpec cluster = Cluster();
    cluster.pod = Options();
    std::vector<Json> pods = PodSpecs(RenderTFCluster(cluster));
    CHECK(pods.size() == 5);  // ps-0, worker-0, worker-1, session, TensorBoard
    for (const Json& pod : pods) CheckCarriesOptions(pod);

    cluster.topology = TFTopology::kStatefulSet;
    pods = PodSpecs(RenderTFCluster(cluster));
    CHECK(pods.size() == 4);  // ps, worker, session, TensorBoard
    for (const Json& pod : pods) CheckCarriesOptions(pod);

    ScheduledJobSpec job = Job();
    job.pod = Options();
    pods = PodSpecs({RenderCronJob(job), RenderRunJob(job)});
    CHECK(pods.size() == 2);
    for (const Json& pod : pods) CheckCarriesOptions(pod);

    DevInstanceSpec dev = Dev();
    dev.pod = Options();
    pods = PodSpecs(RenderDevInstance(dev));
    CHECK(pods.size() == 1);
    for (const Json& pod : pods) CheckCarriesOptions(pod);
  }

  TEST_CASE("unset options render nothing but the security defaults of each workload") {
    TFClusterSpec cluster = Cluster();
    cluster.pod_security = PodSecurityLevel::kBaseline;  // no restricted defaults
    for (const Json& pod : PodSpecs(RenderTFCluster(cluster))) {
      CHECK_FALSE(pod.contains("serviceAccountName"));
      CHECK_FALSE(pod.contains("automountServiceAccountToken"));
      CHECK_FALSE(pod.contains("priorityClassName"));
      CHECK_FALSE(pod.contains("imagePullSecrets"));
      CHECK_FALSE(pod.contains("securityContext"));
      CHECK_FALSE(pod["containers"][0].contains("imagePullPolicy"));
      CHECK_FALSE(pod["containers"][0].contains("securityContext"));
    }
    std::vector<Json> dev = PodSpecs(RenderDevInstance(Dev()));
    REQUIRE(dev.size() == 1);
    CHECK(dev[0]["automountServiceAccountToken"] == false);
    CHECK_FALSE(dev[0].contains("priorityClassName"));
    CHECK(dev[0]["securityContext"] ==
          Json::parse(R"({"seccompProfile":{"type":"RuntimeDefault"}})"));
    CHECK(dev[0]["containers"][0]["imagePullPolicy"] == "IfNotPresent");
  }

  TEST_CASE("restricted by default: TFCluster replicas and TensorBoard, ScheduledJob runs") {
    const Json restricted_pod = Json::parse(R"({"runAsUser":1000,"runAsGroup":1000,
        "runAsNonRoot":true,"fsGroup":1000,"seccompProfile":{"type":"RuntimeDefault"}})");
    const Json restricted_container = Json::parse(R"({"allowPrivilegeEscalation":false,
        "capabilities":{"drop":["ALL"]}})");
    auto objects_with_pods = [](const std::vector<Json>& objects) {
      std::vector<Json> out;
      for (const Json& o : objects) {
        if (!PodSpecs(std::vector<Json>(1, o)).empty()) out.push_back(o);
      }
      return out;
    };
    for (auto topology : {TFTopology::kPerReplica, TFTopology::kStatefulSet}) {
      TFClusterSpec cluster = Cluster();
      cluster.topology = topology;
      cluster.worker.resources.gpus = 1;  // GPU pods too
      CHECK(cluster.pod_security == PodSecurityLevel::kRestricted);
      int sessions = 0;
      for (const Json& o : objects_with_pods(RenderTFCluster(cluster))) {
        CAPTURE(o["metadata"]["name"]);
        const Json pod = PodSpecs(std::vector<Json>(1, o)).front();
        if (o["metadata"]["labels"]["tfk8s.io/component"] == "session") {
          // sshd runs as root: the session is held to baseline and keeps the spec's options.
          ++sessions;
          CHECK_FALSE(pod.contains("securityContext"));
          CHECK(CheckPodSecurity(o, PodSecurityLevel::kBaseline).empty());
          CHECK_FALSE(CheckPodSecurity(o, PodSecurityLevel::kRestricted).empty());
          continue;
        }
        CHECK(pod["securityContext"] == restricted_pod);
        CHECK(pod["containers"][0]["securityContext"] == restricted_container);
        CHECK(CheckPodSecurity(o, PodSecurityLevel::kRestricted).empty());
      }
      CHECK(sessions == 1);
    }
    ScheduledJobSpec job = Job();
    for (const Json& o : {RenderCronJob(job), RenderRunJob(job)}) {
      CHECK(CheckPodSecurity(o, PodSecurityLevel::kRestricted).empty());
      CHECK(PodSpecs(std::vector<Json>(1, o)).front()["securityContext"] == restricted_pod);
    }

    // What the spec sets wins over the defaults; the rest is still filled in.
    TFClusterSpec own = Cluster();
    own.pod.security_context.run_as_user = 4242;
    own.pod.security_context.fs_group = 2000;
    const Json pod = PodSpecs(RenderTFCluster(own)).front();
    CHECK(pod["securityContext"]["runAsUser"] == 4242);
    CHECK(pod["securityContext"]["fsGroup"] == 2000);
    CHECK(pod["securityContext"]["runAsNonRoot"] == true);

    // A spec that breaks its own level is refused before anything is sent, naming podSecurity;
    // lowering the level is the named way to run an image as root.
    TFClusterSpec root = Cluster();
    root.pod.security_context.run_as_user = 0;
    root.pod.security_context.run_as_non_root = false;
    try {
      RenderTFCluster(root);
      FAIL("rendered a root pod under restricted");
    } catch (const ValidationError& e) {
      CHECK(e.field() == "podSecurity");
      CHECK(std::string(e.what()).find("runAsNonRoot") != std::string::npos);
    }
    root.pod_security = PodSecurityLevel::kBaseline;
    CHECK_FALSE(PodSpecs(RenderTFCluster(root)).empty());
    ScheduledJobSpec root_job = Job();
    root_job.pod.security_context.add_capabilities = {"SYS_ADMIN"};
    CHECK_THROWS_AS(RenderRunJob(root_job), ValidationError);
    root_job.pod_security = PodSecurityLevel::kPrivileged;
    CHECK(RenderRunJob(root_job)["kind"] == "Job");

    // The level in the specs' JSON: written only when lowered; a bad value names the field.
    CHECK_FALSE(Cluster().ToJson().contains("podSecurity"));
    CHECK(TFClusterSpec::FromJson(root.ToJson()).pod_security == PodSecurityLevel::kBaseline);
    CHECK(ScheduledJobSpec::FromJson(root_job.ToJson()).pod_security ==
          PodSecurityLevel::kPrivileged);
    Json bad = Job().ToJson();
    bad["podSecurity"] = "strict";
    try {
      ScheduledJobSpec::FromJson(bad);
      FAIL("accepted podSecurity: strict");
    } catch (const ValidationError& e) {
      CHECK(e.field() == "podSecurity");
    }
  }

  TEST_CASE("bad options are refused naming the field, for every workload") {
    const std::vector<std::pair<std::string, std::function<void(PodOptions&)>>> cases = {
        {"imagePullPolicy", [](PodOptions& o) { o.image_pull_policy = "Sometimes"; }},
        {"imagePullSecrets[1]",
         [](PodOptions& o) {
           o.image_pull_secrets = {"ok", "Not OK"};
         }},
        {"serviceAccount", [](PodOptions& o) { o.service_account = "../admin"; }},
        {"priorityClassName", [](PodOptions& o) { o.priority_class = "High"; }},
        {"priorityClassName", [](PodOptions& o) { o.priority_class = std::string(254, 'a'); }},
        {"priorityClassName", [](PodOptions& o) { o.priority_class = "system-node-critical"; }},
        {"securityContext.runAsUser", [](PodOptions& o) { o.security_context.run_as_user = -1; }},
        {"securityContext.runAsUser",
         [](PodOptions& o) {
           o.security_context.run_as_user = 0;
           o.security_context.run_as_non_root = true;
         }},
        {"securityContext.fsGroup", [](PodOptions& o) { o.security_context.fs_group = -5; }},
        {"securityContext.dropCapabilities[0]",
         [](PodOptions& o) { o.security_context.drop_capabilities = {"cap_sys_admin"}; }},
        {"securityContext.addCapabilities[0]",
         [](PodOptions& o) { o.security_context.add_capabilities = {""}; }},
        {"securityContext.seccompProfile",
         [](PodOptions& o) { o.security_context.seccomp_profile = "Localhost"; }},
    };
    for (const auto& [field, mutate] : cases) {
      CAPTURE(field);
      PodOptions o;
      mutate(o);
      CHECK_THROWS_WITH_AS(validation::ValidatePodOptions("", o), doctest::Contains(field.c_str()),
                           ValidationError);
      TFClusterSpec cluster = Cluster();
      cluster.pod = o;
      CHECK_THROWS_WITH_AS(cluster.Validate(), doctest::Contains(field.c_str()), ValidationError);
      ScheduledJobSpec job = Job();
      job.pod = o;
      CHECK_THROWS_WITH_AS(job.Validate(), doctest::Contains(field.c_str()), ValidationError);
      DevInstanceSpec dev = Dev();
      dev.pod = o;
      CHECK_THROWS_WITH_AS(dev.Validate(), doctest::Contains(field.c_str()), ValidationError);
    }
    PodOptions good = Options();
    CHECK_NOTHROW(validation::ValidatePodOptions("", good));
    good.security_context.run_as_user = 0;  // root without runAsNonRoot is the user's choice
    good.security_context.run_as_non_root.reset();
    CHECK_NOTHROW(validation::ValidatePodOptions("", good));
  }

  TEST_CASE("priority class: the field, the value and the reason of each refusal") {
    auto why = [](const std::string& name) -> std::string {
      PodOptions o;
      o.priority_class = name;
      try {
        validation::ValidatePodOptions("", o);
      } catch (const ValidationError& e) {
        CHECK(e.field() == "priorityClassName");
        CHECK(e.value() == name);
        return e.what();
      }
      return "";
    };
    CHECK(why("High").find("lowercase RFC 1123 subdomain") != std::string::npos);
    CHECK(why(std::string(254, 'a')).find("must be no more than 253 characters") !=
          std::string::npos);
    CHECK(why("-high").find("must start and end with an alphanumeric character") !=
          std::string::npos);
    const std::string reserved = why("system-cluster-critical");
    CHECK(reserved.find("must not start with \"system-\"") != std::string::npos);
    CHECK(reserved.find("reserved for Kubernetes' own classes") != std::string::npos);
    CHECK(why(std::string(253, 'a')).empty());
    CHECK(why("systems-high").empty());  // only the "system-" prefix is reserved
    CHECK(why("").empty());              // none: the cluster's default priority
  }

  TEST_CASE("the options survive every spec's JSON round trip, wrong types name the field") {
    TFClusterSpec cluster = Cluster();
    cluster.pod = Options();
    CHECK(TFClusterSpec::FromJson(cluster.ToJson()).pod == Options());
    ScheduledJobSpec job = Job();
    job.pod = Options();
    CHECK(ScheduledJobSpec::FromJson(job.ToJson()).pod == Options());
    DevInstanceSpec dev = Dev();
    dev.pod = Options();
    CHECK(DevInstanceSpec::FromJson(dev.ToJson()).pod == Options());

    Json j = Job().ToJson();
    CHECK_FALSE(j.contains("securityContext"));  // nothing set, nothing written
    j["securityContext"] = {{"runAsUser", "root"}};
    CHECK_THROWS_WITH_AS(ScheduledJobSpec::FromJson(j),
                         doctest::Contains("securityContext.runAsUser"), ValidationError);
    j.erase("securityContext");
    CHECK_FALSE(j.contains("priorityClassName"));
    j["priorityClassName"] = 7;
    CHECK_THROWS_WITH_AS(ScheduledJobSpec::FromJson(j), doctest::Contains("priorityClassName"),
                         ValidationError);
    j.erase("priorityClassName");
    j["securityContext"] = "restricted";
    CHECK_THROWS_WITH_AS(ScheduledJobSpec::FromJson(j), doctest::Contains("securityContext"),
                         ValidationError);
  }

  TEST_CASE("a DevInstance spec stored before the options were shared reads back the same") {
    Json old = Dev().ToJson();
    old.erase("imagePullPolicy");
    old.erase("automountServiceAccountToken");
    old.erase("securityContext");
    old["imagePullPolicy"] = "Always";
    old["imagePullSecret"] = "registrykey-myhub";
    old["security"]["serviceAccount"] = "notebook";
    old["security"]["automountServiceAccountToken"] = true;
    DevInstanceSpec s = DevInstanceSpec::FromJson(old);
    CHECK(s.pod.image_pull_policy == "Always");
    CHECK(s.pod.image_pull_secrets == std::vector<std::string>{"registrykey-myhub"});
    CHECK(s.pod.service_account == "notebook");
    CHECK(s.pod.automount_service_account_token == true);
    CHECK(s.pod.security_context.seccomp_profile == "RuntimeDefault");
    // Without the old keys the DevInstance defaults apply.
    Json bare = {{"owner", "alice"}, {"name", "kit"}};
    CHECK(DevInstanceSpec::FromJson(bare).pod == DevInstanceSpec::DefaultPodOptions());
  }
}

TEST_CASE("claim volumes: one volume per distinct claim, one naming rule for every workload") {
  std::vector<VolumeMount> mounts(4);
  mounts[0].claim = "datasets";
  mounts[0].mount_path = "/data";
  mounts[0].read_only = true;
  mounts[1].claim = "scratch";
  mounts[1].mount_path = "/scratch";
  mounts[2].claim = "datasets";
  mounts[2].mount_path = "/imagenet";
  mounts[2].sub_path = "imagenet";
  mounts[2].read_only = true;
  mounts[3].claim = "scratch";
  mounts[3].mount_path = "/ro-scratch";
  mounts[3].read_only = true;
  internal::ClaimVolumes c = internal::ClaimVolumesJson(mounts);
  // Every mount of "datasets" is read-only: attached read-only; "scratch" has a writer.
  CHECK(c.volumes == Json::parse(R"([
    {"name": "claim-0", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": true}},
    {"name": "claim-1", "persistentVolumeClaim": {"claimName": "scratch"}}])"));
  CHECK(c.mounts == Json::parse(R"([
    {"name": "claim-0", "mountPath": "/data", "readOnly": true},
    {"name": "claim-1", "mountPath": "/scratch"},
    {"name": "claim-0", "mountPath": "/imagenet", "subPath": "imagenet", "readOnly": true},
    {"name": "claim-1", "mountPath": "/ro-scratch", "readOnly": true}])"));
  CHECK(internal::ClaimVolumesJson({}).volumes.empty());
  CHECK(internal::ClaimVolumesJson({}).mounts.empty());
}
