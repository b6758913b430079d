// Automatic clean-up against the local cluster: two watchers at once carry out a finished
// TFCluster's `cleanup` policy exactly once (the node simulator ends the chief as its pod
// annotations say), never touch what the cluster does not own or a cluster without a policy,
// and bound a task's manual / on-demand runs by its history limits.
#include <algorithm>
#include <mutex>
#include <set>

#include "../unit/webhook_receiver.hpp"
#include "cluster.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;
using tfk8s::testing::WebhookReceiver;

namespace {

const ResourceType kJobs{"batch", "v1", "Job", "jobs", true};
const ResourceType kServices{"", "v1", "Service", "services", true};
const ResourceType kSecrets{"", "v1", "Secret", "secrets", true};

TFClusterSpec FinishingCluster(const std::string& ns, const std::string& name,
                               TFCleanupPolicy policy, const std::string& chief_exit = "0") {
  TFClusterSpec s;
  s.name = name;
  s.namespace_name = ns;
  s.cleanup = policy;
  s.ps.replicas = 1;
  s.ps.resources = {"100m", "128Mi", "", "", 0};
  s.worker.replicas = 1;
  s.worker.resources = {"100m", "128Mi", "", "", 0};
  s.chief.replicas = 1;
  s.chief.resources = {"100m", "128Mi", "", "", 0};
  s.chief.restart_policy = "Never";
  s.chief.backoff_limit = 0;
  s.chief.pod_annotations = {{"sim.tfk8s.io/log-lines", "chief done"},
                             {"sim.tfk8s.io/exit-code", chief_exit},
                             {"sim.tfk8s.io/exit-after", "3"}};
  s.placement.cputype = "xeon-gold";
  s.session = TFSessionSpec{};
  s.tensorboard = TFTensorBoardSpec{};
  return s;
}

// Names ("Kind/name") of the objects labelled with the cluster.
std::set<std::string> Objects(Client& c, const std::string& ns, const std::string& cluster) {
  ListOptions sel;
  sel.label_selector = "tfk8s.io/cluster=" + cluster;
  std::set<std::string> out;
  for (const ResourceType& t : {kConfigMaps, kJobs, kServices, kSecrets, kDeployments,
                                ResourceType{"", "v1", "Pod", "pods", true}}) {
    const Json list = c.ListAll(t, ns, sel);  // alive for the loop (a temporary's member is not)
    for (const auto& o : list["items"]) {
      if (o["metadata"].contains("deletionTimestamp")) continue;
      out.insert(t.kind + "/" + o["metadata"].value("name", ""));
    }
  }
  return out;
}

std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

bool HasPrefix(const std::set<std::string>& s, const std::string& prefix) {
  return std::any_of(s.begin(), s.end(),
                     [&](const std::string& x) { return x.rfind(prefix, 0) == 0; });
}

// Two watchers, as two replicas of a platform's backend would run them.
struct TwoWatchers {
  WebhookReceiver receiver;
  std::mutex mu;
  std::vector<std::string> errors;
  std::unique_ptr<ScheduledJobWatcher> a, b;

  TwoWatchers(Client c, const std::string& ns, bool clusters, bool history) {
    ScheduledJobWatcherOptions wo;
    wo.namespace_name = ns;
    wo.clean_up_tf_clusters = clusters;
    wo.bound_history = history;
    wo.webhook = AlertWebhook{};
    wo.webhook->url = receiver.url();
    wo.on_error = [this](const std::string& e) {
      std::lock_guard lock(mu);
      errors.push_back(e);
    };
    wo.identity = "watcher-a";
    a = std::make_unique<ScheduledJobWatcher>(c, wo);
    wo.identity = "watcher-b";
    b = std::make_unique<ScheduledJobWatcher>(c, wo);
    a->Start();
    b->Start();
  }
  std::vector<Json> Alerts(const std::string& kind) {
    std::vector<Json> out;
    for (const auto& body : receiver.accepted()) {
      Json j = Json::parse(body);
      if (j["kind"] == kind) out.push_back(j);
    }
    return out;
  }
  void CheckClean() {
    a->Stop();
    b->Stop();
    CHECK_FALSE(a->error());
    CHECK_FALSE(b->error());
    std::lock_guard lock(mu);
    CHECK_MESSAGE(errors.empty(), (errors.empty() ? "" : errors.front()));
  }
};

}  // namespace

