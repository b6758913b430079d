// Fleet against the local cluster: a DevInstance and a ScheduledJob of one owner in one
// namespace, a TFCluster of another owner in a second namespace; the Fleet (every namespace,
// narrowed to this test's label) sees each with its owner, namespace, phase and requested
// resources, a stop reaches the change callback, a deletion removes the entry.
#include <condition_variable>
#include <mutex>
#include <vector>

#include "cluster.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/fleet.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

constexpr std::int64_t kGi = 1024LL * 1024 * 1024;
constexpr std::int64_t kMi = 1024LL * 1024;

// Every change the callback saw, waited for on a condition variable.
class ChangeSink {
 public:
  std::function<void(const FleetChange&)> Callback() {
    return [this](const FleetChange& change) {
      std::lock_guard lock(mu_);
      changes_.push_back(change);
      cv_.notify_all();
    };
  }
  // The first change (in order) that `match` accepts, waiting up to `limit`.
  std::optional<FleetChange> WaitFor(const std::function<bool(const FleetChange&)>& match,
                                     std::chrono::milliseconds limit) {
    std::unique_lock lock(mu_);
    std::optional<FleetChange> found;
    cv_.wait_for(lock, limit, [&] {
      for (const auto& c : changes_) {
        if (match(c)) {
          found = c;
          return true;
        }
      }
      return false;
    });
    return found;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<FleetChange> changes_;
};

// Waits until the Fleet's entry for kind/ns/name satisfies `ok` (nullopt: absent).
bool WaitForEntry(const Fleet& fleet, FleetKind kind, const std::string& ns,
                  const std::string& name,
                  const std::function<bool(const std::optional<FleetEntry>&)>& ok) {
  return TestNamespace::WaitFor([&] { return ok(fleet.Get(kind, ns, name)); },
                                std::chrono::seconds(60));
}

}  // namespace

