// TFCluster rendering: golden JSON for both topologies, TF_CONFIG / CLUSTER_SPEC for every
// replica, validation errors. Pure: no server.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "golden.hpp"
#include "kubelet_expansion.hpp"
#include "tfk8s/tfcluster.hpp"
#include "tfk8s/yaml.hpp"

using namespace tfk8s;
using tfk8s::testing::CheckGolden;

namespace {

// The seed's worked example: tf-dis-task in namespace admin, 2 ps + 3 workers, StatefulSets,
// a session Job with two NodePort Services, TensorBoard as a ReplicaSet, a shared PVC.
TFClusterSpec SeedExample() {
  TFClusterSpec s;
  s.name = "tf-dis-task";
  s.namespace_name = "admin";
  s.topology = TFTopology::kStatefulSet;
  s.ps.replicas = 2;
  s.worker.replicas = 3;
  s.session = TFSessionSpec{};
  s.session->service_type = "NodePort";
  s.tensorboard = TFTensorBoardSpec{};
  s.tensorboard->use_replicaset = true;
  s.tensorboard->port = 2080;
  s.tensorboard->service_type = "NodePort";
  s.storage = TFStorageSpec{};
  s.placement.cputype = "xeon-gold";
  return s;
}

// A GPU cluster with every optional part, per-replica topology.
TFClusterSpec GpuExample() {
  TFClusterSpec s;
  s.name = "resnet";
  s.namespace_name = "team-a";
  s.labels = {{"team", "vision"}};
  s.ps.replicas = 2;
  s.ps.resources = {"4", "16Gi", "", "", 0};
  s.worker.replicas = 2;
  s.worker.resources = {"8", "32Gi", "16", "64Gi", 2};
  s.worker.script = "python /data/train.py --epochs 10";
  s.worker.env = {{"EPOCHS", "10"}};
  s.worker.pod_annotations = {{"prometheus.io/scrape", "true"}};
  s.chief.replicas = 1;
  s.chief.resources = {"2", "8Gi", "", "", 0};
  s.chief.command = {"python", "/data/train.py"};
  s.chief.args = {"--chief"};
  s.chief.restart_policy = "Never";
  s.chief.backoff_limit = 0;
  s.evaluator.replicas = 1;
  s.session = TFSessionSpec{};
  s.tensorboard = TFTensorBoardSpec{};
  s.storage = TFStorageSpec{};
  s.storage->size = "100Gi";
  s.storage->storage_class = "fast";
  s.placement.cputype = "xeon-gold";
  s.placement.gputype = "v100";
  s.placement.pool = "unshared";
  s.placement.private_name = "alice";
  return s;
}

// A small CPU cluster whose roles keep their replicas on different nodes.
TFClusterSpec SpreadExample() {
  TFClusterSpec s;
  s.name = "spread";
  s.namespace_name = "team-a";
  s.ps.replicas = 1;
  s.ps.resources = {"1", "2Gi", "", "", 0};
  s.worker.replicas = 2;
  s.worker.resources = {"2", "4Gi", "", "", 0};
  s.worker.script = "python /data/train.py";
  s.placement.cputype = "xeon-gold";
  s.spread = TFSpread::kRequired;
  return s;
}

const Json* Find(const std::vector<Json>& objects, const std::string& kind,
                 const std::string& name) {
  for (const auto& o : objects) {
    if (o["kind"] == kind && o["metadata"]["name"] == name) return &o;
  }
  return nullptr;
}

std::string EnvOf(const Json& container, const std::string& name) {
  for (const auto& e : container["env"]) {
    if (e["name"] == name) return e["value"];
  }
  return "<unset>";
}

void CheckInvalid(TFClusterSpec s, const std::string& field) {
  try {
    s.Validate();
    FAIL("expected ValidationError for " << field);
  } catch (const ValidationError& e) {
    CHECK_MESSAGE(e.field() == field, e.what());
  }
}

}  // namespace

