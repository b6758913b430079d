// The workload spine (tfk8s::Workload<Kind>, docs/adr/0002-workload-spine.md): the life every
// kind shares is written once. Shown here twice: the three kinds keep their identity through
// set_spec() alike, and a fourth kind — a toy "Note" stored in a ConfigMap, written only in
// this file — gets load, listing, status, the watch-driven wait, rendering and YAML from its
// pure parts alone (the measure "lines to add a fourth kind" of issue #37 counts them).
#include <doctest/doctest.h>

#include <thread>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/testing/fake_cluster.hpp"
#include "tfk8s/tfcluster.hpp"
#include "tfk8s/validation.hpp"
#include "workloads/identity.hpp"
#include "workloads/workload_impl.hpp"

using namespace tfk8s;
using tfk8s::testing::FakeCluster;

// ---- the fourth kind: its types and its pure parts ------------------------------------------
namespace {

const ResourceType kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};
constexpr const char* kNoteLabel = "toy.tfk8s.io/note";

struct NoteSpec {
  std::string name;
  std::string namespace_name = "default";
  std::string owner;
  std::string text;
  void Validate() const {
    validation::RequireDns1035Label("name", name);
    if (text.empty()) throw ValidationError("text", text, "a note says something");
  }
};

struct NoteStatus {
  bool read = false;  // someone set data.read = "yes"
  bool operator==(const NoteStatus&) const = default;
};

class Note;

struct NoteKind {
  using Object = Note;
  using Spec = NoteSpec;
  using Status = NoteStatus;
  static constexpr const char* kName = "Note";
  static constexpr bool kWaitsForStatus = true;
};

Json NoteObject(const NoteSpec& spec) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata",
           {{"name", spec.name},
            {"namespace", spec.namespace_name},
            {"labels",
             {{kNoteLabel, spec.name},
              {kOwnerLabel, spec.owner},
              {std::string(kManagedByLabel), std::string(kManagedByValue)}}}}},
          {"data", {{"text", spec.text}}}};
}

}  // namespace

template <>
struct tfk8s::internal::KindOps<NoteKind> {
  static NoteSpec FromRoot(const Json& cm, RootIdentity* identity) {
    *identity = IdentityOf(cm, "ConfigMap", "Note", kNoteLabel, true);
    return {identity->name, identity->namespace_name, identity->owner,
            cm["data"].value("text", "")};
  }
  static constexpr KindFacts<NoteSpec> kFacts{
      "note",     validation::RequireDns1035Label,
      kNoteLabel, &kConfigMaps,
      &FromRoot,  [](const NoteSpec& spec) { return std::vector<Json>{NoteObject(spec)}; },
      true};
  static std::string RefSelector() { return kNoteLabel; }
  static FitResult Preflight(Client& /*client*/, const NoteSpec& /*spec*/) { return {}; }
  static NoteStatus Status(Client& client, const NoteSpec& spec) {
    Json cm = GetChecked(client, kConfigMaps, spec.namespace_name, spec.name);
    return {cm["data"].value("read", "") == "yes"};
  }
  static std::vector<WaitWatch> Watches(const NoteSpec& spec) {
    return {{&kConfigMaps, ByField("metadata.name=" + spec.name)}};
  }
  static std::pair<NoteStatus, WaitVerdict> Judge(JudgeContext<NoteSpec>& /*wait*/,
                                                  const WaitSnapshot& snapshot) {
    WaitVerdict verdict;
    NoteStatus st;
    if (snapshot.synced && !snapshot.objects[0].empty()) {
      st.read = snapshot.objects[0].front()["data"].value("read", "") == "yes";
    }
    verdict.report = snapshot.synced;
    verdict.done = st.read;
    verdict.progress = st.read ? "read" : "unread";
    verdict.message = verdict.progress;
    return {st, verdict};
  }
};

namespace {

class Note : public Workload<NoteKind> {
 public:
  using Workload::Workload;
  void Apply() {  // the kind's own verb (the spine has no generic apply yet)
    client_.Apply(internal::WithUidPrecondition(Render().front(), root_uid_), {});
  }
  [[nodiscard]] const std::string& root_uid() const { return root_uid_; }
};

}  // namespace

template class tfk8s::Workload<NoteKind>;

namespace {

NoteSpec Spec(const std::string& name, const std::string& ns, const std::string& owner) {
  return {name, ns, owner, "hello " + owner};
}

TFClusterSpec SmallCluster() {
  TFClusterSpec tf;
  tf.name = "mnist";
  tf.namespace_name = "team-a";
  tf.owner = "alice";
  tf.ps.replicas = 1;
  tf.worker.replicas = 2;
  tf.worker.script = "python train.py";
  return tf;
}

ScheduledJobSpec Task() {
  ScheduledJobSpec sj;
  sj.name = "nightly";
  sj.namespace_name = "team-a";
  sj.owner = "alice";
  sj.image = "python:3";
  sj.entry_path = "train.py";
  return sj;
}

DevInstanceSpec Lab() {
  DevInstanceSpec dev;
  dev.name = "lab";
  dev.namespace_name = "team-a";
  dev.owner = "alice";
  dev.resources = {"1", "1Gi", "", "", 0};
  return dev;
}

}  // namespace