TEST_SUITE("fleet") {
  TEST_CASE("every workload in two namespaces, owners, resources, changes, deletion") {
    Client c = AdminClient();
    TestNamespace team_a(c, "fleet-a");
    TestNamespace team_b(c, "fleet-b");
    const std::string tag = UniqueName("fleet");
    const std::map<std::string, std::string> labels{{"fleet-test", tag}};

    FleetOptions options;
    options.label_selector = "fleet-test=" + tag;
    Fleet fleet(c, options);
    ChangeSink sink;
    fleet.OnChange(sink.Callback());
    REQUIRE(fleet.WaitForSync(std::chrono::seconds(30)));
    CHECK(fleet.Entries().empty());

    DevInstanceSpec dev;
    dev.name = "notebook";
    dev.namespace_name = team_a.name();
    dev.owner = "alice";
    dev.labels = labels;
    dev.resources = {"500m", "1Gi", "", "", 0};
    dev.home.size = "1Gi";
    DevInstance instance(c, dev);
    instance.Create();

    ScheduledJobSpec task;
    task.name = "nightly";
    task.namespace_name = team_a.name();
    task.owner = "alice";
    task.labels = labels;
    task.image = "python:3.11-slim";
    task.exec_command = "python3";
    task.entry_path = "train.py";
    task.resources = {"100m", "128Mi", "", "", 0};
    task.placement.cputype = "xeon-gold";
    task.schedule = "0 3 * * *";
    ScheduledJob scheduled(c, task);
    scheduled.Apply();

    TFClusterSpec tf;
    tf.name = "mnist";
    tf.namespace_name = team_b.name();
    tf.owner = "bob";
    tf.labels = labels;
    tf.ps.replicas = 1;
    tf.ps.resources = {"500m", "1Gi", "", "", 0};
    tf.worker.replicas = 2;
    tf.worker.resources = {"1", "2Gi", "", "", 1};
    tf.placement.cputype = "xeon-gold";
    tf.placement.gputype = "v100";
    TFCluster cluster(c, tf);
    cluster.Apply();

    // The cluster becomes Running from pod events alone (no request by the Fleet).
    REQUIRE(WaitForEntry(fleet, FleetKind::kTFCluster, team_b.name(), "mnist",
                         [](const auto& e) { return e && e->phase == "Running"; }));
    REQUIRE(WaitForEntry(fleet, FleetKind::kDevInstance, team_a.name(), "notebook",
                         [](const auto& e) { return e.has_value(); }));
    REQUIRE(WaitForEntry(fleet, FleetKind::kScheduledJob, team_a.name(), "nightly",
                         [](const auto& e) { return e.has_value(); }));

    auto tf_entry = *fleet.Get(FleetKind::kTFCluster, team_b.name(), "mnist");
    CHECK(tf_entry.owner == "bob");
    CHECK(tf_entry.namespace_name == team_b.name());
    CHECK(tf_entry.requested.gpus == 2);
    CHECK(tf_entry.requested.cpu_milli == 2500);
    CHECK(tf_entry.requested.memory_bytes == 5 * kGi);
    CHECK(tf_entry.Age().count() >= 0);
    CHECK(tf_entry.Age().count() < 600);

    auto dev_entry = *fleet.Get(FleetKind::kDevInstance, team_a.name(), "notebook");
    CHECK(dev_entry.owner == "alice");
    CHECK(dev_entry.requested.gpus == 0);
    CHECK(dev_entry.requested.cpu_milli == 500);
    CHECK(dev_entry.requested.memory_bytes == kGi);
    CHECK_MESSAGE((dev_entry.phase == "Pending" || dev_entry.phase == "Running"),
                  "phase " << dev_entry.phase << ": " << dev_entry.message);
    CHECK_FALSE(dev_entry.last_activity);  // never probed by the culler
    CHECK(dev_entry.ToJson()["last_activity"].is_null());

    // The idle culler records an instance's last activity on its StatefulSet (annotation
    // tfk8s.io/last-activity, RFC 3339): the entry shows it, from the watch alone.
    c.Patch(
        c.Resolve("apps/v1", "StatefulSet"), team_a.name(), "notebook", PatchType::kMerge,
        {{"metadata", {{"annotations", {{"tfk8s.io/last-activity", "2026-12-01T10:10:00Z"}}}}}});
    const auto recorded = std::chrono::system_clock::time_point(
        std::chrono::seconds(1'796'119'800));  // 2026-12-01T10:10:00Z
    REQUIRE(WaitForEntry(fleet, FleetKind::kDevInstance, team_a.name(), "notebook",
                         [&](const auto& e) { return e && e->last_activity == recorded; }));
    CHECK(
        fleet.Get(FleetKind::kDevInstance, team_a.name(), "notebook")->ToJson()["last_activity"] ==
        1'796'119'800);

    auto task_entry = *fleet.Get(FleetKind::kScheduledJob, team_a.name(), "nightly");
    CHECK(task_entry.owner == "alice");
    CHECK(task_entry.phase == "Scheduled");
    CHECK_MESSAGE(task_entry.message.find("0 3 * * *") != std::string::npos, task_entry.message);
    CHECK(task_entry.requested.cpu_milli == 100);
    CHECK(task_entry.requested.memory_bytes == 128 * kMi);

    std::vector<FleetEntry> alices = fleet.ByOwner("alice");
    REQUIRE(alices.size() == 2);
    CHECK(alices[0].kind == FleetKind::kDevInstance);  // sorted by kind, namespace, name
    CHECK(alices[1].kind == FleetKind::kScheduledJob);
    CHECK(fleet.ByNamespace(team_b.name()).size() == 1);
    CHECK(fleet.ByOwner("bob").size() == 1);
    CHECK(fleet.Entries().size() == 3);

    // The callback saw each one added.
    for (const char* name : {"notebook", "nightly", "mnist"}) {
      CHECK_MESSAGE(sink.WaitFor(
                        [&](const FleetChange& ch) {
                          return ch.type == FleetChangeType::kAdded && ch.entry.name == name;
                        },
                        std::chrono::seconds(5)),
                    "no ADDED change for " << name);
    }

    // A change: stopping the instance reaches the callback, and its pod no longer counts.
    instance.Stop();
    auto stopped = sink.WaitFor(
        [](const FleetChange& ch) {
          return ch.type == FleetChangeType::kModified && ch.entry.name == "notebook" &&
                 ch.entry.phase == "Stopped";
        },
        std::chrono::seconds(60));
    REQUIRE_MESSAGE(stopped, "no MODIFIED change to Stopped");
    CHECK(stopped->entry.requested.cpu_milli == 0);
    CHECK(stopped->entry.owner == "alice");

    // A deletion removes the entry (and the callback hears it).
    scheduled.Delete();
    REQUIRE(WaitForEntry(fleet, FleetKind::kScheduledJob, team_a.name(), "nightly",
                         [](const auto& e) { return !e.has_value(); }));
    auto removed = sink.WaitFor(
        [](const FleetChange& ch) {
          return ch.type == FleetChangeType::kRemoved && ch.entry.name == "nightly";
        },
        std::chrono::seconds(5));
    REQUIRE(removed);
    CHECK(removed->entry.kind == FleetKind::kScheduledJob);
    CHECK(fleet.ByOwner("alice").size() == 1);

    cluster.Delete();
    REQUIRE(WaitForEntry(fleet, FleetKind::kTFCluster, team_b.name(), "mnist",
                         [](const auto& e) { return !e.has_value(); }));
    fleet.Stop();
    CHECK(fleet.Entries().size() == 1);  // readable after Stop()
    instance.Delete();
  }

  TEST_CASE("one namespace: workloads elsewhere are not seen") {
    Client c = AdminClient();
    TestNamespace mine(c, "fleet-mine");
    TestNamespace other(c, "fleet-other");
    const std::string tag = UniqueName("fleet");
    FleetOptions options;
    options.namespace_name = mine.name();
    options.label_selector = "fleet-test=" + tag;
    Fleet fleet(c, options);
    REQUIRE(fleet.WaitForSync(std::chrono::seconds(30)));

    ScheduledJobSpec task;
    task.namespace_name = other.name();
    task.name = "elsewhere";
    task.labels = {{"fleet-test", tag}};
    task.image = "python:3.11-slim";
    task.entry_path = "train.py";
    task.schedule = "0 3 * * *";
    ScheduledJob(c, task).Apply(ApplyScheduleOptions{false});
    task.namespace_name = mine.name();
    task.name = "here";
    ScheduledJob(c, task).Apply(ApplyScheduleOptions{false});

    REQUIRE(WaitForEntry(fleet, FleetKind::kScheduledJob, mine.name(), "here",
                         [](const auto& e) { return e.has_value(); }));
    CHECK(fleet.Entries().size() == 1);
    CHECK_FALSE(fleet.Get(FleetKind::kScheduledJob, other.name(), "elsewhere"));
  }

  TEST_CASE("an informer that can never read its list reaches OnError and error(), not silence") {
    // Five TFCluster roots of 20,000 bytes each: their list is over the client's 64 KiB
    // response limit (discovery's answers, /apis included, are under it). Retrying cannot shrink
    // the list, so the ConfigMap informer gives up after five attempts (6-18 s at the default
    // backoff).
    Client c = AdminClient();
    TestNamespace ns(c, "fleet-err");
    for (int i = 0; i < 5; ++i) {
      c.Create(
          kConfigMaps, ns.name(),
          ConfigMap("root-" + std::to_string(i), {{"pad", std::string(20'000, 'x')}},
                    {{"app.kubernetes.io/managed-by", "tfk8s"}, {"tfk8s.io/component", "root"}}));
    }
    ClientConfig cfg = ConfigFor();
    cfg.max_response_bytes = 64 * 1024;
    FleetOptions options;
    options.namespace_name = ns.name();
    Fleet fleet(Client(cfg), options);
    std::mutex mu;
    std::condition_variable cv;
    std::vector<FleetError> errors;
    fleet.OnError([&](const FleetError& e) {
      std::lock_guard lock(mu);
      errors.push_back(e);
      cv.notify_all();
    });
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(30),
                        [&] { return !errors.empty() && errors.back().failure.fatal; }));
    const FleetError& fatal = errors.back();
    CHECK(fatal.source == "ConfigMap");
    CHECK(fatal.failure.kind == ErrorKind::kTransport);  // ResponseTooLarge's kind
    CHECK(fatal.failure.consecutive == Informer::kDefaultFailureLimit);
    CHECK_THROWS_AS(std::rethrow_exception(fatal.failure.error), ResponseTooLarge);
    // The attempts before it were reported as they happened, as retried, in order and none
    // missing. Failures before OnError was registered are not replayed (documented): the Fleet
    // starts in its constructor, and a slow start (ThreadSanitizer) can fail once before the
    // callback is set, so the run may begin after attempt 1 but has no gap after that.
    const int first = errors.front().failure.consecutive;
    CHECK(first >= 1);
    for (std::size_t i = 0; i < errors.size(); ++i) {
      CHECK(errors[i].source == "ConfigMap");
      CHECK(errors[i].failure.consecutive == first + static_cast<int>(i));
      if (i + 1 < errors.size()) CHECK_FALSE(errors[i].failure.fatal);
    }
    lock.unlock();
    CHECK_THROWS_AS(std::rethrow_exception(fleet.error()), ResponseTooLarge);
    CHECK_THROWS_AS(fleet.WaitForSync(std::chrono::seconds(1)), ResponseTooLarge);
    REQUIRE(fleet.last_error().has_value());
    CHECK(fleet.last_error()->failure.fatal);
  }
}
