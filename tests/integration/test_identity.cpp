// Identity comes from the object (issue #35): a tenant who may edit her own workload's objects
// rewrites the spec stored on them so that it names another user's workload in another
// namespace. Every path that loads a workload — Load, the idle culler, the clean-up watcher,
// the Fleet — must refuse that spec and leave the victim exactly as it was (image, replicas,
// resourceVersion). And a write that follows a load changes only the object that was loaded:
// one deleted and re-created under its name meanwhile is refused, not overwritten.
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "cluster.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/fleet.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

const ResourceType kStatefulSets{"apps", "v1", "StatefulSet", "statefulsets", true};
const ResourceType kJobs{"batch", "v1", "Job", "jobs", true};

// What a tenant's edit must never change on the victim's object.
struct Fingerprint {
  std::string resource_version;
  std::string uid;
  std::string text;  // the whole spec and metadata.annotations, as JSON
  bool operator==(const Fingerprint&) const = default;
};

Fingerprint FingerprintOf(const Json& object) {
  Json kept = {{"spec", object.value("spec", Json())},
               {"data", object.value("data", Json())},
               {"annotations", object["metadata"].value("annotations", Json())}};
  return {object["metadata"].value("resourceVersion", ""), object["metadata"].value("uid", ""),
          kept.dump()};
}

// Rewrites the stored spec (JSON text at `pointer` in `object`) with `edit`, as the tenant
// does with `kubectl edit` on her own object.
template <typename Edit>
void Forge(Client& c, const ResourceType& type, const std::string& ns, const std::string& name,
           const Json::json_pointer& pointer, Edit edit) {
  Json spec = Json::parse(c.Get(type, ns, name).at(pointer).get<std::string>());
  edit(spec);
  // A merge patch of that one field: a running object's status changes under a replace.
  Json patch = Json::object();
  patch[pointer] = spec.dump();
  c.Patch(type, ns, name, PatchType::kMerge, patch);
}

const Json::json_pointer kDevSpecPointer("/metadata/annotations/tfk8s.io~1spec");
const Json::json_pointer kTFSpecPointer("/data/spec.json");

DevInstanceSpec SmallInstance(const std::string& ns, const std::string& owner,
                              const std::string& name) {
  DevInstanceSpec s;
  s.owner = owner;
  s.name = name;
  s.namespace_name = ns;
  s.resources = {"200m", "256Mi", "", "", 0};
  s.home.enabled = false;
  return s;
}

TFClusterSpec SmallCluster(const std::string& ns, const std::string& owner,
                           const std::string& name) {
  TFClusterSpec s;
  s.name = name;
  s.namespace_name = ns;
  s.owner = owner;
  s.ps.replicas = 1;
  s.ps.resources = {"100m", "128Mi", "", "", 0};
  s.worker.replicas = 1;
  s.worker.resources = {"100m", "128Mi", "", "", 0};
  return s;
}

ScheduledJobSpec SmallTask(const std::string& ns, const std::string& owner,
                           const std::string& name) {
  ScheduledJobSpec s;
  s.name = name;
  s.namespace_name = ns;
  s.owner = owner;
  s.image = "python:3.11-slim";
  s.exec_command = "python3";
  s.entry_path = "train.py";
  s.resources = {"100m", "128Mi", "", "", 0};
  s.schedule = "0 3 * * *";
  return s;
}