TEST_SUITE("workload spine") {
  TEST_CASE("a fourth kind gets load, listing, status, wait and YAML from its pure parts") {
    FakeCluster fake;
    Client client = fake.client();
    Note(client, Spec("groceries", "team-a", "alice")).Apply();
    Note(client, Spec("todo", "team-b", "bob")).Apply();

    Note loaded = Note::Load(client, "team-a", "groceries");
    CHECK(loaded.spec().owner == "alice");
    CHECK(loaded.spec().text == "hello alice");
    CHECK_FALSE(loaded.root_uid().empty());
    CHECK(Note::ListRefs(client) ==
          std::vector<WorkloadRef>{{"team-a", "groceries", "alice"}, {"team-b", "todo", "bob"}});
    CHECK(Note::ListRefs(client, "", "bob") == std::vector<WorkloadRef>{{"team-b", "todo", "bob"}});
    CHECK(Note::List(client, "team-b") == std::vector<std::string>{"todo"});
    CHECK_THROWS_AS(Note::List(client, ""), ValidationError);
    CHECK(loaded.ToYaml().find("text: hello alice") != std::string::npos);
    CHECK(loaded.Preflight().fits);
    CHECK_FALSE(loaded.Status().read);

    // The wait is the engine's: it ends when the watched object says so, with progress.
    std::vector<NoteStatus> seen;
    std::thread reader([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      Json cm = *fake.Find("v1", "ConfigMap", "team-a", "groceries");
      cm["data"]["read"] = "yes";
      fake.Add(cm);
    });
    NoteStatus done = loaded.Wait({.timeout = std::chrono::seconds(20),
                                   .on_progress = [&](const NoteStatus& s) { seen.push_back(s); }});
    reader.join();
    CHECK(done.read);
    REQUIRE_FALSE(seen.empty());
    CHECK(seen.back().read);
    CHECK(loaded.Status().read);

    // Load checks the name before anything is sent.
    fake.ClearRequests();
    CHECK_THROWS_AS(Note::Load(client, "team-a", "a,b"), ValidationError);
    CHECK(fake.requests().empty());
    CHECK_THROWS_AS(Note::Load(client, "team-a", "missing"), NotFound);
  }

  TEST_CASE("a wait on the fourth kind times out naming it, like every kind's") {
    FakeCluster fake;
    Client client = fake.client();
    Note(client, Spec("memo", "team-a", "alice")).Apply();
    CHECK_THROWS_WITH_AS(
        Note::Load(client, "team-a", "memo").Wait({.timeout = std::chrono::milliseconds(300)}),
        doctest::Contains("Note team-a/memo"), Timeout);
  }

  TEST_CASE("no kind can be renamed, moved or given away by set_spec") {
    Client client = FakeCluster().client();
    auto refuses = [](auto& workload, auto spec, const char* what) {
      CAPTURE(what);
      CHECK_THROWS_WITH_AS(workload.set_spec(spec),
                           doctest::Contains("renamed, moved or given away"), ValidationError);
    };
    TFCluster cluster(client, SmallCluster());
    ScheduledJob job(client, Task());
    DevInstance lab(client, Lab());
    Note note(client, Spec("memo", "team-a", "alice"));
    auto each = [&](auto& workload) {
      auto s = workload.spec();
      s.name = "other";
      refuses(workload, s, "name");
      s = workload.spec();
      s.namespace_name = "team-b";
      refuses(workload, s, "namespace");
      s = workload.spec();
      s.owner = "mallory";
      refuses(workload, s, "owner");
      workload.set_spec(workload.spec());  // the same identity is accepted
    };
    each(cluster);
    each(job);
    each(lab);
    each(note);
  }

  TEST_CASE(
      "every kind reads its logs with one options shape, and a source naming none is refused") {
    FakeCluster fake;
    Client client = fake.client();
    const auto keep = [](const WorkloadLogLine&) { return true; };
    fake.ClearRequests();
    CHECK_THROWS_WITH_AS(TFCluster(client, SmallCluster()).Logs({.source = "worker-7"}, keep),
                         doctest::Contains("worker-1"), ValidationError);
    CHECK_THROWS_WITH_AS(TFCluster(client, SmallCluster()).Logs({.source = "trainer"}, keep),
                         doctest::Contains("no such role or replica"), ValidationError);
    CHECK_THROWS_WITH_AS((void)DevInstance(client, Lab()).StreamLogs({.source = "lab-1"}),
                         doctest::Contains("lab-0"), ValidationError);
    CHECK(fake.requests().empty());  // refused before anything is read
    // A task's default source is its newest run: none yet is NotFound, saying so.
    CHECK_THROWS_WITH_AS(ScheduledJob(client, Task()).Logs(), doctest::Contains("no run yet"),
                         NotFound);
  }
}
