// DevInstance: validation, JSON round trip, rendering (golden files), secrets kept out of the
// pod spec, tcp-services allocation, sharing grants, status computation, and the pre-request
// mount check over a fake transport. No server.
#include <doctest/doctest.h>

#include <map>
#include <mutex>
#include <set>

#include "fake_transport.hpp"
#include "golden.hpp"
#include "http/crypto.hpp"
#include "kubelet_expansion.hpp"
#include "tfk8s/devinstance.hpp"
#include "workloads/common.hpp"
#include "workloads/devinstance_internal.hpp"

using namespace tfk8s;
using tfk8s::testing::CheckGolden;
using tfk8s::testing::FakeTransport;
using tfk8s::testing::Respond;

namespace {

// Fixed material so the golden files are stable (a real start draws it from the CSPRNG).
DevCredentials FixedCredentials() {
  DevCredentials c;
  c.password = "golden-password-0123456789abcdef";
  c.jupyter_hash = "argon2:" + internal::Argon2idHash(c.password, "goldensaltgolden");
  c.jupyter_fallback_hash = internal::JupyterPasswordHash(c.password, "0123456789abcdef");
  c.ssh_hash = internal::Sha512Crypt(c.password, "goldensaltgolden");
  return c;
}

DevInstanceSpec CpuSpec() {
  DevInstanceSpec s;
  s.owner = "alice";
  s.name = "notebook-test";
  s.namespace_name = "team-a";
  s.labels = {{"team", "vision"}};
  s.image = "registry.example.com/goblinlab/tensorflow:2.4.0-cpu";
  s.resources = {"4", "16Gi", "", "", 0};
  s.env = {{"SPARK_HOME", "/opt/spark"}};
  s.tools.custom_ports = {{"web", 8000}};
  s.mounts = {{"bob-datasets", "/data/datasets", true, ""},
              {"team-a-shared", "/data/shared", false, "alice"}};
  s.placement.cputype = "xeon-gold";
  s.expose.backend = DevExposure::kIngressTcp;
  s.expose.external_host = "lab.example.com";
  return s;
}

DevInstanceSpec GpuSpec() {
  DevInstanceSpec s;
  s.owner = "bob";
  s.name = "bob-gpu";
  s.namespace_name = "team-b";
  s.image = "registry.example.com/goblinlab/tensorflow:2.4.0-gpu";
  s.pod.image_pull_secrets = {"registrykey-myhub"};
  s.resources = {"8", "32Gi", "16", "64Gi", 2};
  s.hadoop_user = "hadoop-bob";
  s.tools.code_server = false;
  s.home.size = "50Gi";
  s.home.storage_class = "fast-ssd";
  s.placement.gputype = "v100";
  s.security.ssh_password_login = false;
  s.security.ssh_authorized_keys = {
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly bob@laptop"};
  s.expose.backend = DevExposure::kNodePort;
  s.expose.tools = {"jupyter", "ssh", "tensorboard"};
  s.pod_annotations = {{"sim.tfk8s.io/log-lines", "hello"}};
  s.idle = DevIdlePolicy{std::chrono::minutes(90), DevIdleAction::kStop};
  return s;
}

Json Rendered(const DevInstanceSpec& spec) {
  DevRenderOptions o;
  o.root_uid = "0b6f4c1e-0000-4000-8000-000000000001";
  o.credentials = FixedCredentials();
  return Json(RenderDevInstance(spec, o));
}

const Json* Find(const Json& objects, const std::string& kind, const std::string& name) {
  for (const auto& o : objects) {
    if (o["kind"] == kind && o["metadata"]["name"] == name) return &o;
  }
  return nullptr;
}

// Runs `f` expecting ValidationError on `field`.
template <typename F>
void ExpectInvalid(F f, const std::string& field, const std::string& why_part = "") {
  try {
    f();
    FAIL("expected ValidationError on " << field);
  } catch (const ValidationError& e) {
    CHECK(e.field() == field);
    if (!why_part.empty()) {
      CHECK_MESSAGE(std::string(e.what()).find(why_part) != std::string::npos, e.what());
    }
  }
}

ClientConfig TestConfig() {
  ClientConfig c;
  c.server = "https://127.0.0.1:6443";
  c.token = "t";
  c.rate_limit.qps = 0;
  return c;
}

}  // namespace

TEST_SUITE("devinstance") {
  TEST_CASE("the start script and a user's command reach the container verbatim") {
    const std::map<std::string, std::string> env = {{"PASSWORD", "secret"}, {"HOME", "/root"}};
    DevInstanceSpec s = CpuSpec();
    auto command = [&](const DevInstanceSpec& spec) {
      return RenderDevInstance(spec)
          .front()["spec"]["template"]["spec"]["containers"][0]["command"]
          .get<std::vector<std::string>>();
    };
    // The script uses $((…)) and ${…}: escaped, the kubelet hands it over unchanged.
    CHECK(testing::KubeletExpand(command(s), env) ==
          std::vector<std::string>{"/bin/sh", "-c", internal::DevStartScript()});
    s.command = {"/start.sh", "$(PASSWORD)", "$$"};
    CHECK(testing::KubeletExpand(command(s), env) == s.command);
    s.expand_variable_references = true;  // asked for: the kubelet expands it
    CHECK(testing::KubeletExpand(command(s), env) ==
          std::vector<std::string>{"/start.sh", "secret", "$"});
    CHECK(DevInstanceSpec::FromJson(s.ToJson()).expand_variable_references);
  }

  TEST_CASE("golden: CPU instance with shared mounts and ingress exposure") {
    CheckGolden("devinstance_cpu", Rendered(CpuSpec()));
  }

  TEST_CASE("golden: GPU instance with keys only and NodePort exposure") {
    CheckGolden("devinstance_gpu", Rendered(GpuSpec()));
  }

  TEST_CASE("golden: an instance with a priority class") {
    DevInstanceSpec s;
    s.owner = "carol";
    s.name = "carol-lab";
    s.namespace_name = "team-a";
    s.image = "registry.example.com/goblinlab/tensorflow:2.4.0-cpu";
    s.resources = {"2", "8Gi", "", "", 0};
    s.tools.code_server = false;
    s.pod.priority_class = "interactive";
    const Json objects = Rendered(s);
    CheckGolden("devinstance_priority_class", objects);
    const Json* sts = Find(objects, "StatefulSet", "carol-lab");
    REQUIRE(sts);
    CHECK((*sts)["spec"]["template"]["spec"]["priorityClassName"] == "interactive");
    CHECK(DevInstanceSpec::FromJson(s.ToJson()).pod.priority_class == "interactive");
  }

  TEST_CASE("launchWorkloads: its own service account, a namespaced Role and a RoleBinding") {
    DevInstanceSpec s = CpuSpec();
    s.launch_workloads = true;
    DevRenderOptions o;
    o.root_uid = "sts-uid";
    auto objects = RenderDevInstance(s, o);
    auto find = [&](const std::string& kind) -> const Json* {
      for (const auto& x : objects) {
        if (x["kind"] == kind) return &x;
      }
      return nullptr;
    };
    const Json* sa = find("ServiceAccount");
    const Json* role = find("Role");
    const Json* binding = find("RoleBinding");
    REQUIRE(sa);
    REQUIRE(role);
    REQUIRE(binding);
    CHECK((*sa)["metadata"]["name"] == "notebook-test");
    CHECK((*role)["metadata"]["name"] == "notebook-test-workloads");
    for (const Json* x : {sa, role, binding}) {
      CHECK((*x)["metadata"]["namespace"] == "team-a");
      CHECK((*x)["metadata"]["ownerReferences"][0]["uid"] == "sts-uid");
    }
    CHECK((*binding)["roleRef"] == Json{{"apiGroup", "rbac.authorization.k8s.io"},
                                        {"kind", "Role"},
                                        {"name", "notebook-test-workloads"}});
    CHECK((*binding)["subjects"] ==
          Json::array(
              {{{"kind", "ServiceAccount"}, {"name", "notebook-test"}, {"namespace", "team-a"}}}));
    CHECK((*role)["rules"] == DevInstanceWorkloadRules());
    // Least privilege: nothing cluster-scoped, no RBAC, no exec, pods only read.
    std::set<std::string> granted;
    for (const auto& rule : DevInstanceWorkloadRules()) {
      for (const auto& r : rule["resources"]) {
        for (const auto& v : rule["verbs"])
          granted.insert(r.get<std::string>() + ":" + v.get<std::string>());
      }
      CHECK_FALSE(rule["apiGroups"][0] == "rbac.authorization.k8s.io");
    }
    CHECK(granted.count("jobs:create"));
    CHECK(granted.count("configmaps:delete"));
    CHECK(granted.count("pods/log:get"));
    CHECK_FALSE(granted.count("pods:create"));
    CHECK_FALSE(granted.count("pods/exec:create"));
    CHECK_FALSE(granted.count("nodes:list"));
    // Secrets by name only (the namespace is personal: they are all the owner's): created,
    // read, replaced with a resourceVersion, deleted; never listed, watched or patched.
    for (const char* verb : {"get", "create", "update", "delete"}) {
      CAPTURE(verb);
      CHECK(granted.count(std::string("secrets:") + verb));
    }
    for (const char* verb : {"list", "watch", "patch"}) {
      CAPTURE(verb);
      CHECK_FALSE(granted.count(std::string("secrets:") + verb));
    }
    CHECK_FALSE(granted.count("pods/portforward:create"));
    CHECK_FALSE(granted.count("namespaces:get"));
    const Json& pod = objects[0]["spec"]["template"]["spec"];
    CHECK(pod["serviceAccountName"] == "notebook-test");
    CHECK(pod["automountServiceAccountToken"] == true);
    // Stored only when set, and read back.
    CHECK(s.ToJson()["launchWorkloads"] == true);
    CHECK_FALSE(CpuSpec().ToJson().contains("launchWorkloads"));
    CHECK(DevInstanceSpec::FromJson(s.ToJson()).launch_workloads);
    // Without it: none of the three, no token.
    for (const auto& x : RenderDevInstance(CpuSpec(), o)) CHECK(x["kind"] != "Role");
    s.pod.service_account = "someone";
    CHECK_THROWS_AS(s.Validate(), ValidationError);
  }

  TEST_CASE("credentialReaders: a Role reading only this instance's Secret, bound to them") {
    DevInstanceSpec s = CpuSpec();
    s.security.credential_readers = {
        {"User", "alice", ""}, {"ServiceAccount", "alice-sa", ""}, {"Group", "team-a-admins", ""}};
    DevRenderOptions o;
    o.root_uid = "sts-uid";
    const Json* role = nullptr;
    const Json* binding = nullptr;
    auto objects = RenderDevInstance(s, o);
    for (const auto& x : objects) {
      if (x["kind"] == "Role") role = &x;
      if (x["kind"] == "RoleBinding") binding = &x;
    }
    REQUIRE(role);
    REQUIRE(binding);
    CHECK((*role)["metadata"]["name"] == "notebook-test-credentials-reader");
    CHECK((*role)["metadata"]["ownerReferences"][0]["uid"] == "sts-uid");
    CHECK((*role)["rules"] == Json::parse(R"([{"apiGroups": [""], "resources": ["secrets"],
        "resourceNames": ["notebook-test-credentials"], "verbs": ["get"]}])"));
    CHECK((*binding)["roleRef"]["name"] == "notebook-test-credentials-reader");
    CHECK((*binding)["subjects"] == Json::parse(R"([
        {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "ServiceAccount", "name": "alice-sa", "namespace": "team-a"},
        {"kind": "Group", "name": "team-a-admins", "apiGroup": "rbac.authorization.k8s.io"}])"));
    // The home PVC stays last (Create takes it from the back).
    CHECK(objects.back()["kind"] == "PersistentVolumeClaim");
    // Stored only when set, and read back.
    CHECK(s.ToJson()["security"]["credentialReaders"].size() == 3);
    CHECK_FALSE(CpuSpec().ToJson()["security"].contains("credentialReaders"));
    CHECK(DevInstanceSpec::FromJson(s.ToJson()).security.credential_readers ==
          s.security.credential_readers);
    // A bare name is a user.
    Json j = CpuSpec().ToJson();
    j["security"]["credentialReaders"] = Json::parse(R"([{"name": "bob"}])");
    CHECK(DevInstanceSpec::FromJson(j).security.credential_readers ==
          std::vector<RbacSubject>{{"User", "bob", ""}});
    // Bad subjects name the field.
    auto refused = [&](RbacSubject r, const std::string& field) {
      DevInstanceSpec bad = CpuSpec();
      bad.security.credential_readers = {std::move(r)};
      try {
        bad.Validate();
        FAIL("accepted a bad credential reader");
      } catch (const ValidationError& e) {
        CHECK(e.field() == field);
      }
    };
    refused({"Robot", "r2", ""}, "security.credentialReaders[0].kind");
    refused({"User", "", ""}, "security.credentialReaders[0].name");
    refused({"ServiceAccount", "Not_A_Name", ""}, "security.credentialReaders[0].name");
    refused({"User", "alice", "team-a"}, "security.credentialReaders[0].namespace");
    // Without readers: no Role at all.
    for (const auto& x : RenderDevInstance(CpuSpec(), o)) CHECK(x["kind"] != "Role");
  }

