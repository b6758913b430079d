// A workload's identity comes from its root object, never from the spec stored on it
// (workloads/identity.hpp): the pure checks every load goes through, on objects as tfk8s
// renders them (the integration suite, tests/integration/test_identity.cpp, runs the attack
// against the real API server).
#include <doctest/doctest.h>

#include <string>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"
#include "workloads/cron.hpp"
#include "workloads/devinstance_internal.hpp"
#include "workloads/identity.hpp"
#include "workloads/scheduledjob_internal.hpp"
#include "workloads/tfcluster_internal.hpp"

using namespace tfk8s;

namespace {

// `object` as the server returns it: a UID added.
Json Served(Json object, const std::string& uid = "uid-1") {
  object["metadata"]["uid"] = uid;
  return object;
}

// `object` whose stored spec (JSON text at `pointer`) was rewritten by `edit`.
template <typename Edit>
Json Forged(Json object, const Json::json_pointer& pointer, Edit edit) {
  Json spec = Json::parse(object.at(pointer).get<std::string>());
  edit(spec);
  object[pointer] = spec.dump();
  return object;
}

const Json::json_pointer kAnnotation("/metadata/annotations/tfk8s.io~1spec");

DevInstanceSpec Instance() {
  DevInstanceSpec s;
  s.owner = "mallory";
  s.name = "mal";
  s.namespace_name = "dep-attacker";
  s.resources = {"500m", "1Gi", "", "", 0};
  return s;
}

// The StoredIdentityError thrown by `call` (it must throw one).
template <typename Call>
internal::StoredIdentityError Refusal(Call call) {
  try {
    call();
  } catch (const internal::StoredIdentityError& e) {
    return e;
  }
  FAIL("expected a StoredIdentityError");
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("identity: a DevInstance's stored spec must name its own StatefulSet") {
  Json sts = Served(RenderDevInstance(Instance()).front());
  internal::RootIdentity id;
  DevInstanceSpec loaded = internal::DevSpecFromObject(sts, &id);
  CHECK(loaded.ToJson() == Instance().ToJson());
  CHECK(id.name == "mal");
  CHECK(id.namespace_name == "dep-attacker");
  CHECK(id.owner == "mallory");
  CHECK(id.uid == "uid-1");
  CHECK(id.object == "StatefulSet dep-attacker/mal");

  // The report's attack: another name and namespace, another image.
  auto e = Refusal([&] {
    internal::DevSpecFromObject(Forged(sts, kAnnotation, [](Json& s) {
      s["name"] = "vic";
      s["namespace"] = "dep-victim";
      s["image"] = "evil.example/backdoor:1";
    }));
  });
  CHECK(e.field() == "metadata.annotations[tfk8s.io/spec].name");
  CHECK(e.value() == "vic");
  const std::string what = e.what();
  CHECK(what.find("\"mal\"") != std::string::npos);
  CHECK(what.find("StatefulSet dep-attacker/mal") != std::string::npos);
  CHECK(what.find("nothing was sent") != std::string::npos);

  e = Refusal([&] {
    internal::DevSpecFromObject(
        Forged(sts, kAnnotation, [](Json& s) { s["namespace"] = "dep-victim"; }));
  });
  CHECK(e.field() == "metadata.annotations[tfk8s.io/spec].namespace");
  CHECK(e.value() == "dep-victim");
  e = Refusal([&] {
    internal::DevSpecFromObject(Forged(sts, kAnnotation, [](Json& s) { s["owner"] = "victor"; }));
  });
  CHECK(e.field() == "metadata.annotations[tfk8s.io/spec].owner");
  CHECK(std::string(e.what()).find("\"mallory\"") != std::string::npos);

  // The owner is the object's label: a label and a stored spec that disagree are refused,
  // whichever of the two was changed.
  Json relabelled = sts;
  relabelled["metadata"]["labels"][kOwnerLabel] = "victor";
  CHECK_THROWS_AS(internal::DevSpecFromObject(relabelled), internal::StoredIdentityError);
}

TEST_CASE("identity: objects that are not the workload's root are not loaded at all") {
  Json sts = Served(RenderDevInstance(Instance()).front());
  Json unmanaged = sts;
  unmanaged["metadata"]["labels"].erase(std::string(kManagedByLabel));
  CHECK_THROWS_AS(internal::DevSpecFromObject(unmanaged), NotFound);
  Json renamed = sts;
  renamed["metadata"]["labels"]["tfk8s.io/instance"] = "vic";  // the label names another
  CHECK_THROWS_AS(internal::DevSpecFromObject(renamed), NotFound);
  Json no_spec = sts;
  no_spec["metadata"]["annotations"].erase("tfk8s.io/spec");
  CHECK_THROWS_AS(internal::DevSpecFromObject(no_spec), NotFound);
  Json not_json = sts;
  not_json[kAnnotation] = "{";
  CHECK_THROWS_AS(internal::DevSpecFromObject(not_json), ValidationError);
  // A stored spec nested 100,000 deep is refused by the decoders' depth bound, not a crash.
  Json deep = sts;
  deep[kAnnotation] = std::string(100000, '[') + std::string(100000, ']');
  CHECK_THROWS_WITH_AS(internal::DevSpecFromObject(deep), doctest::Contains("512"),
                       ValidationError);
}

TEST_CASE("identity: a TFCluster's root and a ScheduledJob's CronJob and runs") {
  TFClusterSpec tf;
  tf.name = "mal";
  tf.namespace_name = "tf-attacker";
  tf.owner = "mallory";
  tf.ps.replicas = 1;
  tf.worker.replicas = 1;
  Json root = Served(RenderTFCluster(tf).front());
  CHECK(internal::TFSpecFromRoot(root).ToJson() == tf.ToJson());
  const Json::json_pointer data("/data/spec.json");
  auto e = Refusal(
      [&] { internal::TFSpecFromRoot(Forged(root, data, [](Json& s) { s["name"] = "vic"; })); });
  CHECK(e.field() == "data.spec.json.name");
  CHECK(std::string(e.what()).find("ConfigMap tf-attacker/mal") != std::string::npos);

  ScheduledJobSpec task;
  task.name = "mal";
  task.namespace_name = "sj-attacker";
  task.owner = "mallory";
  task.image = "python:3.11-slim";
  task.exec_command = "python3";
  task.entry_path = "train.py";
  task.schedule = "0 3 * * *";
  Json cronjob = Served(RenderCronJob(task));
  CHECK(internal::ScheduledJobSpecFromObject(cronjob, true)->ToJson() == task.ToJson());
  e = Refusal([&] {
    internal::ScheduledJobSpecFromObject(
        Forged(cronjob, kAnnotation, [](Json& s) { s["namespace"] = "sj-victim"; }), true);
  });
  CHECK(e.field() == "metadata.annotations[tfk8s.io/spec].namespace");

  // A run is named after its task by label, not by its own name.
  task.schedule.clear();
  Json run = Served(RenderRunJob(task));
  run["metadata"]["name"] = "mal-manual-x1";
  CHECK(internal::ScheduledJobSpecFromObject(run, false)->name == "mal");
  e = Refusal([&] {
    internal::ScheduledJobSpecFromObject(
        Forged(run, kAnnotation, [](Json& s) { s["owner"] = "victor"; }), false);
  });
  CHECK(e.field() == "metadata.annotations[tfk8s.io/spec].owner");
  run["metadata"]["annotations"].erase("tfk8s.io/spec");
  CHECK_FALSE(internal::ScheduledJobSpecFromObject(run, false));
}

TEST_CASE("identity: writes carry the loaded UID, ownership is by UID and not by label") {
  Json object = {{"metadata", {{"name", "mal"}}}};
  CHECK(internal::WithUidPrecondition(object, "")["metadata"].count("uid") == 0);
  CHECK(internal::WithUidPrecondition(object, "uid-1")["metadata"]["uid"] == "uid-1");

  Json child = {{"metadata", {{"ownerReferences", {{{"uid", "uid-1"}, {"kind", "ConfigMap"}}}}}}};
  CHECK(internal::OwnedBy(child, "uid-1"));
  CHECK_FALSE(internal::OwnedBy(child, "uid-2"));
  CHECK_FALSE(internal::OwnedBy(child, ""));
  CHECK_FALSE(internal::OwnedBy({{"metadata", {{"ownerReferences", "x"}}}}, "uid-1"));

  Json now = {{"metadata", {{"uid", "uid-2"}}}};
  CHECK_NOTHROW(internal::RequireSameObject(now, "", "DevInstance", "ns", "mal"));
  CHECK_NOTHROW(internal::RequireSameObject(now, "uid-2", "DevInstance", "ns", "mal"));
  CHECK_THROWS_AS(internal::RequireSameObject(now, "uid-1", "DevInstance", "ns", "mal"), Conflict);
}

TEST_CASE("identity: a timestamp a tenant wrote (year 9999) is clamped, not overflowed") {
  // The Fleet and the culler read tfk8s.io/last-activity, which the instance's owner may edit.
  auto far = internal::ParseTimestamp("9999-12-31T23:59:59Z");
  REQUIRE(far);
  CHECK(internal::ToTimePoint(*far) == std::chrono::system_clock::time_point::max());
  auto early = internal::ParseTimestamp("0001-01-01T00:00:00Z");
  REQUIRE(early);
  CHECK(internal::ToTimePoint(*early) == std::chrono::system_clock::time_point::min());
  auto now = internal::ParseTimestamp("2026-12-04T12:00:00Z");
  REQUIRE(now);
  CHECK(std::chrono::duration_cast<std::chrono::seconds>(
            internal::ToTimePoint(*now).time_since_epoch())
            .count() == 1796385600);
}