// The ValidationError of `call`, which must throw one.
template <typename Call>
ValidationError RefusedWith(Call call) {
  try {
    call();
  } catch (const ValidationError& e) {
    return e;
  }
  FAIL("expected a ValidationError");
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_SUITE("identity") {
  TEST_CASE("DevInstance: a stored spec naming another instance is refused by every path") {
    Client c = AdminClient();
    TestNamespace attacker(c, "dep-attacker");
    TestNamespace victim(c, "dep-victim");
    DevInstance vic(c, SmallInstance(victim.name(), "victor", "vic"));
    vic.Create();
    DevInstance mal(c, SmallInstance(attacker.name(), "mallory", "mal"));
    mal.Create();  // started: the culler looks only at running instances
    const Fingerprint before = FingerprintOf(c.Get(kStatefulSets, victim.name(), "vic"));

    // The report's attack: the stored spec says vic in the victim's namespace, another image.
    Forge(c, kStatefulSets, attacker.name(), "mal", kDevSpecPointer, [&](Json& s) {
      s["name"] = "vic";
      s["namespace"] = victim.name();
      s["image"] = "evil.example/backdoor:1";
    });
    ValidationError e = RefusedWith([&] { DevInstance::Load(c, attacker.name(), "mal"); });
    CHECK(e.field() == "metadata.annotations[tfk8s.io/spec].name");
    CHECK(e.value() == "vic");
    CHECK(std::string(e.what()).find("\"mal\"") != std::string::npos);
    CHECK(std::string(e.what()).find("nothing was sent") != std::string::npos);

    // Each identity field alone is refused too.
    Forge(c, kStatefulSets, attacker.name(), "mal", kDevSpecPointer, [&](Json& s) {
      s["name"] = "mal";  // namespace still the victim's
    });
    e = RefusedWith([&] { DevInstance::Load(c, attacker.name(), "mal"); });
    CHECK(e.field() == "metadata.annotations[tfk8s.io/spec].namespace");
    CHECK(e.value() == victim.name());
    CHECK(std::string(e.what()).find(attacker.name()) != std::string::npos);
    Forge(c, kStatefulSets, attacker.name(), "mal", kDevSpecPointer, [&](Json& s) {
      s["namespace"] = attacker.name();
      s["owner"] = "victor";
    });
    e = RefusedWith([&] { DevInstance::Load(c, attacker.name(), "mal"); });
    CHECK(e.field() == "metadata.annotations[tfk8s.io/spec].owner");
    CHECK(e.value() == "victor");

    // The idle culler (any idle time counts as idle) does not act on it.
    Forge(c, kStatefulSets, attacker.name(), "mal", kDevSpecPointer, [&](Json& s) {
      s["name"] = "vic";
      s["namespace"] = victim.name();
      s["owner"] = "mallory";
    });
    DevCullOptions cull;
    cull.namespace_name = attacker.name();
    cull.idle_after = std::chrono::seconds(1);
    auto decisions = CullIdleDevInstances(c, cull);
    REQUIRE(decisions.size() == 1);
    CHECK(decisions[0].name == "mal");
    CHECK(decisions[0].outcome == "unknown");
    CHECK(decisions[0].reason.find("not acted on") != std::string::npos);
    CHECK(decisions[0].reason.find("metadata.annotations[tfk8s.io/spec].name") !=
          std::string::npos);

    // The Fleet shows the attacker's instance under its own name, with the refusal.
    FleetOptions fo;
    fo.namespace_name = attacker.name();
    Fleet fleet(c, fo);
    REQUIRE(fleet.WaitForSync(std::chrono::seconds(30)));
    auto entry = fleet.Get(FleetKind::kDevInstance, attacker.name(), "mal");
    REQUIRE(entry);
    CHECK(entry->phase == "Unknown");
    CHECK(entry->message.find("stored spec") != std::string::npos);
    CHECK_FALSE(fleet.Get(FleetKind::kDevInstance, victim.name(), "vic"));
    fleet.Stop();

    // The victim is exactly as it was; the attacker's instance is still hers to run.
    CHECK(FingerprintOf(c.Get(kStatefulSets, victim.name(), "vic")) == before);
    CHECK(c.Get(kStatefulSets, attacker.name(), "mal")["spec"]["replicas"] == 1);
  }

  TEST_CASE(
      "TFCluster: a forged root spec is refused by Load, the clean-up watcher and the Fleet") {
    Client c = AdminClient();
    TestNamespace attacker(c, "tf-attacker");
    TestNamespace victim(c, "tf-victim");
    TFClusterSpec victim_spec = SmallCluster(victim.name(), "victor", "vic");
    victim_spec.cleanup = TFCleanupPolicy::kDeleteAll;
    TFCluster(c, victim_spec).Apply();
    TFCluster(c, SmallCluster(attacker.name(), "mallory", "mal")).Apply();
    const Fingerprint before = FingerprintOf(c.Get(kConfigMaps, victim.name(), "vic"));

    Forge(c, kConfigMaps, attacker.name(), "mal", kTFSpecPointer, [&](Json& s) {
      s["name"] = "vic";
      s["namespace"] = victim.name();
      s["cleanup"] = "delete-all";
    });
    ValidationError e = RefusedWith([&] { TFCluster::Load(c, attacker.name(), "mal"); });
    CHECK(e.field() == "data.spec.json.name");
    CHECK(e.value() == "vic");

    // The clean-up watcher of the attacker's namespace reports the refusal and goes on.
    std::mutex mu;
    std::vector<std::string> errors;
    ScheduledJobWatcherOptions wo;
    wo.namespace_name = attacker.name();
    wo.clean_up_tf_clusters = true;
    wo.on_error = [&](const std::string& message) {
      std::lock_guard lock(mu);
      errors.push_back(message);
    };
    ScheduledJobWatcher watcher(c, wo);
    watcher.Start();
    bool reported = TestNamespace::WaitFor(
        [&] {
          std::lock_guard lock(mu);
          for (const auto& m : errors) {
            if (m.find("data.spec.json.name") != std::string::npos) return true;
          }
          return false;
        },
        std::chrono::seconds(30));
    watcher.Stop();
    CHECK(reported);

    FleetOptions fo;
    fo.namespace_name = attacker.name();
    Fleet fleet(c, fo);
    REQUIRE(fleet.WaitForSync(std::chrono::seconds(30)));
    auto entry = fleet.Get(FleetKind::kTFCluster, attacker.name(), "mal");
    REQUIRE(entry);
    CHECK(entry->phase == "Unknown");
    CHECK(entry->message.find("data.spec.json.name") != std::string::npos);
    fleet.Stop();

    CHECK(FingerprintOf(c.Get(kConfigMaps, victim.name(), "vic")) == before);
  }

  TEST_CASE("ScheduledJob: a forged CronJob or run spec is refused by Load") {
    Client c = AdminClient();
    TestNamespace attacker(c, "sj-attacker");
    TestNamespace victim(c, "sj-victim");
    ScheduledJob(c, SmallTask(victim.name(), "victor", "vic")).Apply();
    ScheduledJob(c, SmallTask(attacker.name(), "mallory", "mal")).Apply();
    ResourceType cronjobs = c.ResolvePreferred("batch", "CronJob", {"v1", "v1beta1"});
    const Fingerprint before = FingerprintOf(c.Get(cronjobs, victim.name(), "vic"));

    Forge(c, cronjobs, attacker.name(), "mal", kDevSpecPointer, [&](Json& s) {
      s["name"] = "vic";
      s["namespace"] = victim.name();
      s["suspend"] = true;
    });
    ValidationError e = RefusedWith([&] { ScheduledJob::Load(c, attacker.name(), "mal"); });
    CHECK(e.field() == "metadata.annotations[tfk8s.io/spec].name");
    CHECK(e.value() == "vic");

    // An on-demand task is its runs: a run's forged spec is refused the same way.
    ScheduledJobSpec once = SmallTask(attacker.name(), "mallory", "once");
    once.schedule.clear();
    JobRun run = ScheduledJob(c, once).RunNow();
    Forge(c, kJobs, attacker.name(), run.name, kDevSpecPointer,
          [&](Json& s) { s["owner"] = "victor"; });
    e = RefusedWith([&] { ScheduledJob::Load(c, attacker.name(), "once"); });
    CHECK(e.field() == "metadata.annotations[tfk8s.io/spec].owner");
    CHECK(e.value() == "victor");

    CHECK(FingerprintOf(c.Get(cronjobs, victim.name(), "vic")) == before);
  }

  TEST_CASE("a write after Load changes only the loaded object: a re-created one is refused") {
    Client c = AdminClient();
    TestNamespace ns(c, "reload");
    DevInstance first(c, SmallInstance(ns.name(), "alice", "lab"));
    first.Create(DevCreateOptions{.start = false});
    DevInstance loaded = DevInstance::Load(c, ns.name(), "lab");
    TFCluster(c, SmallCluster(ns.name(), "alice", "mnist")).Apply();
    TFCluster loaded_cluster = TFCluster::Load(c, ns.name(), "mnist");

    // Deleted and made again under the same names (by someone else: another owner).
    DeleteOptions now;
    now.propagation_policy = "Background";
    c.Delete(kStatefulSets, ns.name(), "lab", now);
    c.Delete(kConfigMaps, ns.name(), "mnist", now);
    REQUIRE(TestNamespace::WaitFor(
        [&] {
          try {
            c.Get(kStatefulSets, ns.name(), "lab");
            return false;
          } catch (const NotFound&) {
          }
          try {
            c.Get(kConfigMaps, ns.name(), "mnist");
            return false;
          } catch (const NotFound&) {
            return true;
          }
        },
        std::chrono::seconds(30)));
    DevInstance second(c, SmallInstance(ns.name(), "bob", "lab"));
    second.Create();
    TFCluster(c, SmallCluster(ns.name(), "bob", "mnist")).Apply();
    const Fingerprint sts_before = FingerprintOf(c.Get(kStatefulSets, ns.name(), "lab"));
    const Fingerprint root_before = FingerprintOf(c.Get(kConfigMaps, ns.name(), "mnist"));

    CHECK_THROWS_AS(loaded.Stop(), Conflict);
    CHECK_THROWS_AS(loaded.Start(), Conflict);
    CHECK_THROWS_AS(loaded.Delete(), Conflict);
    CHECK_THROWS_AS(loaded_cluster.Delete(), Conflict);
    // The server enforces it too, for the window between a read and the write: an apply that
    // names the loaded UID is refused once the name holds another object.
    CHECK_THROWS_AS(loaded_cluster.Apply(), Invalid);
    CHECK(FingerprintOf(c.Get(kStatefulSets, ns.name(), "lab")) == sts_before);
    CHECK(FingerprintOf(c.Get(kConfigMaps, ns.name(), "mnist")) == root_before);
  }
}