  TEST_CASE("rendering: the shape GoblinLab needs") {
    Json objects = Rendered(CpuSpec());
    REQUIRE(objects.size() == 4);  // StatefulSet, Service, Secret, home PVC
    const Json* sts = Find(objects, "StatefulSet", "notebook-test");
    REQUIRE(sts);
    CHECK((*sts)["spec"]["replicas"] == 1);
    const Json& pod = (*sts)["spec"]["template"]["spec"];
    CHECK(pod["automountServiceAccountToken"] == false);
    CHECK_FALSE(pod.contains("tolerations"));
    const Json& c = pod["containers"][0];
    CHECK(c["resources"]["requests"] == c["resources"]["limits"]);  // requests = limits
    std::map<std::string, Json> env;
    for (const auto& e : c["env"]) env[e["name"]] = e;
    CHECK(env["NOTEBOOK_TAG"]["value"] == "notebook-test");
    CHECK(env["HADOOP_USER"]["value"] == "alice");
    // tfk8s's start script reads the credentials from files: no process gets the password in
    // its environment (it would stay readable in /proc/<pid>/environ).
    CHECK_FALSE(env.count("PASSWORD"));
    CHECK_FALSE(env.count("TFK8S_READINESS_TOOL"));  // every tool is required, not the first
    // An image's own start script reads the password from a root-only file by default...
    DevInstanceSpec own = CpuSpec();
    own.command = {"/start.sh"};
    auto own_env_of = [](const DevInstanceSpec& spec) {
      std::map<std::string, Json> out;
      const Json pod = RenderDevInstance(spec).front()["spec"]["template"]["spec"];
      for (const auto& e : pod["containers"][0]["env"]) out[e["name"]] = e;
      return std::make_pair(out, pod);
    };
    auto [own_env, own_pod] = own_env_of(own);
    CHECK_FALSE(own_env.count("PASSWORD"));
    CHECK(own_env["TFK8S_PASSWORD_FILE"]["value"] == "/var/run/tfk8s/credentials/password");
    CHECK_FALSE(own_env.count("TFK8S_READINESS_TOOL"));
    const Json& own_volume = own_pod["volumes"].back();
    REQUIRE(own_volume["name"] == "credentials");
    CHECK(own_volume["secret"]["defaultMode"] == 0400);
    CHECK(own_volume["secret"]["items"].back() == Json{{"key", "password"}, {"path", "password"}});
    // ... and as PASSWORD (GoblinLab's images) only when asked: by reference, never a value.
    own.security.password_env = true;
    auto [env_too, unused] = own_env_of(own);
    CHECK(env_too["PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "notebook-test-credentials");
    CHECK_FALSE(env_too["PASSWORD"].contains("value"));
    CHECK(env_too.count("TFK8S_PASSWORD_FILE"));
    // tfk8s's own script never gets the plaintext file: every tool verifies a hash.
    DevInstanceSpec all_tools = CpuSpec();
    all_tools.tools.code_server = true;
    const Json tools_pod = RenderDevInstance(all_tools).front()["spec"]["template"]["spec"];
    for (const auto& item : tools_pod["volumes"].back()["secret"]["items"]) {
      CHECK(item["key"] != "password");
    }

    const Json* svc = Find(objects, "Service", "notebook-test");
    REQUIRE(svc);
    CHECK((*svc)["spec"]["clusterIP"] == "None");
    std::set<int> ports;
    for (const auto& p : (*svc)["spec"]["ports"]) {
      CHECK(p["protocol"] == "TCP");
      ports.insert(p["port"].get<int>());
    }
    CHECK(ports == std::set<int>{8888, 22, 8080, 6006, 8000});

    const Json* home = Find(objects, "PersistentVolumeClaim", "alice-home");
    REQUIRE(home);
    CHECK_FALSE(home->at("metadata").contains("ownerReferences"));
    CHECK_FALSE(home->at("metadata")["labels"].contains("tfk8s.io/instance"));
    const Json* secret = Find(objects, "Secret", "notebook-test-credentials");
    REQUIRE(secret);
    CHECK(secret->at("metadata")["ownerReferences"][0]["kind"] == "StatefulSet");

    // GPU: requests = limits for the GPU, the toleration, gputype instead of cputype.
    Json gpu = Rendered(GpuSpec());
    const Json& gpod = Find(gpu, "StatefulSet", "bob-gpu")->at("spec")["template"]["spec"];
    CHECK(gpod["tolerations"][0]["key"] == "nvidia.com/gpu");
    const Json& res = gpod["containers"][0]["resources"];
    CHECK(res["requests"]["nvidia.com/gpu"] == "2");
    CHECK(res["limits"]["nvidia.com/gpu"] == "2");
    CHECK(res["limits"]["cpu"] == "16");
    CHECK(gpod["imagePullSecrets"][0]["name"] == "registrykey-myhub");
    const Json* np = Find(gpu, "Service", "bob-gpu-nodeport");
    REQUIRE(np);
    CHECK(np->at("spec")["type"] == "NodePort");
    CHECK(np->at("spec")["ports"].size() == 3);

    // Stopped: replicas 0. Without credentials: no Secret at all.
    DevRenderOptions stopped;
    stopped.running = false;
    auto plain = RenderDevInstance(CpuSpec(), stopped);
    CHECK(plain.front()["spec"]["replicas"] == 0);
    for (const auto& o : plain) CHECK(o["kind"] != "Secret");
  }

  TEST_CASE("no secret material outside the Secret: not in the StatefulSet, nor in YAML") {
    for (const auto& spec : {CpuSpec(), GpuSpec()}) {
      DevCredentials creds = DevCredentials::Generate();
      DevRenderOptions o;
      o.credentials = creds;
      auto objects = RenderDevInstance(spec, o);
      for (const auto& obj : objects) {
        std::string text = obj.dump();
        if (obj["kind"] == "Secret") {
          CHECK(text.find(creds.password) == std::string::npos);  // base64, not plain
          continue;
        }
        CHECK(text.find(creds.password) == std::string::npos);
        CHECK(text.find(creds.jupyter_hash) == std::string::npos);
        CHECK(text.find(creds.ssh_hash) == std::string::npos);
      }
      DevInstance inst(Client(TestConfig()), spec);
      CHECK(inst.ToYaml().find("kind: Secret") == std::string::npos);
    }
    DevCredentials creds = DevCredentials::Generate();
    CHECK(creds.password.size() == 32);
    CHECK(creds.ToString().find(creds.password) == std::string::npos);
    CHECK(creds.ToString().find("REDACTED") != std::string::npos);
    DevStartResult r;
    r.password = creds.password;
    CHECK(r.ToString().find(creds.password) == std::string::npos);
  }

  TEST_CASE("validation: port clash") {
    auto spec = CpuSpec();
    spec.tools.custom_ports = {{"web", 8888}};
    ExpectInvalid([&] { spec.Validate(); }, "tools.customPorts[0].port",
                  "clashes with the jupyter");
    spec = CpuSpec();
    spec.tools.code_server_port = 22;
    ExpectInvalid([&] { spec.Validate(); }, "tools.codeServerPort", "clashes with the ssh");
    spec = CpuSpec();
    spec.tools.custom_ports = {{"web", 9000}, {"web", 9001}};
    ExpectInvalid([&] { spec.Validate(); }, "tools.customPorts[1].name", "used twice");
    spec = CpuSpec();
    spec.tools.custom_ports = {{"jupyter", 9000}};
    ExpectInvalid([&] { spec.Validate(); }, "tools.customPorts[0].name", "built-in");
    spec = CpuSpec();
    spec.tools.custom_ports = {{"Web_UI", 9000}};
    ExpectInvalid([&] { spec.Validate(); }, "tools.customPorts[0].name", "IANA");
    spec = CpuSpec();
    spec.tools.jupyter = false;  // a disabled tool's port is free
    spec.tools.custom_ports = {{"web", 8888}};
    CHECK_NOTHROW(spec.Validate());
  }

  TEST_CASE("validation: bad mounts") {
    auto spec = CpuSpec();
    spec.mounts[0].mount_path = "data";
    ExpectInvalid([&] { spec.Validate(); }, "mounts[0].mountPath", "absolute");
    spec = CpuSpec();
    spec.mounts[1].mount_path = "/root";
    ExpectInvalid([&] { spec.Validate(); }, "mounts[1].mountPath", "mounted twice");
    spec = CpuSpec();
    spec.mounts[1].mount_path = "/data/datasets/";
    ExpectInvalid([&] { spec.Validate(); }, "mounts[1].mountPath", "mounted twice");
    spec = CpuSpec();
    spec.mounts[0].mount_path = "/var/run/tfk8s/credentials";
    ExpectInvalid([&] { spec.Validate(); }, "mounts[0].mountPath", "mounted twice");
    spec = CpuSpec();
    spec.mounts[1].sub_path = "../bob";
    ExpectInvalid([&] { spec.Validate(); }, "mounts[1].subPath");
    spec = CpuSpec();
    spec.mounts[0].claim = "Bad_Claim";
    ExpectInvalid([&] { spec.Validate(); }, "mounts[0].claim");
    spec = CpuSpec();
    spec.mounts[0].claim = "alice-home";
    ExpectInvalid([&] { spec.Validate(); }, "mounts[0].claim", "home volume");
  }

  TEST_CASE("validation: everything else names the field") {
    auto check = [](auto mutate, const std::string& field) {
      auto spec = CpuSpec();
      mutate(spec);
      ExpectInvalid([&] { spec.Validate(); }, field);
    };
    check([](DevInstanceSpec& s) { s.owner = "Alice"; }, "owner");
    check([](DevInstanceSpec& s) { s.name = std::string(53, 'a'); }, "name");
    check([](DevInstanceSpec& s) { s.resources.cpu = ""; }, "resources.cpu");
    check([](DevInstanceSpec& s) { s.resources.memory = "lots"; }, "resources.memory");
    check([](DevInstanceSpec& s) { s.resources.cpu_limit = "2"; }, "resources.cpuLimit");
    check([](DevInstanceSpec& s) { s.resources.gpus = -1; }, "resources.gpus");
    check([](DevInstanceSpec& s) { s.env.push_back({"PASSWORD", "x"}); }, "env[1].name");
    check([](DevInstanceSpec& s) { s.env.push_back({"TFK8S_HOME", "x"}); }, "env[1].name");
    check([](DevInstanceSpec& s) { s.env.push_back({"1BAD", "x"}); }, "env[1].name");
    check([](DevInstanceSpec& s) { s.env.push_back({"SPARK_HOME", "x"}); }, "env[1].name");
    check([](DevInstanceSpec& s) { s.tools.ssh_port = 70000; }, "tools.sshPort");
    check([](DevInstanceSpec& s) { s.time_zone = "../../etc/shadow"; }, "timeZone");
    check([](DevInstanceSpec& s) { s.time_zone = "Europe/Berlin extra"; }, "timeZone");
    check(
        [](DevInstanceSpec& s) {
          s.time_zone = "Europe/Berlin";
          s.host_localtime = true;
        },
        "timeZone");
    check(
        [](DevInstanceSpec& s) {
          s.time_zone = "UTC";
          s.env.push_back({"TZ", "Asia/Tokyo"});
        },
        "env[1].name");
    check([](DevInstanceSpec& s) { s.image = ""; }, "image");
    check([](DevInstanceSpec& s) { s.pod.image_pull_policy = "Sometimes"; }, "imagePullPolicy");
    check([](DevInstanceSpec& s) { s.labels["tfk8s.io/owner"] = "mallory"; }, "labels");
    check([](DevInstanceSpec& s) { s.placement.pool = "unshared"; }, "placement.privateName");
    check([](DevInstanceSpec& s) { s.home.access_modes = {"ReadWriteSometimes"}; },
          "home.accessModes");
    check([](DevInstanceSpec& s) { s.expose.tools = {"vnc"}; }, "expose.tools[0]");
    check([](DevInstanceSpec& s) { s.expose.port_max = 100; }, "expose.portMax");
    check(
        [](DevInstanceSpec& s) {
          s.security.ssh_password_login = false;
          s.security.ssh_authorized_keys.clear();
        },
        "security.sshPasswordLogin");
    check([](DevInstanceSpec& s) { s.security.ssh_authorized_keys = {"not a key"}; },
          "security.sshAuthorizedKeys[0]");
    check([](DevInstanceSpec& s) { s.tools.jupyter = s.tools.ssh = s.tools.code_server = false; },
          "expose.tools");  // exposure on, nothing authenticated to expose
  }

  TEST_CASE("time zone: TZ by default, the node's /etc/localtime only when asked") {
    auto volumes_of = [](const DevInstanceSpec& spec) {
      std::vector<std::string> host_paths;
      const std::vector<Json> objects = RenderDevInstance(spec);
      const Json& pod = objects.front()["spec"]["template"]["spec"];
      for (const auto& v : pod["volumes"]) {
        if (v.contains("hostPath")) host_paths.push_back(v["hostPath"]["path"]);
      }
      return host_paths;
    };
    auto env_of = [](const DevInstanceSpec& spec) {
      std::map<std::string, std::string> env;
      const std::vector<Json> objects = RenderDevInstance(spec);
      const Json& c = objects.front()["spec"]["template"]["spec"]["containers"][0];
      for (const auto& e : c["env"]) env[e["name"]] = e.value("value", "");
      return env;
    };
    DevInstanceSpec spec = CpuSpec();
    CHECK_FALSE(spec.host_localtime);
    CHECK(volumes_of(spec).empty());  // no hostPath: Pod Security "baseline" admits the pod
    CHECK_FALSE(env_of(spec).count("TZ"));
    spec.time_zone = "America/Argentina/Buenos_Aires";
    CHECK(env_of(spec)["TZ"] == "America/Argentina/Buenos_Aires");
    CHECK(DevInstanceSpec::FromJson(spec.ToJson()).time_zone == spec.time_zone);
    CHECK_FALSE(CpuSpec().ToJson().contains("timeZone"));  // stored specs without it unchanged
    spec.time_zone.clear();
    spec.host_localtime = true;  // GoblinLab's way, still possible
    CHECK(volumes_of(spec) == std::vector<std::string>{"/etc/localtime"});
  }

  TEST_CASE("JSON round trip") {
    for (const auto& spec : {CpuSpec(), GpuSpec()}) {
      auto back = DevInstanceSpec::FromJson(spec.ToJson());
      CHECK(back.ToJson() == spec.ToJson());
    }
    ExpectInvalid(
        [] {
          DevInstanceSpec::FromJson({{"resources", {{"gpus", "two"}}}});
        },
        "resources.gpus");
    ExpectInvalid(
        [] {
          DevInstanceSpec::FromJson({{"expose", {{"backend", "vpn"}}}});
        },
        "expose.backend");
  }

  TEST_CASE("exposed tools: authenticated ones by default") {
    auto spec = CpuSpec();
    std::vector<std::string> names;
    for (const auto& p : internal::DevExposedPorts(spec)) names.push_back(p.name);
    CHECK(names == std::vector<std::string>{"jupyter", "ssh", "code-server"});
    spec.expose.tools = {"web", "jupyter"};
    names.clear();
    for (const auto& p : internal::DevExposedPorts(spec)) names.push_back(p.name);
    CHECK(names == std::vector<std::string>{"jupyter", "web"});
    spec.expose.backend = DevExposure::kNone;
    CHECK(internal::DevExposedPorts(spec).empty());
  }

  TEST_CASE("tcp-services: lowest free ports, idempotent, others untouched, release") {
    Json data = {{"20000", "kube-system/other:80"},
                 {"20002", "team-b/x:22:PROXY"},
                 {"not-a-port", "keep/me:1"}};
    bool changed = false;
    auto got =
        internal::AssignTcpPorts(&data, "team-a", "nb", {8888, 22, 8080}, 20000, 20010, &changed);
    CHECK(changed);
    CHECK(got == std::map<int, int>{{22, 20001}, {8080, 20003}, {8888, 20004}});
    CHECK(data["20001"] == "team-a/nb:22");
    CHECK(data["20004"] == "team-a/nb:8888");
    CHECK(data["20000"] == "kube-system/other:80");
    CHECK(data["not-a-port"] == "keep/me:1");
    CHECK(internal::TcpAssignments(data, "team-a", "nb") == got);

    // Again: nothing changes, the same ports come back.
    Json before = data;
    CHECK(internal::AssignTcpPorts(&data, "team-a", "nb", {8888, 22, 8080}, 20000, 20010,
                                   &changed) == got);
    CHECK_FALSE(changed);
    CHECK(data == before);

    // A tool no longer exposed gives its port back; a prefix-sharing service is not touched.
    data["20005"] = "team-a/nb-2:22";
    got = internal::AssignTcpPorts(&data, "team-a", "nb", {8888}, 20000, 20010, &changed);
    CHECK(changed);
    CHECK(got == std::map<int, int>{{8888, 20004}});
    CHECK_FALSE(data.contains("20001"));
    CHECK(data["20005"] == "team-a/nb-2:22");

    CHECK(internal::RemoveTcpPorts(&data, "team-a", "nb") == 1);
    CHECK(internal::TcpAssignments(data, "team-a", "nb").empty());
    CHECK(data["20005"] == "team-a/nb-2:22");

    // A full range is an error naming the range.
    Json full = {{"30000", "a/b:1"}, {"30001", "a/b:2"}};
    try {
      internal::AssignTcpPorts(&full, "team-a", "nb", {22}, 30000, 30001, &changed);
      FAIL("expected a full range");
    } catch (const DevInstanceFailed& e) {
      CHECK(std::string(e.what()).find("30000..30001") != std::string::npos);
    }
    Json null_data;
    got = internal::AssignTcpPorts(&null_data, "n", "s", {22}, 1, 5, &changed);
    CHECK(got.at(22) == 1);
  }

  TEST_CASE("tcp-services: a concurrent writer's Conflict makes the loser re-read, not collide") {
    // A scripted server holding one ConfigMap with a resourceVersion; another writer takes
    // port 20001 right after our first read, so our first (conditional) write must fail.
    std::mutex mu;
    Json data = {{"20000", "kube-system/other:80"}};
    int version = 1;
    int gets = 0;
    int puts = 0;
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      std::lock_guard lock(mu);
      auto cm = [&] {
        return Json{{"apiVersion", "v1"},
                    {"kind", "ConfigMap"},
                    {"metadata",
                     {{"name", "tcp-services"},
                      {"namespace", "ingress"},
                      {"resourceVersion", std::to_string(version)}}},
                    {"data", data}};
      };
      if (r.method == "GET") {
        Json answer = cm();
        if (++gets == 1) {
          data["20001"] = "team-b/rival:22";
          ++version;
        }
        return Respond(200, answer.dump());
      }
      REQUIRE(r.method == "PUT");
      ++puts;
      Json body = Json::parse(r.body);
      if (body["metadata"]["resourceVersion"] != std::to_string(version)) {
        return Respond(409, R"({"kind":"Status","reason":"Conflict","code":409,
            "message":"the object has been modified"})");
      }
      data = body["data"];
      ++version;
      return Respond(200, cm().dump());
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    DevExposeSpec x;
    x.configmap_namespace = "ingress";
    x.port_min = 20000;
    x.port_max = 20010;
    std::map<int, int> got;
    internal::UpdateTcpServices(
        client, x,
        [&](Json* d) {
          bool changed = false;
          got =
              internal::AssignTcpPorts(d, "team-a", "nb", {8888}, x.port_min, x.port_max, &changed);
          return changed;
        },
        true);
    CHECK(puts == 2);
    CHECK(gets == 2);
    CHECK(got == std::map<int, int>{{8888, 20002}});
    CHECK(data == Json{{"20000", "kube-system/other:80"},
                       {"20001", "team-b/rival:22"},
                       {"20002", "team-a/nb:8888"}});

    // Releasing from a missing ConfigMap is a no-op; allocating needs create_configmap.
    auto missing = std::make_shared<FakeTransport>([](const internal::HttpRequest&) {
      return Respond(404, R"({"kind":"Status","reason":"NotFound","code":404})");
    });
    Client none = internal::ClientOver(TestConfig(), missing);
    CHECK_NOTHROW(internal::UpdateTcpServices(
        none, x, [](Json*) { return true; }, false));
    CHECK_THROWS_AS(internal::UpdateTcpServices(
                        none, x, [](Json*) { return true; }, true),
                    NotFound);
  }

  TEST_CASE("sharing grants decide who may mount what") {
    Json pvc = {{"metadata",
                 {{"name", "bob-datasets"},
                  {"labels", {{"tfk8s.io/owner", "bob"}}},
                  {"annotations", {{"tfk8s.io/shared-with", R"({"alice":"ro","carol":"rw"})"}}}}}};
    CHECK(MountRefusal(pvc, "bob", false).empty());
    CHECK(MountRefusal(pvc, "alice", true).empty());
    CHECK(MountRefusal(pvc, "alice", false).find("read-only") != std::string::npos);
    CHECK(MountRefusal(pvc, "carol", false).empty());
    CHECK(MountRefusal(pvc, "mallory", true).find("not shared with mallory") != std::string::npos);
    auto grants = VolumeGrants(pvc);
    CHECK(grants.size() == 2);
    CHECK(grants["alice"] == DevShareMode::kReadOnly);
    // Malformed or unlabelled: nothing is granted (fail closed).
    pvc["metadata"]["annotations"]["tfk8s.io/shared-with"] = "alice=rw";
    CHECK(VolumeGrants(pvc).empty());
    CHECK_FALSE(MountRefusal(pvc, "alice", true).empty());
    Json bare = {{"metadata", {{"name", "loose"}}}};
    CHECK(MountRefusal(bare, "alice", true).find("no tfk8s.io/owner label") != std::string::npos);
  }

  TEST_CASE("mounting an unshared claim fails before any write") {
    // The server has bob's claim, shared with nobody; alice asks to mount it.
    auto fake = std::make_shared<FakeTransport>([](const internal::HttpRequest& r) {
      if (r.method == "GET" &&
          r.url.find("/persistentvolumeclaims/bob-datasets") != std::string::npos) {
        return Respond(200, R"({"kind":"PersistentVolumeClaim","metadata":{"name":"bob-datasets",
            "labels":{"tfk8s.io/owner":"bob"}}})");
      }
      return Respond(404, R"({"kind":"Status","reason":"NotFound","code":404})");
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    auto spec = CpuSpec();
    spec.mounts = {{"bob-datasets", "/data", true, ""}};
    DevInstance inst(client, spec);
    ExpectInvalid([&] { inst.Create(); }, "mounts[0].claim", "not shared with alice");
    ExpectInvalid([&] { inst.Preflight(); }, "mounts[0].claim");
    auto reqs = fake->requests();
    REQUIRE_FALSE(reqs.empty());
    for (const auto& r : reqs) CHECK(r.method == "GET");

    // A claim that does not exist is refused the same way.
    spec.mounts = {{"nope", "/data", true, ""}};
    DevInstance missing(client, spec);
    ExpectInvalid([&] { missing.Create(); }, "mounts[0].claim", "no PersistentVolumeClaim");
    for (const auto& r : fake->requests()) CHECK(r.method == "GET");
  }

  TEST_CASE("status: stopped, waiting, quota, fatal pod problems, running") {
    auto spec = CpuSpec();
    internal::DevObserved seen;
    std::vector<std::string> fatal;
    CHECK(internal::ComputeDevStatus(spec, seen, &fatal).phase == DevPhase::kUnknown);

    seen.statefulset = {{"metadata", {{"name", "notebook-test"}}}, {"spec", {{"replicas", 0}}}};
    CHECK(internal::ComputeDevStatus(spec, seen, &fatal).phase == DevPhase::kStopped);

    seen.statefulset["spec"]["replicas"] = 1;
    auto st = internal::ComputeDevStatus(spec, seen, &fatal);
    CHECK(st.phase == DevPhase::kPending);
    CHECK(fatal.empty());
    seen.quota_rejections = {"notebook-test cannot create its pod: exceeded quota: q"};
    st = internal::ComputeDevStatus(spec, seen, &fatal);
    CHECK(st.phase == DevPhase::kPending);
    CHECK(fatal.size() == 1);
    seen.quota_rejections.clear();
    fatal.clear();

    Json pod = {{"metadata", {{"name", "notebook-test-0"}}},
                {"spec", {{"nodeName", "sim-cpu-1"}}},
                {"status",
                 {{"phase", "Pending"},
                  {"containerStatuses",
                   Json::array({{{"name", "notebook"},
                                 {"restartCount", 0},
                                 {"state", {{"waiting", {{"reason", "ImagePullBackOff"}}}}}}})}}}};
    seen.pods = {pod};
    st = internal::ComputeDevStatus(spec, seen, &fatal);
    CHECK(st.reason.find("ImagePullBackOff") != std::string::npos);
    CHECK(fatal.size() == 1);
    fatal.clear();

    CHECK_FALSE(st.started_at.has_value());  // no startTime yet
    CHECK(st.ToJson().at("started_at").is_null());

    pod["status"] = {
        {"phase", "Running"},
        {"startTime", "2026-12-05T10:00:00Z"},
        {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})},
        {"containerStatuses",
         Json::array({{{"restartCount", 2}, {"state", {{"running", Json::object()}}}}})}};
    seen.pods = {pod};
    st = internal::ComputeDevStatus(spec, seen, &fatal);
    CHECK(st.phase == DevPhase::kRunning);
    CHECK(st.node == "sim-cpu-1");
    CHECK(st.restarts == 2);
    // started_at was added to the status by its field list and its fill only (issue #37's
    // measure): the JSON the bindings return carries it without a third change.
    REQUIRE(st.started_at.has_value());
    CHECK(std::chrono::system_clock::to_time_t(*st.started_at) == 1796464800);
    CHECK(st.ToJson().at("started_at") == 1796464800.0);
    // Ready: the probe found every served tool listening; the custom port "web" is not one.
    CHECK(st.ready_tools ==
          std::vector<std::string>{"jupyter", "ssh", "code-server", "tensorboard"});
    CHECK(st.Table().find("Running") != std::string::npos);

