// DevInstance against the local cluster: create → Running on a simulated node → Service with
// every port → Secret without plaintext anywhere else → concurrent creates get distinct external
// ports → stop/start keeps the home volume → restart changes the password → delete releases the
// ports and keeps the volume; sharing grants, fail-fast, quota pre-flight, NodePort, listing.
// Every test uses its own namespace (and its own tcp-services ConfigMap inside it).
#include <future>
#include <map>
#include <set>
#include <thread>

#include "cluster.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/quota.hpp"
#include "util/base64.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

const ResourceType kStatefulSets{"apps", "v1", "StatefulSet", "statefulsets", true};
const ResourceType kServices{"", "v1", "Service", "services", true};
const ResourceType kSecrets{"", "v1", "Secret", "secrets", true};
const ResourceType kPvcs{"", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true};
const ResourceType kQuotas{"", "v1", "ResourceQuota", "resourcequotas", true};

constexpr auto kReady = std::chrono::seconds(60);

DevInstanceSpec Small(const std::string& ns, const std::string& owner, const std::string& name) {
  DevInstanceSpec s;
  s.owner = owner;
  s.name = name;
  s.namespace_name = ns;
  s.resources = {"500m", "1Gi", "", "", 0};
  s.home.size = "1Gi";
  s.tools.custom_ports = {{"web", 8000}};
  s.expose.backend = DevExposure::kIngressTcp;
  s.expose.configmap_namespace = ns;  // the test's own tcp-services: cleaned with the namespace
  s.expose.create_configmap = true;
  s.expose.port_min = 31000;
  s.expose.port_max = 31099;
  s.expose.external_host = "lab.example.test";
  return s;
}

std::string SecretPassword(Client& c, const std::string& ns, const std::string& name) {
  Json secret = c.Get(kSecrets, ns, name + "-credentials");
  auto decoded = internal::Base64Decode(secret["data"]["password"].get<std::string>());
  REQUIRE(decoded);
  return *decoded;
}

Json TcpServices(Client& c, const std::string& ns) {
  Json cm = c.Get(kConfigMaps, ns, "tcp-services");
  return cm.contains("data") && cm["data"].is_object() ? cm["data"] : Json::object();
}

// External ports of one service in the tcp-services data.
std::set<int> PortsOf(const Json& data, const std::string& ns, const std::string& service) {
  std::set<int> out;
  std::string prefix = ns + "/" + service + ":";
  for (auto it = data.begin(); it != data.end(); ++it) {
    if (it.value().get<std::string>().rfind(prefix, 0) == 0) out.insert(std::stoi(it.key()));
  }
  return out;
}

std::string PodUid(Client& c, const std::string& ns, const std::string& pod) {
  return c.Get(kPods, ns, pod)["metadata"]["uid"].get<std::string>();
}

bool Exists(Client& c, const ResourceType& t, const std::string& ns, const std::string& name) {
  try {
    c.Get(t, ns, name);
    return true;
  } catch (const NotFound&) {
    return false;
  }
}

}  // namespace