TEST_SUITE("tfcluster") {
  TEST_CASE("scripts, commands and args reach every replica verbatim ($ escaped for the kubelet)") {
    const std::map<std::string, std::string> env = {{"TF_CONFIG", "{}"}, {"HOME", "/root"}};
    for (auto [topology, launcher] :
         {std::pair{TFTopology::kPerReplica, true}, std::pair{TFTopology::kStatefulSet, true},
          std::pair{TFTopology::kPerReplica, false}, std::pair{TFTopology::kStatefulSet, false}}) {
      CAPTURE(ToString(topology));
      CAPTURE(launcher);
      TFClusterSpec s = GpuExample();
      s.topology = topology;
      s.launcher.enabled = launcher;
      s.worker.script = "echo \"pid=[$$] $(TF_CONFIG) ${HOME}\"";
      s.ps.command = {"python3", "-c", "print('$(TF_CONFIG)')"};
      s.ps.args = {"$$", "$"};
      bool saw_worker = false;
      bool saw_ps = false;
      for (const Json& o : RenderTFCluster(s)) {
        const Json* pod = nullptr;
        if (o["kind"] == "Job") pod = &o["spec"]["template"]["spec"];
        if (o["kind"] == "StatefulSet") pod = &o["spec"]["template"]["spec"];
        if (!pod || !o["metadata"]["labels"].contains("tfk8s.io/role")) continue;
        const std::string role = o["metadata"]["labels"]["tfk8s.io/role"];
        const Json& c = (*pod)["containers"][0];
        std::vector<std::string> argv = c.value("command", std::vector<std::string>{});
        for (const auto& a : c.value("args", std::vector<std::string>{})) argv.push_back(a);
        const std::vector<std::string> received = testing::KubeletExpand(argv, env);
        auto has = [&](const std::string& word) {
          return std::find(received.begin(), received.end(), word) != received.end();
        };
        if (role == "worker") {
          saw_worker = true;
          CHECK(has("echo \"pid=[$$] $(TF_CONFIG) ${HOME}\""));
        } else if (role == "ps") {
          saw_ps = true;
          CHECK(has("print('$(TF_CONFIG)')"));
          CHECK(has("$$"));
          CHECK(has("$"));
        }
        if (launcher && (role == "worker" || role == "ps")) {
          // The launcher comes first; the program follows "--" unchanged.
          REQUIRE(received.size() > 2);
          CHECK(received[0] == "/var/run/tfk8s/launcher/tfk8s-launcher");
          CHECK(received[1] == "--");
        } else if (topology == TFTopology::kStatefulSet && (role == "worker" || role == "ps")) {
          // The ordinal wrapper (tfk8s's own script) also arrives intact.
          REQUIRE(received.size() > 2);
          CHECK(received[2].find("TASK_INDEX=\"${HOSTNAME##*-}\"") == 0);
        }
      }
      CHECK(saw_worker);
      CHECK(saw_ps);
    }
  }

  TEST_CASE("golden: the seed's example (statefulset topology)") {
    TFRenderOptions o;
    o.root_uid = "00000000-1111-2222-3333-444444444444";
    CheckGolden("tfcluster_seed_statefulset",
                testing::WithLauncherMarker(RenderTFCluster(SeedExample(), o)));
  }

  TEST_CASE("golden: GPU cluster with chief, evaluator, session and TensorBoard") {
    TFRenderOptions o;
    o.root_uid = "00000000-1111-2222-3333-444444444444";
    CheckGolden("tfcluster_gpu_per_replica",
                testing::WithLauncherMarker(RenderTFCluster(GpuExample(), o)));
  }

  TEST_CASE("golden: spread required, per-replica topology") {
    TFRenderOptions o;
    o.root_uid = "00000000-1111-2222-3333-444444444444";
    CheckGolden("tfcluster_spread_required",
                testing::WithLauncherMarker(RenderTFCluster(SpreadExample(), o)));
  }

  TEST_CASE("golden: a priority class on every pod (replicas and TensorBoard)") {
    TFClusterSpec s;
    s.name = "urgent";
    s.namespace_name = "team-a";
    s.strategy = TFStrategy::kMultiWorkerMirrored;
    s.worker.replicas = 2;
    s.worker.resources = {"2", "4Gi", "", "", 0};
    s.worker.script = "python /data/train.py";
    s.tensorboard = TFTensorBoardSpec{};
    s.launcher.enabled = false;
    s.pod.priority_class = "team-high";
    TFRenderOptions o;
    o.root_uid = "00000000-1111-2222-3333-444444444444";
    const std::vector<Json> objects = RenderTFCluster(s, o);
    CheckGolden("tfcluster_priority_class", objects);
    int pods = 0;
    for (const Json& object : objects) {
      if (object["kind"] != "Job" && object["kind"] != "Deployment") continue;
      ++pods;
      CHECK(object["spec"]["template"]["spec"]["priorityClassName"] == "team-high");
    }
    CHECK(pods == 3);  // worker-0, worker-1, TensorBoard
  }

  TEST_CASE("the seed example renders the document's names and addresses") {
    auto objects = RenderTFCluster(SeedExample());
    CHECK(Find(objects, "StatefulSet", "tf-dis-task-ps"));
    CHECK(Find(objects, "StatefulSet", "tf-dis-task-worker"));
    CHECK(Find(objects, "Job", "tf-dis-task-session"));
    CHECK(Find(objects, "Service", "tf-dis-task-session"));
    CHECK(Find(objects, "Service", "tf-dis-task-session-ssh"));
    CHECK(Find(objects, "Service", "tf-dis-task-tf-board"));
    CHECK(Find(objects, "ReplicaSet", "tf-dis-task-tf-board"));
    CHECK(SeedClusterSpec(SeedExample()) ==
          "ps|tf-dis-task-ps-0.tf-dis-task-ps:2222;tf-dis-task-ps-1.tf-dis-task-ps:2222,"
          "worker|tf-dis-task-worker-0.tf-dis-task-worker:2222;"
          "tf-dis-task-worker-1.tf-dis-task-worker:2222;"
          "tf-dis-task-worker-2.tf-dis-task-worker:2222");
    const Json& ps = *Find(objects, "StatefulSet", "tf-dis-task-ps");
    CHECK(ps["spec"]["podManagementPolicy"] == "Parallel");
    CHECK(ps["spec"]["serviceName"] == "tf-dis-task-ps");
    const Json& c = ps["spec"]["template"]["spec"]["containers"][0];
    CHECK(EnvOf(c, "TASK_NAME") == "tf-dis-task");
    CHECK(EnvOf(c, "RESOURCE_TYPE") == "compute");
    CHECK(EnvOf(c, "RESOURCE_NAME") == "ps");
    CHECK(EnvOf(c, "CLUSTER_SPEC") == SeedClusterSpec(SeedExample()));
    // Every object is findable with the seed's selector.
    for (const auto& o : objects) CHECK(o["metadata"]["labels"]["taskname"] == "tf-dis-task");
  }

  TEST_CASE("per-replica: TF_CONFIG and CLUSTER_SPEC for every replica") {
    TFClusterSpec s = GpuExample();
    auto objects = RenderTFCluster(s);
    // `<cluster>-<role>-<i>.<cluster>-<role>`: the pod's hostname under its role's Service.
    Json cluster = {
        {"chief", {"resnet-chief-0.resnet-chief:2222"}},
        {"ps", {"resnet-ps-0.resnet-ps:2222", "resnet-ps-1.resnet-ps:2222"}},
        {"worker", {"resnet-worker-0.resnet-worker:2222", "resnet-worker-1.resnet-worker:2222"}}};
    CHECK(TFClusterAddresses(s) == cluster);  // the evaluator is not in the cluster
    int checked = 0;
    for (const char* role : {"chief", "ps", "worker", "evaluator"}) {
      int n = std::string(role) == "ps" || std::string(role) == "worker" ? 2 : 1;
      for (int i = 0; i < n; ++i) {
        std::string name = std::string("resnet-") + role + "-" + std::to_string(i);
        const Json* job = Find(objects, "Job", name);
        REQUIRE_MESSAGE(job, name);
        // One headless Service per role, not per replica.
        CHECK_FALSE(Find(objects, "Service", name));
        const Json* svc = Find(objects, "Service", std::string("resnet-") + role);
        REQUIRE(svc);
        CHECK((*svc)["spec"]["clusterIP"] == "None");
        CHECK((*svc)["spec"]["publishNotReadyAddresses"] == true);
        CHECK((*svc)["spec"]["selector"] ==
              Json{{"tfk8s.io/cluster", "resnet"}, {"tfk8s.io/role", role}});
        const Json& pod = (*job)["spec"]["template"]["spec"];
        CHECK(pod["hostname"] == name);
        CHECK(pod["subdomain"] == std::string("resnet-") + role);
        const Json& c = pod["containers"][0];
        Json tf_config = Json::parse(EnvOf(c, "TF_CONFIG"));
        CHECK(tf_config["cluster"] == cluster);
        CHECK(tf_config["task"] == Json{{"type", role}, {"index", i}});
        CHECK(tf_config["environment"] == "cloud");
        CHECK(EnvOf(c, "TASK_INDEX") == std::to_string(i));
        CHECK(EnvOf(c, "CLUSTER_SPEC") ==
              "ps|resnet-ps-0.resnet-ps:2222;resnet-ps-1.resnet-ps:2222,"
              "worker|resnet-worker-0.resnet-worker:2222;resnet-worker-1.resnet-worker:2222,"
              "chief|resnet-chief-0.resnet-chief:2222");
        ++checked;
      }
    }
    CHECK(checked == 6);
    int services = 0;
    for (const auto& o : objects) services += o["kind"] == "Service" ? 1 : 0;
    CHECK(services ==
          4 + 3);  // one per role (chief, ps, worker, evaluator) + session ×2 + TensorBoard
  }

  TEST_CASE("placement: seed labels as required node affinity, GPU gets toleration and limits") {
    auto objects = RenderTFCluster(GpuExample());
    const Json& worker = (*Find(objects, "Job", "resnet-worker-0"))["spec"]["template"]["spec"];
    auto exprs =
        worker["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
              ["nodeSelectorTerms"][0]["matchExpressions"];
    std::set<std::string> keys;
    for (const auto& e : exprs)
      keys.insert(e["key"].get<std::string>() + "=" + e["values"][0].get<std::string>());
    CHECK(keys == std::set<std::string>{"nodetype=tensorflow", "gputype=v100", "pooltype=unshared",
                                        "privatename=alice"});
    CHECK(worker["tolerations"][0]["key"] == "nvidia.com/gpu");
    const Json& res = worker["containers"][0]["resources"];
    CHECK(res["requests"]["nvidia.com/gpu"] == "2");
    CHECK(res["limits"]["nvidia.com/gpu"] == "2");
    CHECK(res["limits"]["cpu"] == "16");
    CHECK(worker["containers"][0]["image"] == "tensorflow/tensorflow:2.4.0-gpu");
    const Json& ps = (*Find(objects, "Job", "resnet-ps-0"))["spec"]["template"]["spec"];
    CHECK_FALSE(ps.contains("tolerations"));
    CHECK(ps["containers"][0]["image"] == "tensorflow/tensorflow:2.4.0");
    CHECK(ps["containers"][0]["resources"]["limits"]["memory"] == "16Gi");  // = request
  }

  TEST_CASE(
      "statefulset topology without the launcher wraps the command so TF_CONFIG gets the "
      "pod ordinal") {
    TFClusterSpec s = SeedExample();
    s.launcher.enabled = false;
    s.worker.command = {"python", "train.py"};
    auto objects = RenderTFCluster(s);
    const Json& c = (*Find(objects, "StatefulSet",
                           "tf-dis-task-worker"))["spec"]["template"]["spec"]["containers"][0];
    REQUIRE(c["command"].size() == 6);
    CHECK(c["command"][0] == "/bin/sh");
    CHECK(c["command"][3] == "tfk8s-start");
    CHECK(c["command"][4] == "python");
    CHECK(c["command"][5] == "train.py");
    CHECK(EnvOf(c, "TF_CLUSTER") == TFClusterAddresses(s).dump());
  }

  TEST_CASE(
      "the launcher: one executable file mounted read-only in every replica, from the image "
      "(default) or the root ConfigMap") {
    for (TFLauncherDelivery delivery :
         {TFLauncherDelivery::kImage, TFLauncherDelivery::kConfigMap}) {
      for (TFTopology topology : {TFTopology::kPerReplica, TFTopology::kStatefulSet}) {
        CAPTURE(ToString(delivery));
        CAPTURE(ToString(topology));
        TFClusterSpec s = GpuExample();
        s.topology = topology;
        s.launcher.delivery = delivery;
        s.ps.command.clear();  // no program: the launcher's default for the role
        s.launcher.barrier_timeout_seconds = 90;
        const bool from_image = delivery == TFLauncherDelivery::kImage;
        auto objects = RenderTFCluster(s);
        const Json& root = objects[0];
        REQUIRE(root["kind"] == "ConfigMap");
        if (from_image) {
          CHECK_FALSE(root.contains("binaryData"));  // nothing of the launcher in etcd
        } else {
          CHECK(root["binaryData"]["tfk8s-launcher"] == testing::LauncherFileBase64());
        }
        CHECK_FALSE(root["data"].contains("tfk8s-launcher"));
        int replicas = 0;
        for (const auto& o : objects) {
          if (o["kind"] != "Job" && o["kind"] != "StatefulSet") continue;
          const std::string role = o["metadata"]["labels"]["tfk8s.io/role"];
          const Json& pod = o["spec"]["template"]["spec"];
          const Json& c = pod["containers"][0];
          bool launched = role != "session";
          CAPTURE(role);
          auto volume = std::find_if(pod["volumes"].begin(), pod["volumes"].end(),
                                     [](const Json& v) { return v["name"] == "tfk8s-launcher"; });
          auto mount = std::find_if(c["volumeMounts"].begin(), c["volumeMounts"].end(),
                                    [](const Json& m) { return m["name"] == "tfk8s-launcher"; });
          CHECK((volume != pod["volumes"].end()) == launched);
          CHECK((mount != c["volumeMounts"].end()) == launched);
          CHECK(pod.contains("initContainers") == (launched && from_image));
          if (!launched) continue;
          ++replicas;
          if (from_image) {
            CHECK((*volume) == Json{{"name", "tfk8s-launcher"}, {"emptyDir", Json::object()}});
            REQUIRE(pod["initContainers"].size() == 1);
            const Json& init = pod["initContainers"][0];
            CHECK(init["name"] == "tfk8s-launcher");
            CHECK(init["image"] == kDefaultLauncherImage);
            CHECK(init["imagePullPolicy"] == "IfNotPresent");  // a tag
            CHECK(init["command"] == Json::array({"/opt/tfk8s/bin/tfk8s-launcher", "--install",
                                                  "/var/run/tfk8s/launcher/tfk8s-launcher"}));
            CHECK(init["volumeMounts"] ==
                  Json::array(
                      {{{"name", "tfk8s-launcher"}, {"mountPath", "/var/run/tfk8s/launcher"}}}));
            // The replica's security context (restricted: no privileges, all capabilities
            // dropped), and its cpu and memory capped at 100m / 32Mi (the evaluator has none).
            CHECK(init.at("securityContext") == c.at("securityContext"));
            CHECK(init.value("resources", Json()) ==
                  (role == "evaluator" ? Json()
                                       : Json{{"requests", {{"cpu", "100m"}, {"memory", "32Mi"}}},
                                              {"limits", {{"cpu", "100m"}, {"memory", "32Mi"}}}}));
            CHECK(CheckPodSecurity(o, PodSecurityLevel::kRestricted).empty());
          } else {
            CHECK((*volume)["configMap"]["name"] == "resnet");
            CHECK((*volume)["configMap"]["items"] ==
                  Json::array({{{"key", "tfk8s-launcher"}, {"path", "tfk8s-launcher"}}}));
            CHECK((*volume)["configMap"]["defaultMode"] == 0555);
          }
          CHECK((*mount)["mountPath"] == "/var/run/tfk8s/launcher");
          CHECK((*mount)["readOnly"] == true);
          CHECK(EnvOf(c, "TFK8S_BARRIER_TIMEOUT") == "90");
          CHECK(EnvOf(c, "TFK8S_STRATEGY") == "parameter-server");
          CHECK_FALSE(c.contains("args"));
          std::vector<std::string> command = c["command"];
          if (role == "ps") {
            // The default program, a TensorFlow server, runs in the named interpreter.
            CHECK(command == std::vector<std::string>{"/var/run/tfk8s/launcher/tfk8s-launcher",
                                                      "--python", "python3"});
          } else if (role == "chief") {
            CHECK(command == std::vector<std::string>{"/var/run/tfk8s/launcher/tfk8s-launcher",
                                                      "--", "python", "/data/train.py", "--chief"});
          } else if (role == "worker") {
            CHECK(command == std::vector<std::string>{"/var/run/tfk8s/launcher/tfk8s-launcher",
                                                      "--", "/bin/sh", "-c",
                                                      "python /data/train.py --epochs 10"});
          }
        }
        CHECK(replicas == (topology == TFTopology::kPerReplica ? 6 : 4));
      }
    }
  }

  TEST_CASE("the launcher's init container: pull policy, resources and security follow the spec") {
    TFClusterSpec s = GpuExample();
    auto init_of = [](const TFClusterSpec& spec, const std::string& job) {
      auto objects = RenderTFCluster(spec);
      return (*Find(objects, "Job", job))["spec"]["template"]["spec"]["initContainers"][0];
    };
    SUBCASE("the pods' pull policy when the spec sets one") {
      s.pod.image_pull_policy = "Never";
      CHECK(init_of(s, "resnet-chief-0")["imagePullPolicy"] == "Never");
    }
    SUBCASE("else what the kubelet does for the reference: IfNotPresent for a tag or digest") {
      const std::vector<std::pair<std::string, std::string>> cases = {
          {"registry.example:5000/tfk8s/runtime:0.1.0", "IfNotPresent"},
          {"registry.example:5000/tfk8s/runtime", "Always"},
          {"tfk8s/runtime:latest", "Always"},
          {"tfk8s/runtime", "Always"},
          {"tfk8s/runtime@sha256:0123", "IfNotPresent"}};
      for (const auto& [image, policy] : cases) {
        CAPTURE(image);
        s.launcher.image = image;
        CHECK(init_of(s, "resnet-chief-0")["image"] == image);
        CHECK(init_of(s, "resnet-chief-0")["imagePullPolicy"] == policy);
      }
    }
    SUBCASE("cpu and memory: the replica's, each at most 100m / 32Mi; never GPUs") {
      s.chief.resources = {"50m", "16Mi", "", "", 0};  // smaller than the caps: kept
      CHECK(init_of(s, "resnet-chief-0")["resources"] ==
            Json{{"requests", {{"cpu", "50m"}, {"memory", "16Mi"}}},
                 {"limits", {{"cpu", "50m"}, {"memory", "16Mi"}}}});
      // Larger requests and limits (8 / 32Gi, 16 / 64Gi): both at the caps.
      CHECK(init_of(s, "resnet-worker-0")["resources"] ==
            Json{{"requests", {{"cpu", "100m"}, {"memory", "32Mi"}}},
                 {"limits", {{"cpu", "100m"}, {"memory", "32Mi"}}}});
      s.chief.resources = {"20m", "", "", "1Gi", 0};
      CHECK(init_of(s, "resnet-chief-0")["resources"] ==
            Json{{"requests", {{"cpu", "20m"}}}, {"limits", {{"cpu", "20m"}, {"memory", "32Mi"}}}});
      s.chief.resources = {};  // none: none (a BestEffort pod stays BestEffort)
      CHECK_FALSE(init_of(s, "resnet-chief-0").contains("resources"));
    }
    SUBCASE("baseline: the spec's security fields only, like the replica") {
      s.pod_security = PodSecurityLevel::kBaseline;
      const Json init = init_of(s, "resnet-chief-0");
      CHECK_FALSE(init.contains("securityContext"));
    }
  }

  TEST_CASE("the root ConfigMap stays small with the default delivery") {
    // The quickstart's cluster (examples/quickstart.cpp, real training): 2 ps, 2 workers, a
    // chief, each running the reference trainer.
    TFClusterSpec s;
    s.name = "mnist";
    s.namespace_name = "tfk8s-quickstart";
    s.ps.replicas = 2;
    s.worker.replicas = 2;
    s.chief.replicas = 1;
    for (TFRoleSpec* role : {&s.ps, &s.worker, &s.chief}) {
      role->resources = {"100m", "256Mi", "", "", 0};
      role->command = {"python3", "/opt/tfk8s/examples/trainer/ps_sgd.py"};
    }
    s.cpu_image = "tfk8s.local/runtime:1";
    s.pod.image_pull_policy = "Never";
    s.storage = TFStorageSpec{};
    const std::size_t root = RenderTFCluster(s)[0].dump().size();
    CAPTURE(root);
    CHECK(root <= 8 * 1024);
    // The fallback still stores the launcher (~150 KB): what the default saves per cluster.
    s.launcher.delivery = TFLauncherDelivery::kConfigMap;
    CHECK(RenderTFCluster(s)[0].dump().size() > root + 100 * 1024);
  }

  TEST_CASE("launcher.delivery and launcher.image: JSON, defaults and validation") {
    TFClusterSpec s = GpuExample();
    CHECK(s.launcher.delivery == TFLauncherDelivery::kImage);
    CHECK(s.launcher.image == kDefaultLauncherImage);
    CHECK(std::string(kDefaultLauncherImage).rfind("tfk8s/runtime:", 0) == 0);
    // Stored only when set: a spec with the default image follows the library's version.
    CHECK_FALSE(s.ToJson().contains("launcher"));
    s.launcher.barrier_timeout_seconds = 30;
    CHECK_FALSE(s.ToJson()["launcher"].contains("image"));
    CHECK_FALSE(s.ToJson()["launcher"].contains("delivery"));
    s.launcher.image = "registry.example/tfk8s/runtime:0.1.0";
    s.launcher.delivery = TFLauncherDelivery::kConfigMap;
    CHECK(s.ToJson()["launcher"]["image"] == "registry.example/tfk8s/runtime:0.1.0");
    CHECK(s.ToJson()["launcher"]["delivery"] == "configmap");
    CHECK(TFClusterSpec::FromJson(s.ToJson()).ToJson() == s.ToJson());
    // Written out at their defaults they are still fields.
    Json j = GpuExample().ToJson();
    j["launcher"] = {{"delivery", "image"}, {"image", kDefaultLauncherImage}};
    CHECK(TFClusterSpec::FromJson(j).ToJson() == GpuExample().ToJson());
    j["launcher"] = {{"delivery", "configmap"}};
    CHECK(TFClusterSpec::FromJson(j).launcher.delivery == TFLauncherDelivery::kConfigMap);
    CHECK(TFClusterSpec::FromJson(j).launcher.image == kDefaultLauncherImage);
    auto refused = [&](const Json& launcher, const std::string& field, const std::string& value) {
      Json bad = GpuExample().ToJson();
      bad["launcher"] = launcher;
      try {
        TFClusterSpec::FromJson(bad).Validate();
        FAIL("accepted " << launcher.dump());
      } catch (const ValidationError& e) {
        CHECK(e.field() == field);
        CHECK(e.value() == value);
      }
    };
    refused({{"delivery", "volume"}}, "launcher.delivery", "volume");
    refused({{"delivery", 1}}, "launcher.delivery", "1");
    refused({{"image", ""}}, "launcher.image", "");
    refused({{"image", "tfk8s/runtime: 1"}}, "launcher.image", "tfk8s/runtime: 1");
    refused({{"imag", "x"}}, "launcher.imag", "");
    // The image matters only to the image delivery of an enabled launcher.
    TFClusterSpec other = GpuExample();
    other.launcher.image = "";
    other.launcher.delivery = TFLauncherDelivery::kConfigMap;
    CHECK_NOTHROW(other.Validate());
    other.launcher.delivery = TFLauncherDelivery::kImage;
    other.launcher.enabled = false;
    CHECK_NOTHROW(other.Validate());
    CHECK_FALSE(RenderTFCluster(other)[0].contains("binaryData"));
  }

  TEST_CASE("launcher off: no launcher file, volume, command or variables") {
    TFClusterSpec s = GpuExample();
    s.launcher.enabled = false;
    auto objects = RenderTFCluster(s);
    CHECK_FALSE(objects[0].contains("binaryData"));
    const Json& c =
        (*Find(objects, "Job", "resnet-chief-0"))["spec"]["template"]["spec"]["containers"][0];
    CHECK(c["command"] == Json::array({"python", "/data/train.py"}));
    CHECK(c["args"] == Json::array({"--chief"}));
    CHECK(EnvOf(c, "TFK8S_BARRIER_TIMEOUT") == "<unset>");
    CHECK(c["volumeMounts"].size() == 1);  // the shared volume only
    // Stored only when it differs from the default, so older specs read back unchanged.
    CHECK(s.ToJson()["launcher"] ==
          Json{{"enabled", false}, {"barrierTimeoutSeconds", 600}, {"python", "python3"}});
    CHECK_FALSE(GpuExample().ToJson().contains("launcher"));
    CHECK(TFClusterSpec::FromJson(s.ToJson()).ToJson() == s.ToJson());
  }

  TEST_CASE("session: the DevInstance start script with the password only in a Secret") {
    TFClusterSpec s = GpuExample();
    TFRenderOptions o;
    o.root_uid = "uid-1";
    o.session_credentials =
        DevCredentials{"pw-plain", "argon2:$argon2id$hash", "sha512:salt:hash", "$6$salt$hash"};
    auto objects = RenderTFCluster(s, o);
    const Json* secret = Find(objects, "Secret", "resnet-session-credentials");
    REQUIRE(secret);
    CHECK((*secret)["metadata"]["ownerReferences"][0]["uid"] == "uid-1");
    CHECK((*secret)["metadata"]["labels"]["tfk8s.io/role"] == "session");
    CHECK((*secret)["data"]["password"] == "cHctcGxhaW4=");  // base64 of pw-plain
    const Json& pod = (*Find(objects, "Job", "resnet-session"))["spec"]["template"]["spec"];
    const Json& c = pod["containers"][0];
    REQUIRE(c["command"].size() == 3);
    CHECK(c["command"][0] == "/bin/sh");
    CHECK(c["command"][2].get<std::string>().rfind("# tfk8s dev instance", 0) == 0);
    CHECK(EnvOf(c, "TFK8S_JUPYTER_PORT") == "8888");
    CHECK(EnvOf(c, "TFK8S_SSH_PORT") == "22");
    CHECK(EnvOf(c, "TFK8S_SSH_PASSWORD_LOGIN") == "yes");
    CHECK(EnvOf(c, "TFK8S_HOME") == "/data");
    CHECK(EnvOf(c, "TFK8S_READINESS_TOOL") == "<unset>");
    CHECK(EnvOf(c, "TFK8S_CODE_SERVER_PORT") == "<unset>");
    // Ready once Jupyter and sshd both listen.
    const std::string probe = c["readinessProbe"]["exec"]["command"][2];
    CHECK(probe.find("jupyter:8888:22B8 ssh:22:0016;") != std::string::npos);
    // Nothing in the pod spec holds the password: only hashes, projected as files.
    CHECK(pod.dump().find("pw-plain") == std::string::npos);
    for (const auto& e : c["env"]) CHECK(e["name"] != "PASSWORD");
    const Json& volume = pod["volumes"].back();
    CHECK(volume["secret"]["secretName"] == "resnet-session-credentials");
    for (const auto& item : volume["secret"]["items"]) CHECK(item["key"] != "password");

    // Render() (and ToYaml) never include the Secret.
    CHECK_FALSE(Find(RenderTFCluster(s), "Secret", "resnet-session-credentials"));

    // An image's own start script reads the password from a root-only file...
    s.session->command = {"/start-session.sh"};
    auto own = RenderTFCluster(s, o);
    const Json& opod = (*Find(own, "Job", "resnet-session"))["spec"]["template"]["spec"];
    const Json& oc = opod["containers"][0];
    CHECK(oc["command"] == Json::array({"/start-session.sh"}));
    CHECK(EnvOf(oc, "TFK8S_PASSWORD_FILE") == "/var/run/tfk8s/credentials/password");
    for (const auto& e : oc["env"]) CHECK(e["name"] != "PASSWORD");
    CHECK(opod["volumes"].back()["secret"]["items"].back() ==
          Json{{"key", "password"}, {"path", "password"}});
    CHECK(oc["volumeMounts"].back()["mountPath"] == "/var/run/tfk8s/credentials");
    CHECK_FALSE(oc.contains("readinessProbe"));
    // ... and also as PASSWORD, by reference to the Secret, when the image expects it (the seed).
    s.session->password_env = true;
    auto env_too = RenderTFCluster(s, o);
    const Json& ec =
        (*Find(env_too, "Job", "resnet-session"))["spec"]["template"]["spec"]["containers"][0];
    CHECK(
        ec["env"].back() ==
        Json{{"name", "PASSWORD"},
             {"valueFrom",
              {{"secretKeyRef", {{"name", "resnet-session-credentials"}, {"key", "password"}}}}}});
    CHECK(TFClusterSpec::FromJson(s.ToJson()).session->password_env);
  }

  TEST_CASE("every object is owned by the root and labelled") {
    TFRenderOptions o;
    o.root_uid = "uid-1";
    auto objects = RenderTFCluster(GpuExample(), o);
    CHECK(objects[0]["kind"] == "ConfigMap");
    CHECK_FALSE(objects[0]["metadata"].contains("ownerReferences"));
    auto stored =
        TFClusterSpec::FromJson(Json::parse(objects[0]["data"]["spec.json"].get<std::string>()));
    CHECK(stored.ToJson() == GpuExample().ToJson());
    for (std::size_t i = 1; i < objects.size(); ++i) {
      CHECK(objects[i]["metadata"]["ownerReferences"][0]["uid"] == "uid-1");
      CHECK(objects[i]["metadata"]["labels"]["tfk8s.io/cluster"] == "resnet");
      CHECK(objects[i]["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "tfk8s");
      CHECK(objects[i]["metadata"]["labels"]["team"] == "vision");
      if (objects[i]["kind"] == "Service") {
        for (const auto& p : objects[i]["spec"]["ports"]) CHECK(p["protocol"] == "TCP");
      }
    }
  }

  TEST_CASE("owner: the tfk8s.io/owner label on every object, stored in the spec only when set") {
    TFClusterSpec s = GpuExample();
    CHECK_FALSE(s.ToJson().contains("owner"));  // stored specs of clusters without one unchanged
    for (const auto& o : RenderTFCluster(s)) {
      CHECK_FALSE(o["metadata"]["labels"].contains("tfk8s.io/owner"));
    }
    s.owner = "alice";
    CHECK(s.ToJson()["owner"] == "alice");
    CHECK(TFClusterSpec::FromJson(s.ToJson()).owner == "alice");
    auto objects = RenderTFCluster(s);
    REQUIRE(objects.size() > 5);
    for (const auto& o : objects) {
      CHECK_MESSAGE(o["metadata"]["labels"]["tfk8s.io/owner"] == "alice",
                    o["kind"].get<std::string>() << " " << o["metadata"]["name"]);
      static const Json::json_pointer kPodLabels("/spec/template/metadata/labels");
      if (o.contains(kPodLabels)) CHECK(o.at(kPodLabels)["tfk8s.io/owner"] == "alice");
    }
    s.owner = "Alice";  // a DNS-1123 label, like a DevInstance's owner
    CheckInvalid(s, "owner");
    s.owner = "alice";
    s.labels["tfk8s.io/owner"] = "bob";  // set through the field only
    CheckInvalid(s, "labels");
  }

  TEST_CASE("JSON round trip and YAML output") {
    for (const auto& spec : {SeedExample(), GpuExample()}) {
      CHECK(TFClusterSpec::FromJson(spec.ToJson()).ToJson() == spec.ToJson());
    }
    auto objects = RenderTFCluster(SeedExample());
    std::string yaml = ToYamlDocuments(objects);
    auto back = FromYamlDocuments(yaml);
    REQUIRE(back.size() == objects.size());
    for (std::size_t i = 0; i < objects.size(); ++i) CHECK(back[i] == objects[i]);
    CHECK_THROWS_AS(TFClusterSpec::FromJson({{"topology", "ring"}}), ValidationError);
    CHECK_THROWS_AS(TFClusterSpec::FromJson({{"worker", {{"replicas", "three"}}}}),
                    ValidationError);
  }

  TEST_CASE("validation names the field") {
    TFClusterSpec ok = GpuExample();
    ok.Validate();
    {
      auto s = ok;
      s.worker.replicas = 0;
      CheckInvalid(s, "worker.replicas");
    }
    {
      auto s = ok;
      s.ps.replicas = -1;
      CheckInvalid(s, "ps.replicas");
    }
    {
      auto s = ok;
      s.chief.replicas = 2;
      CheckInvalid(s, "chief.replicas");
    }
    {
      auto s = ok;
      s.evaluator.replicas = 2;
      CheckInvalid(s, "evaluator.replicas");
    }
    {
      auto s = ok;
      s.strategy = TFStrategy::kMultiWorkerMirrored;  // has ps
      CheckInvalid(s, "ps.replicas");
    }
    {
      auto s = ok;
      s.ps.replicas = 0;  // parameter-server strategy without ps
      CheckInvalid(s, "ps.replicas");
    }
    {
      auto s = ok;
      s.worker.resources.memory = "lots";
      CheckInvalid(s, "worker.resources.memory");
    }
    {
      auto s = ok;
      s.worker.resources.cpu_limit = "1";  // below the request of 8
      CheckInvalid(s, "worker.resources.cpuLimit");
    }
    {
      auto s = ok;
      s.launcher.barrier_timeout_seconds = -1;
      CheckInvalid(s, "launcher.barrierTimeoutSeconds");
    }
    {
      auto s = ok;
      s.launcher.python = "";
      s.ps.command.clear();  // a ps without a program runs a TensorFlow server: Python needed
      CheckInvalid(s, "launcher.python");
      s.ps.command = {"python", "ps.py"};
      s.Validate();  // every role has its program (the workers a script): no Python needed
    }
    {
      auto s = ok;
      s.worker.env.push_back({"TFK8S_BARRIER_TIMEOUT", "5"});
      CheckInvalid(s, "worker.env[1].name");
      s.launcher.enabled = false;  // then it is the user's own variable
      s.Validate();
    }
    {
      auto s = ok;
      s.name = std::string(60, 'a');
      CheckInvalid(s, "name");
    }
    {
      auto s = ok;
      s.name = "Bad_Name";
      CheckInvalid(s, "name");
    }
    {
      auto s = ok;
      s.placement.private_name.clear();
      CheckInvalid(s, "placement.privateName");
    }
    {
      auto s = ok;
      s.worker.port = 70000;
      CheckInvalid(s, "worker.port");
    }
    {
      auto s = ok;
      s.worker.env = {{"TF_CONFIG", "x"}};
      CheckInvalid(s, "worker.env[0].name");  // the same field naming as every workload's env
    }
    {
      auto s = ok;
      s.storage->mount_path = "data";
      CheckInvalid(s, "storage.mountPath");
    }
    {
      auto s = ok;
      s.session->ssh_port = 8888;
      CheckInvalid(s, "session.sshPort");
    }
    {
      // A StatefulSet name must leave room for the controller-revision-hash label.
      auto s = SeedExample();
      s.name = std::string(46, 'a');  // "<name>-worker" = 53 > 52
      CHECK_THROWS_AS(s.Validate(), ValidationError);
    }
    // Validation runs before rendering: nothing is produced for a bad spec.
    auto bad = ok;
    bad.worker.replicas = 0;
    CHECK_THROWS_AS(RenderTFCluster(bad), ValidationError);
  }

  TEST_CASE("spread: each role's replicas kept apart by hostname, next to the node affinity") {
    const Json::json_pointer anti("/affinity/podAntiAffinity");
    for (TFTopology topology : {TFTopology::kPerReplica, TFTopology::kStatefulSet}) {
      for (TFSpread spread : {TFSpread::kNone, TFSpread::kPreferred, TFSpread::kRequired}) {
        CAPTURE(ToString(topology));
        CAPTURE(ToString(spread));
        TFClusterSpec s = GpuExample();
        s.topology = topology;
        s.spread = spread;
        std::set<std::string> roles;
        for (const auto& o : RenderTFCluster(s)) {
          if (!o.contains(Json::json_pointer("/spec/template/spec"))) continue;
          const std::string role = o["metadata"]["labels"]["tfk8s.io/role"];
          CAPTURE(role);
          const Json& pod = o["spec"]["template"]["spec"];
          // The placement's node affinity stays whatever the spread.
          CHECK(pod["affinity"].contains("nodeAffinity"));
          if (role == "session" || role == "tensorboard" || spread == TFSpread::kNone) {
            CHECK_FALSE(pod.contains(anti));
            continue;
          }
          roles.insert(role);
          const Json term = {
              {"labelSelector",
               {{"matchLabels", {{"tfk8s.io/cluster", "resnet"}, {"tfk8s.io/role", role}}}}},
              {"topologyKey", "kubernetes.io/hostname"}};
          // The selector matches the pod's own labels: its role's other replicas.
          for (const auto& [k, v] : term["labelSelector"]["matchLabels"].items()) {
            CHECK(o["spec"]["template"]["metadata"]["labels"][k] == v);
          }
          if (spread == TFSpread::kRequired) {
            CHECK(pod.at(anti) ==
                  Json{{"requiredDuringSchedulingIgnoredDuringExecution", Json::array({term})}});
          } else {
            CHECK(pod.at(anti) ==
                  Json{{"preferredDuringSchedulingIgnoredDuringExecution",
                        Json::array({{{"weight", 100}, {"podAffinityTerm", term}}})}});
          }
        }
        // Every role alike, the single chief and evaluator too.
        if (spread != TFSpread::kNone) {
          CHECK(roles == std::set<std::string>{"ps", "worker", "chief", "evaluator"});
        }
      }
    }
  }

  TEST_CASE("spread: the StatefulSet topology's pod template carries both affinities") {
    TFClusterSpec s = SeedExample();
    s.spread = TFSpread::kPreferred;
    auto objects = RenderTFCluster(s);
    const Json& affinity = (*Find(objects, "StatefulSet",
                                  "tf-dis-task-worker"))["spec"]["template"]["spec"]["affinity"];
    CHECK(affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                  ["nodeSelectorTerms"][0]["matchExpressions"]
                      .size() == 3);  // nodetype, cputype, pooltype
    const Json& preferred =
        affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"];
    REQUIRE(preferred.size() == 1);
    CHECK(preferred[0]["weight"] == 100);
    CHECK(preferred[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname");
    CHECK(preferred[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] ==
          Json{{"tfk8s.io/cluster", "tf-dis-task"}, {"tfk8s.io/role", "worker"}});
    CHECK_FALSE(
        affinity["podAntiAffinity"].contains("requiredDuringSchedulingIgnoredDuringExecution"));
    // Without a node affinity (any node), the anti-affinity alone.
    s.placement = Placement{};
    s.placement.nodetype = "";
    s.placement.pool = "";
    s.spread = TFSpread::kRequired;
    auto any_node = RenderTFCluster(s);
    const Json& alone =
        (*Find(any_node, "StatefulSet", "tf-dis-task-ps"))["spec"]["template"]["spec"]["affinity"];
    CHECK_FALSE(alone.contains("nodeAffinity"));
    CHECK(alone["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
               ["labelSelector"]["matchLabels"]["tfk8s.io/role"] == "ps");
  }

  TEST_CASE("spread: stored only when set, read back, a bad value names the field") {
    TFClusterSpec s = GpuExample();
    CHECK_FALSE(s.ToJson().contains("spread"));  // stored specs and golden files unchanged
    for (TFSpread spread : {TFSpread::kPreferred, TFSpread::kRequired}) {
      s.spread = spread;
      CHECK(s.ToJson()["spread"] == ToString(spread));
      CHECK(TFClusterSpec::FromJson(s.ToJson()).spread == spread);
      CHECK(ParseTFSpread(ToString(spread)) == spread);
    }
    Json written = GpuExample().ToJson();
    written["spread"] = "none";  // written out at its default, still a field
    CHECK(TFClusterSpec::FromJson(written).spread == TFSpread::kNone);
    written["spread"] = "sideways";
    try {
      (void)TFClusterSpec::FromJson(written);
      FAIL("expected ValidationError");
    } catch (const ValidationError& e) {
      CHECK(e.field() == "spread");
      CHECK(e.value() == "sideways");
      CHECK(std::string(e.what()).find("none, preferred or required") != std::string::npos);
    }
    CHECK_THROWS_AS(ParseTFSpread(""), ValidationError);
  }

  TEST_CASE("storage: TFK8S_CHECKPOINT_DIR in every replica, TFK8S_LOG_DIR with the launcher") {
    for (TFTopology topology : {TFTopology::kPerReplica, TFTopology::kStatefulSet}) {
      for (bool launcher : {true, false}) {
        CAPTURE(ToString(topology));
        CAPTURE(launcher);
        TFClusterSpec s = GpuExample();
        s.topology = topology;
        s.launcher.enabled = launcher;
        s.storage->mount_path = "/mnt/shared/";  // a trailing slash is not doubled
        int replicas = 0;
        for (const auto& o : RenderTFCluster(s)) {
          if (!o.contains(Json::json_pointer("/spec/template/spec"))) continue;
          const std::string role = o["metadata"]["labels"]["tfk8s.io/role"];
          CAPTURE(role);
          const Json& c = o["spec"]["template"]["spec"]["containers"][0];
          if (role == "session" || role == "tensorboard") {
            CHECK(EnvOf(c, "TFK8S_CHECKPOINT_DIR") == "<unset>");
            CHECK(EnvOf(c, "TFK8S_LOG_DIR") == "<unset>");
            continue;
          }
          ++replicas;
          CHECK(EnvOf(c, "TFK8S_CHECKPOINT_DIR") == "/mnt/shared/.tfk8s/resnet/checkpoints");
          CHECK(EnvOf(c, "TFK8S_LOG_DIR") ==
                (launcher ? "/mnt/shared/.tfk8s/resnet/logs" : "<unset>"));
          // With tfk8s's own variables, before the role's env.
          if (role == "worker") CHECK(c["env"].back() == Json{{"name", "EPOCHS"}, {"value", "10"}});
        }
        CHECK(replicas == (topology == TFTopology::kPerReplica ? 6 : 4));
      }
    }
    // Without storage, neither.
    TFClusterSpec none = GpuExample();
    none.storage.reset();
    for (const auto& o : RenderTFCluster(none)) {
      if (!o.contains(Json::json_pointer("/spec/template/spec"))) continue;
      const Json& c = o["spec"]["template"]["spec"]["containers"][0];
      CHECK(EnvOf(c, "TFK8S_CHECKPOINT_DIR") == "<unset>");
      CHECK(EnvOf(c, "TFK8S_LOG_DIR") == "<unset>");
    }
    // A role may not set them itself while tfk8s does (the list of env names is a map).
    TFClusterSpec own = GpuExample();
    own.worker.env.push_back({"TFK8S_CHECKPOINT_DIR", "/elsewhere"});
    CheckInvalid(own, "worker.env[1].name");
    own.worker.env.back().name = "TFK8S_LOG_DIR";
    CheckInvalid(own, "worker.env[1].name");
    own.launcher.enabled = false;  // then TFK8S_LOG_DIR is the user's own
    own.Validate();
    own.worker.env.back().name = "TFK8S_CHECKPOINT_DIR";
    own.storage.reset();
    own.Validate();  // no storage: the user's own too
  }
}