    // A terminating pod (during a restart) is not the instance's pod any more.
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
    seen.pods = {pod};
    st = internal::ComputeDevStatus(spec, seen, &fatal);
    CHECK(st.phase == DevPhase::kPending);
    CHECK(st.reason.find("previous pod") != std::string::npos);
  }

  TEST_CASE("access formatting: the table, the endpoint lookup, no HTML in the JSON") {
    DevAccess a;
    a.endpoints.push_back({"jupyter", 8888, "nb.team-a.svc:8888", 20001, "lab.example.com:20001",
                           "http://lab.example.com:20001/"});
    a.endpoints.push_back({"<x>", 1, "a", 0, "", "b"});
    CHECK(a.Table().find("lab.example.com:20001") != std::string::npos);
    CHECK_FALSE(a.ToJson().contains("html"));  // Python renders the HTML (tfk8s._html)
    CHECK(a.Find("jupyter")->external_port == 20001);
    CHECK_FALSE(a.Find("ssh").has_value());
  }

  TEST_CASE("the start script holds no secret and starts each tool on its variable") {
    std::string script = internal::DevStartScript();
    CHECK(script.find("unset PASSWORD") != std::string::npos);
    CHECK(script.find("chpasswd -e") != std::string::npos);
    CHECK(script.find("PasswordIdentityProvider.hashed_password") != std::string::npos);
    CHECK(script.find("TFK8S_CODE_SERVER_PORT") != std::string::npos);
    CHECK(script.find("refusing to start without authentication") != std::string::npos);
    // No process gets the password in its environment; code-server reads a root-only file.
    CHECK(script.find("PASSWORD=") == std::string::npos);
    CHECK(script.find("${PASSWORD") == std::string::npos);
    CHECK(script.find("code-server --config") != std::string::npos);
    // Jupyter as images ship it, and the verdict when the readiness tool is missing.
    for (const char* way : {"jupyter lab", "jupyter-lab", "jupyter notebook", "jupyter-notebook",
                            "python3 -m jupyterlab", "python3 -m notebook"}) {
      CHECK(script.find(way) != std::string::npos);
    }
    CHECK(script.find("/dev/termination-log") != std::string::npos);
  }

  TEST_CASE("status: a tfk8s verdict in the termination message fails fast with the reason") {
    bool fatal = false;
    Json pod = {
        {"status",
         {{"phase", "Running"},
          {"containerStatuses",
           Json::array(
               {{{"state",
                  {{"terminated",
                    {{"exitCode", 1},
                     {"reason", "Error"},
                     {"message",
                      "tfk8s: enabled but not in the image: jupyter (looked ...)\n"}}}}}}})}}}};
    CHECK(internal::PodProblem(pod, &fatal) ==
          "Error (exit code 1): tfk8s: enabled but not in the image: jupyter (looked ...)");
    CHECK(fatal);
    // Restarted, then backing off: the verdict is still the reason.
    pod["status"]["containerStatuses"][0] = {
        {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}, {"message", "back-off 10s"}}}}},
        {"lastState",
         {{"terminated",
           {{"exitCode", 1}, {"message", "tfk8s: enabled but not in the image: ssh (no sshd)"}}}}}};
    CHECK(internal::PodProblem(pod, &fatal) ==
          "CrashLoopBackOff: tfk8s: enabled but not in the image: ssh (no sshd)");
    CHECK(fatal);
    pod["status"]["containerStatuses"][0] = {
        {"state", {{"running", Json::object()}}},
        {"lastState",
         {{"terminated",
           {{"exitCode", 1}, {"message", "tfk8s: enabled but not in the image: ssh (no sshd)"}}}}}};
    CHECK(internal::PodProblem(pod, &fatal) ==
          "tfk8s: enabled but not in the image: ssh (no sshd)");
    CHECK(fatal);
    // Another program's exit is reported, and left to the restart policy.
    pod["status"]["containerStatuses"][0] = {
        {"state", {{"terminated", {{"exitCode", 2}, {"message", "usage: train.py"}}}}}};
    CHECK(internal::PodProblem(pod, &fatal) == "Error (exit code 2): usage: train.py");
    CHECK_FALSE(fatal);
  }

  TEST_CASE(
      "tenancy: launchWorkloads only in a namespace personal to the owner, other owners refused "
      "there") {
    auto ns = [](Json labels) {
      return Json{{"metadata", {{"name", "team-a"}, {"labels", std::move(labels)}}}};
    };
    const Json alices = ns({{"tfk8s.io/owner", "alice"}, {"tfk8s.io/team", "team"}});
    const Json shared = ns({{"tfk8s.io/team", "team"}});
    DevInstanceSpec plain = CpuSpec();
    plain.owner = "alice";
    DevInstanceSpec launching = plain;
    launching.launch_workloads = true;
    DevInstanceSpec bobs = plain;
    bobs.owner = "bob";
    // Allowed: the owner's own namespace; a plain instance in a shared or unreadable one.
    CHECK_NOTHROW(internal::CheckDevTenancy(launching, &alices, ""));
    CHECK_NOTHROW(internal::CheckDevTenancy(plain, &alices, ""));
    CHECK_NOTHROW(internal::CheckDevTenancy(plain, &shared, ""));
    CHECK_NOTHROW(internal::CheckDevTenancy(plain, nullptr, "forbidden"));
    auto refusal = [](const DevInstanceSpec& s, const Json* n) -> ValidationError {
      try {
        internal::CheckDevTenancy(s, n, "these credentials may not read the Namespace");
      } catch (const ValidationError& e) {
        return e;
      }
      FAIL("not refused");
      return ValidationError("", "", "");
    };
    // launchWorkloads in a shared namespace: named, with the reason and the way out.
    ValidationError e = refusal(launching, &shared);
    CHECK(e.field() == "launchWorkloads");
    std::string what = e.what();
    CHECK(what.find("team-a is not personal to alice") != std::string::npos);
    CHECK(what.find("mounts any other user's Secret") != std::string::npos);
    CHECK(what.find("members: [alice]") != std::string::npos);
    CHECK(what.find("nothing was sent") != std::string::npos);
    // Unreadable: fails closed, saying why.
    e = refusal(launching, nullptr);
    CHECK(e.field() == "launchWorkloads");
    CHECK(std::string(e.what()).find("may not read the Namespace") != std::string::npos);
    // Someone else's namespace: refused on the owner, with or without launching.
    for (const DevInstanceSpec* s : {&bobs, &launching}) {
      DevInstanceSpec other = *s;
      other.owner = "bob";
      e = refusal(other, &alices);
      CHECK(e.field() == "owner");
      CHECK(e.value() == "bob");
      CHECK(std::string(e.what()).find("personal to alice") != std::string::npos);
    }
  }
}