TEST_SUITE("cleanup") {
  TEST_CASE("keep-logs: ps, workers, session and TensorBoard go once; the chief's log stays") {
    Client c = AdminClient();
    TestNamespace ns(c, "cu");
    TwoWatchers w(c, ns.name(), true, false);
    TFCluster cluster(c, FinishingCluster(ns.name(), "train", TFCleanupPolicy::kKeepLogs));
    // A cluster without a policy finishes alongside and is left exactly as it is.
    TFClusterSpec plain_spec = FinishingCluster(ns.name(), "plain", TFCleanupPolicy::kNone);
    plain_spec.session.reset();
    TFCluster plain(c, plain_spec);
    cluster.Apply();
    plain.Apply();
    auto before = Objects(c, ns.name(), "train");
    REQUIRE(before.count("Secret/train-session-credentials") == 1);
    CHECK(plain.Wait({.until = WaitUntil::kFinished, .timeout = std::chrono::seconds(120)}).phase ==
          TFClusterPhase::kSucceeded);

    REQUIRE(TestNamespace::WaitFor([&] { return !w.Alerts("cleanup").empty(); },
                                   std::chrono::seconds(120)));
    auto after = Objects(c, ns.name(), "train");
    CHECK(after.count("ConfigMap/train") == 1);
    CHECK(after.count("Job/train-chief-0") == 1);
    for (const char* gone : {"Job/train-ps-0", "Job/train-worker-0", "Job/train-session",
                             "Service/train-ps", "Service/train-worker", "Service/train-session",
                             "Service/train-session-ssh", "Secret/train-session-credentials",
                             "Deployment/train-tf-board", "Service/train-tf-board"}) {
      CHECK_MESSAGE(after.count(gone) == 0, (std::string(gone) + " in " + Join(after)));
    }
    // The pods of what was deleted go too (garbage collector); the chief's pod stays.
    CHECK(TestNamespace::WaitFor(
        [&] {
          auto now = Objects(c, ns.name(), "train");
          return !HasPrefix(now, "Pod/train-ps-0") && !HasPrefix(now, "Pod/train-worker-0") &&
                 !HasPrefix(now, "Pod/train-session") && !HasPrefix(now, "Pod/train-tf-board");
        },
        std::chrono::seconds(60)));
    CHECK(HasPrefix(Objects(c, ns.name(), "train"), "Pod/train-chief-0"));
    std::vector<std::string> lines;
    cluster.Logs({.source = "chief"}, [&](const WorkloadLogLine& l) {
      lines.push_back(l.line);
      return true;
    });
    CHECK(std::find(lines.begin(), lines.end(), "chief done") != lines.end());
    CHECK(cluster.Status().phase == TFClusterPhase::kSucceeded);

    Json alert = w.Alerts("cleanup").front();
    CHECK(alert["tfCluster"] == "train");
    CHECK(alert["reason"] == "TFClusterSucceeded");
    CHECK(alert["job"] == "train-chief-0");
    CHECK(std::find(alert["deleted"].begin(), alert["deleted"].end(), "Job/train-ps-0") !=
          alert["deleted"].end());
    // Recorded on the root; two watchers, one clean-up, one alert, even after a while.
    CHECK(TestNamespace::WaitFor(
        [&] {
          auto root = c.Get(kConfigMaps, ns.name(), "train");
          auto a = root["metadata"].value("annotations", Json::object());
          return a.value("tfk8s.io/cleanup-state", "") == "delivered" &&
                 a.value("tfk8s.io/cleaned-up", "") == "keep-logs";
        },
        std::chrono::seconds(20)));
    std::this_thread::sleep_for(std::chrono::seconds(3));
    CHECK(w.Alerts("cleanup").size() == 1);
    CHECK(w.a->alerts_sent() + w.b->alerts_sent() == 1);
    // The cluster without a policy: untouched.
    auto plain_objects = Objects(c, ns.name(), "plain");
    CHECK(plain_objects.count("Job/plain-ps-0") == 1);
    CHECK(plain_objects.count("Deployment/plain-tf-board") == 1);
    w.CheckClean();
  }

  TEST_CASE("delete-all removes the cluster and nothing it does not own; a failed chief counts") {
    Client c = AdminClient();
    TestNamespace ns(c, "cu");
    // Objects carrying the cluster's label without being owned by it must survive.
    Json stray = ConfigMap("train-notes", {{"k", "v"}}, {{"tfk8s.io/cluster", "train"}});
    c.Create(kConfigMaps, ns.name(), stray);
    TwoWatchers w(c, ns.name(), true, false);
    TFClusterSpec spec =
        FinishingCluster(ns.name(), "train", TFCleanupPolicy::kDeleteAll, /*chief_exit=*/"1");
    spec.session.reset();
    TFCluster cluster(c, spec);
    cluster.Apply();
    REQUIRE(TestNamespace::WaitFor([&] { return !w.Alerts("cleanup").empty(); },
                                   std::chrono::seconds(120)));
    Json alert = w.Alerts("cleanup").front();
    CHECK(alert["reason"] == "TFClusterFailed");
    CHECK(alert["deleted"] == Json::array({"ConfigMap/train"}));
    CHECK(TestNamespace::WaitFor(
        [&] {
          auto left = Objects(c, ns.name(), "train");
          return left == std::set<std::string>{"ConfigMap/train-notes"};
        },
        std::chrono::seconds(60)));
    CHECK_MESSAGE(Objects(c, ns.name(), "train").count("ConfigMap/train-notes") == 1,
                  Join(Objects(c, ns.name(), "train")));
    std::this_thread::sleep_for(std::chrono::seconds(3));
    CHECK(w.Alerts("cleanup").size() == 1);
    w.CheckClean();
  }

  TEST_CASE("keep-session: the replicas stop, the session stays") {
    Client c = AdminClient();
    TestNamespace ns(c, "cu");
    TwoWatchers w(c, ns.name(), true, false);
    TFCluster cluster(c, FinishingCluster(ns.name(), "nb", TFCleanupPolicy::kKeepSession));
    cluster.Apply();
    REQUIRE(TestNamespace::WaitFor([&] { return !w.Alerts("cleanup").empty(); },
                                   std::chrono::seconds(120)));
    auto after = Objects(c, ns.name(), "nb");
    for (const char* kept :
         {"ConfigMap/nb", "Job/nb-chief-0", "Job/nb-session", "Service/nb-session",
          "Secret/nb-session-credentials", "Deployment/nb-tf-board"}) {
      CHECK_MESSAGE(after.count(kept) == 1, (std::string(kept) + " not in " + Join(after)));
    }
    for (const char* gone : {"Job/nb-ps-0", "Job/nb-worker-0", "Service/nb-ps"}) {
      CHECK_MESSAGE(after.count(gone) == 0, (std::string(gone) + " in " + Join(after)));
    }
    w.CheckClean();
  }

  TEST_CASE("history: manual and on-demand runs beyond the limits are pruned, oldest first") {
    Client c = AdminClient();
    TestNamespace ns(c, "cu");
    TwoWatchers w(c, ns.name(), false, true);
    auto task_spec = [&](const std::string& name) {
      ScheduledJobSpec s;
      s.name = name;
      s.namespace_name = ns.name();
      s.image = "python:3.11-slim";
      s.entry_path = "train.py";
      s.resources = {"100m", "128Mi", "", "", 0};
      s.placement.cputype = "xeon-gold";
      s.pod_annotations = {{"sim.tfk8s.io/exit-code", "0"}, {"sim.tfk8s.io/exit-after", "1"}};
      s.successful_jobs_history_limit = 1;
      return s;
    };
    ScheduledJob on_demand(c, task_spec("adhoc"));
    ScheduledJobSpec scheduled_spec = task_spec("nightly");
    scheduled_spec.schedule = "0 0 1 1 *";  // never during the test
    ScheduledJob scheduled(c, scheduled_spec);
    scheduled.Apply();
    std::vector<std::string> adhoc_runs, manual_runs;
    for (int i = 0; i < 3; ++i) {
      JobRun a = on_demand.RunNow();
      CHECK(on_demand.WaitForRun(a.name, {.timeout = std::chrono::seconds(60)}).result ==
            RunResult::kSucceeded);
      adhoc_runs.push_back(a.name);
      JobRun m = scheduled.RunNow();
      CHECK(scheduled.WaitForRun(m.name, {.timeout = std::chrono::seconds(60)}).result ==
            RunResult::kSucceeded);
      manual_runs.push_back(m.name);
      std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // distinct start times
    }
    auto names = [&](ScheduledJob& t) {
      std::vector<std::string> out;
      for (const auto& r : t.History()) out.push_back(r.name);
      return out;
    };
    CHECK(TestNamespace::WaitFor(
        [&] {
          return names(on_demand) == std::vector<std::string>{adhoc_runs.back()} &&
                 names(scheduled) == std::vector<std::string>{manual_runs.back()};
        },
        std::chrono::seconds(60)));
    // The on-demand task's two oldest runs were pruned by the watchers, once each.
    std::set<std::string> pruned;
    for (const auto& a : w.Alerts("cleanup")) {
      CHECK(a["reason"] == "HistoryLimit");
      pruned.insert(a["job"].get<std::string>());
    }
    CHECK(pruned.count(adhoc_runs[0]) == 1);
    CHECK(pruned.count(adhoc_runs[1]) == 1);
    CHECK(pruned.size() == w.Alerts("cleanup").size());  // no run reported twice
    w.CheckClean();
  }
}