TEST_SUITE("devinstance") {
  TEST_CASE("lifecycle: create, run, secrets, stop/start, restart, delete") {
    Client c = AdminClient();
    TestNamespace ns(c, "dev");
    DevInstance inst(c, Small(ns.name(), "alice", "nb"));
    DevStartResult started = inst.Create();
    CHECK(started.password.size() == 32);
    CHECK(started.ToString().find(started.password) == std::string::npos);

    // Running on a simulated node (which marks pods Ready without running probes): the served
    // tools are listed, the custom port "web" is not. That the probe really waits for every
    // port is proven on the real node (tests/e2e/test_ready_tools.py).
    DevInstanceStatus st = inst.Wait({.timeout = kReady});
    CHECK(st.phase == DevPhase::kRunning);
    CHECK(st.node.rfind("sim-", 0) == 0);
    CHECK(st.ready_tools ==
          std::vector<std::string>{"jupyter", "ssh", "code-server", "tensorboard"});
    CHECK(inst.Status().phase == DevPhase::kRunning);

    // The headless Service carries every port, each with protocol TCP.
    Json svc = c.Get(kServices, ns.name(), "nb");
    CHECK(svc["spec"]["clusterIP"] == "None");
    std::set<int> ports;
    for (const auto& p : svc["spec"]["ports"]) {
      CHECK(p["protocol"] == "TCP");
      ports.insert(p["port"].get<int>());
    }
    CHECK(ports == std::set<int>{8888, 22, 8080, 6006, 8000});

    // The Secret holds the password; the StatefulSet, its pod and the Service never do.
    CHECK(SecretPassword(c, ns.name(), "nb") == started.password);
    Json secret = c.Get(kSecrets, ns.name(), "nb-credentials");
    CHECK(secret["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet");
    for (const Json& obj : {c.Get(kStatefulSets, ns.name(), "nb"), c.Get(kPods, ns.name(), "nb-0"),
                            svc, TcpServices(c, ns.name())}) {
      CHECK(obj.dump().find(started.password) == std::string::npos);
    }
    Json pod = c.Get(kPods, ns.name(), "nb-0");
    CHECK(pod["spec"]["automountServiceAccountToken"] == false);
    for (const auto& v : pod["spec"]["volumes"]) {
      CHECK(v.value("name", "").find("token") == std::string::npos);
    }

    // Exposure: the authenticated tools got ports from the range, Access() reports them.
    std::set<int> exposed = PortsOf(TcpServices(c, ns.name()), ns.name(), "nb");
    CHECK(exposed.size() == 3);
    for (int p : exposed) CHECK((p >= 31000 && p <= 31099));
    DevAccess access = inst.Access();
    auto jupyter = access.Find("jupyter");
    REQUIRE(jupyter);
    CHECK(exposed.count(jupyter->external_port) == 1);
    CHECK(jupyter->connect == "http://" + jupyter->external_address + "/");
    CHECK(access.Find("ssh")->connect.rfind("ssh -p ", 0) == 0);
    CHECK(access.Find("tensorboard")->external_port == 0);  // unauthenticated: not exposed
    CHECK(access.ToJson().dump().find(started.password) == std::string::npos);

    // Stop: replicas 0, ports released, the home volume kept; Start: a new password, Running.
    std::string home_uid = c.Get(kPvcs, ns.name(), "alice-home")["metadata"]["uid"];
    inst.Stop();
    CHECK(inst.Status().phase == DevPhase::kStopped);
    CHECK(PortsOf(TcpServices(c, ns.name()), ns.name(), "nb").empty());
    CHECK(c.Get(kPvcs, ns.name(), "alice-home")["metadata"]["uid"] == home_uid);
    CHECK_THROWS_AS(inst.Wait({.timeout = std::chrono::seconds(10)}),
                    DevInstanceFailed);  // stopped: at once
    DevStartResult again = inst.Start();
    CHECK(again.password != started.password);
    st = inst.Wait({.timeout = kReady});
    CHECK(st.phase == DevPhase::kRunning);
    CHECK(c.Get(kPvcs, ns.name(), "alice-home")["metadata"]["uid"] == home_uid);
    CHECK(PortsOf(TcpServices(c, ns.name()), ns.name(), "nb").size() == 3);

    // Restart: a fresh password in the Secret and a new pod that reads it.
    std::string old_pod = PodUid(c, ns.name(), "nb-0");
    DevStartResult restarted = inst.Restart();
    CHECK(restarted.password != again.password);
    CHECK(SecretPassword(c, ns.name(), "nb") == restarted.password);
    st = inst.Wait({.timeout = kReady});
    CHECK(st.phase == DevPhase::kRunning);
    CHECK(PodUid(c, ns.name(), "nb-0") != old_pod);

    // Apply converges a changed spec, keeping the password and the ports.
    auto changed = inst.spec();
    changed.resources.memory = "2Gi";
    changed.security.ssh_authorized_keys = {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample alice"};
    inst.set_spec(changed);
    std::set<int> before_apply = PortsOf(TcpServices(c, ns.name()), ns.name(), "nb");
    inst.Apply();
    Json applied = c.Get(kStatefulSets, ns.name(), "nb");
    CHECK(applied["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] ==
          "2Gi");
    CHECK(SecretPassword(c, ns.name(), "nb") == restarted.password);
    CHECK(c.Get(kSecrets, ns.name(), "nb-credentials")["data"].contains("authorized_keys"));
    CHECK(PortsOf(TcpServices(c, ns.name()), ns.name(), "nb") == before_apply);
    CHECK(inst.Wait({.timeout = kReady}).phase == DevPhase::kRunning);

    // Load gives back the same spec; List finds it by owner and by team.
    CHECK(DevInstance::Load(c, ns.name(), "nb").spec().ToJson() == inst.spec().ToJson());
    auto mine = DevInstance::List(c, "", "alice");
    bool found = false;
    for (const auto& s : mine) found |= s.namespace_name == ns.name() && s.name == "nb";
    CHECK(found);
    auto team = DevInstance::List(c, ns.name());
    REQUIRE(team.size() == 1);
    CHECK(team[0].owner == "alice");
    CHECK(team[0].running);

    // Delete: StatefulSet, Service, Secret and ports go; the home volume stays.
    DevDeleteOptions del;
    del.wait = std::chrono::seconds(60);
    inst.Delete(del);
    CHECK_FALSE(Exists(c, kStatefulSets, ns.name(), "nb"));
    CHECK_FALSE(Exists(c, kPods, ns.name(), "nb-0"));
    CHECK(TestNamespace::WaitFor(
        [&] {
          return !Exists(c, kServices, ns.name(), "nb") &&
                 !Exists(c, kSecrets, ns.name(), "nb-credentials");
        },
        std::chrono::seconds(30)));
    CHECK(PortsOf(TcpServices(c, ns.name()), ns.name(), "nb").empty());
    CHECK(c.Get(kPvcs, ns.name(), "alice-home")["metadata"]["uid"] == home_uid);
    CHECK(DevInstance::List(c, ns.name()).empty());
    CHECK_THROWS_AS(inst.Status(), NotFound);
    CHECK_THROWS_AS(inst.Wait({.timeout = std::chrono::seconds(10)}),
                    NotFound);  // at once, not at timeout
  }

  TEST_CASE("idle policy: stored, annotated, loaded back, and the culler's choice per instance") {
    Client c = AdminClient();
    TestNamespace ns(c, "dev");
    auto timed_spec = Small(ns.name(), "dora", "timed");
    timed_spec.expose.backend = DevExposure::kNone;
    timed_spec.idle = DevIdlePolicy{std::chrono::minutes(90)};
    auto plain_spec = Small(ns.name(), "dora", "plain");
    plain_spec.expose.backend = DevExposure::kNone;
    DevInstance timed(c, timed_spec);
    DevInstance plain(c, plain_spec);
    timed.Create();
    plain.Create();

    Json sts = c.Get(kStatefulSets, ns.name(), "timed");
    CHECK(sts["metadata"]["annotations"]["tfk8s.io/idle-after"] == "90m");
    CHECK(sts["metadata"]["annotations"]["tfk8s.io/idle-action"] == "stop");
    CHECK_FALSE(c.Get(kStatefulSets, ns.name(), "plain")["metadata"]["annotations"].contains(
        "tfk8s.io/idle-after"));
    DevInstance loaded = DevInstance::Load(c, ns.name(), "timed");
    REQUIRE(loaded.spec().idle.has_value());
    CHECK(loaded.spec().idle->after == std::chrono::minutes(90));

    // No default: only "timed" is probed. The simulated node has no kubelet to run the probe,
    // so its activity is unknown and it is kept; "plain" is skipped without a probe.
    DevCullOptions o;
    o.namespace_name = ns.name();
    o.policy_only = true;
    std::map<std::string, DevCullDecision> by_name;
    for (auto& d : CullIdleDevInstances(c, o)) by_name[d.name] = d;
    REQUIRE(by_name.size() == 2);
    CHECK(by_name["plain"].outcome == "skipped");
    CHECK_FALSE(by_name["plain"].activity.has_value());
    CHECK(by_name["timed"].outcome == "unknown");
    CHECK(by_name["timed"].reason.find("cannot read its activity") != std::string::npos);
    // Nothing was stopped.
    CHECK(c.Get(kStatefulSets, ns.name(), "timed")["spec"]["replicas"] == 1);
    CHECK(c.Get(kStatefulSets, ns.name(), "plain")["spec"]["replicas"] == 1);
    timed.Delete();
    plain.Delete();
  }

  TEST_CASE("concurrent creates get distinct external ports") {
    Client c = AdminClient();
    TestNamespace ns(c, "dev");
    constexpr int kCount = 4;
    std::vector<std::future<DevStartResult>> results;
    std::vector<std::unique_ptr<DevInstance>> instances;
    for (int i = 0; i < kCount; ++i) {
      // Same owner: the home volume is also created concurrently (one creates, others reuse).
      auto spec = Small(ns.name(), "carol", "nb-" + std::to_string(i));
      spec.expose.tools = {"jupyter", "ssh", "code-server", "web"};
      instances.push_back(std::make_unique<DevInstance>(c, spec));
    }
    for (auto& inst : instances) {
      results.push_back(std::async(std::launch::async, [&inst] { return inst->Create(); }));
    }
    std::set<std::string> passwords;
    for (auto& r : results) passwords.insert(r.get().password);
    CHECK(passwords.size() == kCount);

    Json data = TcpServices(c, ns.name());
    CHECK(data.size() == kCount * 4);  // nothing overwritten
    std::set<int> all;
    for (int i = 0; i < kCount; ++i) {
      auto mine = PortsOf(data, ns.name(), "nb-" + std::to_string(i));
      CHECK(mine.size() == 4);
      all.insert(mine.begin(), mine.end());
    }
    CHECK(all.size() == kCount * 4);
    for (auto& inst : instances) CHECK(inst->Wait({.timeout = kReady}).phase == DevPhase::kRunning);

    // Stopping with keep_ports keeps the entries; starting again reuses them.
    std::set<int> kept = PortsOf(TcpServices(c, ns.name()), ns.name(), "nb-0");
    DevStopOptions keep;
    keep.keep_ports = true;
    instances[0]->Stop(keep);
    CHECK(PortsOf(TcpServices(c, ns.name()), ns.name(), "nb-0") == kept);
    instances[0]->Start();
    CHECK(PortsOf(TcpServices(c, ns.name()), ns.name(), "nb-0") == kept);

    for (auto& inst : instances) inst->Delete();
    CHECK(TcpServices(c, ns.name()).empty());
    CHECK(Exists(c, kPvcs, ns.name(), "carol-home"));
  }

  TEST_CASE("sharing: an unshared claim is refused before any write; grants allow ro then rw") {
    Client c = AdminClient();
    TestNamespace ns(c, "dev");
    DevVolumeSpec vol;
    vol.owner = "bob";
    vol.name = "bob-datasets";
    vol.namespace_name = ns.name();
    vol.size = "1Gi";
    CreateVolume(c, vol);

    auto spec = Small(ns.name(), "alice", "reader");
    spec.expose.backend = DevExposure::kNone;
    spec.mounts = {{"bob-datasets", "/data", true, ""}};
    DevInstance reader(c, spec);
    CHECK_THROWS_AS(reader.Create(), ValidationError);
    CHECK_FALSE(Exists(c, kStatefulSets, ns.name(), "reader"));
    CHECK_FALSE(Exists(c, kPvcs, ns.name(), "alice-home"));  // not even the home volume

    // Only the owner can share.
    CHECK_THROWS_AS(
        ShareVolume(c, ns.name(), "bob-datasets", "alice", "alice", DevShareMode::kReadWrite),
        ValidationError);
    ShareVolume(c, ns.name(), "bob-datasets", "bob", "alice", DevShareMode::kReadOnly);
    auto grants = VolumeGrants(c.Get(kPvcs, ns.name(), "bob-datasets"));
    CHECK(grants.at("alice") == DevShareMode::kReadOnly);
    reader.Create();
    CHECK(reader.Wait({.timeout = kReady}).phase == DevPhase::kRunning);
    Json sts = c.Get(kStatefulSets, ns.name(), "reader");
    bool mounted_ro = false;
    for (const auto& m : sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]) {
      if (m["mountPath"] == "/data") mounted_ro = m.value("readOnly", false);
    }
    CHECK(mounted_ro);

    // Read-write needs an rw grant.
    spec.name = "writer";
    spec.mounts = {{"bob-datasets", "/data", false, ""}};
    DevInstance writer(c, spec);
    CHECK_THROWS_AS(writer.Create(), ValidationError);
    ShareVolume(c, ns.name(), "bob-datasets", "bob", "alice", DevShareMode::kReadWrite);
    writer.Create(DevCreateOptions{false, true});  // created stopped
    CHECK(writer.Status().phase == DevPhase::kStopped);
    UnshareVolume(c, ns.name(), "bob-datasets", "bob", "alice");
    CHECK(VolumeGrants(c.Get(kPvcs, ns.name(), "bob-datasets")).empty());
    CHECK_THROWS_AS(writer.Start(), ValidationError);  // the grant is checked again
    reader.Delete();
    writer.Delete();
  }

  TEST_CASE("fail fast: an image that cannot be pulled, and a pod no node can take") {
    Client c = AdminClient();
    TestNamespace ns(c, "dev");
    auto spec = Small(ns.name(), "dave", "broken");
    spec.expose.backend = DevExposure::kNone;
    spec.pod_annotations = {{"sim.tfk8s.io/image-pull-error", "true"}};
    DevInstance broken(c, spec);
    broken.Create();
    auto t0 = std::chrono::steady_clock::now();
    try {
      broken.Wait({.timeout = kReady});
      FAIL("expected DevInstanceFailed");
    } catch (const DevInstanceFailed& e) {
      CHECK(std::string(e.what()).find("ImagePull") != std::string::npos);
      CHECK(e.status().reason.find("ImagePull") != std::string::npos);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
    broken.Delete();

    // A GPU type no node has: refused by the pre-flight, nothing created.
    auto gpu = Small(ns.name(), "dave", "nowhere");
    gpu.expose.backend = DevExposure::kNone;
    gpu.resources.gpus = 1;
    gpu.placement.gputype = "a100";
    DevInstance nowhere(c, gpu);
    CHECK_THROWS_AS(nowhere.Create(), DevInstanceFailed);
    CHECK_FALSE(Exists(c, kStatefulSets, ns.name(), "nowhere"));
  }

  TEST_CASE("quota pre-flight: refused with the resource named, nothing created") {
    Client c = AdminClient();
    TestNamespace ns(c, "dev");
    c.Create(kQuotas, ns.name(),
             {{"metadata", {{"name", "team"}}},
              {"spec", {{"hard", {{"requests.cpu", "1"}, {"requests.memory", "4Gi"}}}}}});
    WaitForQuotaReady(c, ns.name(), std::chrono::seconds(30));
    auto spec = Small(ns.name(), "erin", "big");
    spec.resources = {"2", "1Gi", "", "", 0};
    DevInstance big(c, spec);
    try {
      big.Create();
      FAIL("expected QuotaExceeded");
    } catch (const QuotaExceeded& e) {
      CHECK(std::find(e.resources().begin(), e.resources().end(), "requests.cpu") !=
            e.resources().end());
    }
    CHECK_FALSE(Exists(c, kStatefulSets, ns.name(), "big"));
    CHECK_FALSE(Exists(c, kConfigMaps, ns.name(), "tcp-services"));

    // A fitting instance, stopped; the quota then shrinks; Start is refused by the pre-flight.
    spec.name = "small";
    spec.resources = {"500m", "1Gi", "", "", 0};
    DevInstance small(c, spec);
    small.Create(DevCreateOptions{false, true});
    c.Patch(kQuotas, ns.name(), "team", PatchType::kMerge,
            {{"spec", {{"hard", {{"requests.cpu", "100m"}}}}}});
    WaitForQuotaReady(c, ns.name(), std::chrono::seconds(30));
    CHECK_THROWS_AS(small.Start(), QuotaExceeded);
    CHECK(small.Status().phase == DevPhase::kStopped);
    small.Delete();

    // Without the pre-flight the StatefulSet is created but its pod is refused: Wait reports
    // the quota message at once instead of sleeping out its timeout.
    spec.name = "unchecked";
    DevInstance unchecked(c, spec);
    unchecked.Create(DevCreateOptions{true, false});
    auto t0 = std::chrono::steady_clock::now();
    try {
      unchecked.Wait({.timeout = kReady});
      FAIL("expected DevInstanceFailed");
    } catch (const DevInstanceFailed& e) {
      CHECK(std::string(e.what()).find("exceeded quota") != std::string::npos);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
    unchecked.Delete();
  }

  TEST_CASE(
      "NodePort backend and a GPU instance: node ports in Access(), given back while stopped") {
    Client c = AdminClient();
    TestNamespace ns(c, "dev");
    auto spec = Small(ns.name(), "frank", "np");
    spec.expose = DevExposeSpec{};
    spec.expose.backend = DevExposure::kNodePort;
    spec.resources.gpus = 1;  // a GPU instance: tolerates the GPU taint, lands on a v100 node
    spec.placement.gputype = "v100";
    DevInstance inst(c, spec);
    inst.Create();
    CHECK(inst.Wait({.timeout = kReady}).node.rfind("sim-gpu-", 0) == 0);
    DevAccess access = inst.Access();
    auto ssh = access.Find("ssh");
    REQUIRE(ssh);
    CHECK(ssh->external_port >= 30000);
    CHECK(ssh->external_address == "127.0.0.1:" + std::to_string(ssh->external_port));
    CHECK(access.Find("web")->external_port == 0);
    inst.Stop();
    CHECK_FALSE(Exists(c, kServices, ns.name(), "np-nodeport"));
    inst.Start();
    CHECK(Exists(c, kServices, ns.name(), "np-nodeport"));
    inst.Delete();
  }
}
