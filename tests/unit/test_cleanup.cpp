// Automatic clean-up without a server: the policy's JSON round trip and validation, when a
// cluster counts as finished, what each policy deletes of a rendered cluster (and nothing it
// does not own), the claim annotations, and which runs a task's history limits prune.
#include <doctest/doctest.h>

#include <algorithm>

#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"
#include "workloads/cleanup.hpp"
#include "workloads/cron.hpp"
#include "workloads/kinds.hpp"

using namespace tfk8s;
using tfk8s::internal::ParseTimestamp;
using tfk8s::internal::SysSeconds;

namespace {

SysSeconds T(const char* text) { return *ParseTimestamp(text); }

TFClusterSpec Spec(TFCleanupPolicy policy) {
  TFClusterSpec s;
  s.name = "mnist";
  s.namespace_name = "team-a";
  s.ps.replicas = 2;
  s.worker.replicas = 2;
  s.chief.replicas = 1;
  s.session = TFSessionSpec{};
  s.tensorboard = TFTensorBoardSpec{};
  s.storage = TFStorageSpec{};
  s.cleanup = policy;
  return s;
}

// The cluster as the server would hold it: rendered with the root's UID (so every child
// carries the ownerReference), with names, UIDs and the session Secret.
struct Served {
  Json root;
  std::vector<internal::OwnedObject> objects;
  std::vector<Json> jobs;
};

const ResourceType* TypeOf(const Json& o) {
  using namespace internal::kinds;
  std::string kind = o.value("kind", "");
  for (const ResourceType* t : {&kJobs, &kStatefulSets, &kDeployments, &kReplicaSets, &kServices,
                                &kSecrets, &kPvcs, &kConfigMaps}) {
    if (t->kind == kind) return t;
  }
  return nullptr;
}

Served Serve(const TFClusterSpec& spec) {
  TFRenderOptions o;
  o.root_uid = "uid-root";
  o.session_credentials = DevCredentials{};
  auto rendered = RenderTFCluster(spec, o);
  Served s;
  s.root = rendered.front();
  s.root["metadata"]["uid"] = "uid-root";
  s.root["metadata"]["resourceVersion"] = "10";
  for (std::size_t i = 1; i < rendered.size(); ++i) {
    Json obj = rendered[i];
    obj["metadata"]["uid"] =
        "uid-" + obj["metadata"].value("name", "") + "-" + obj.value("kind", "");
    s.objects.push_back({TypeOf(obj), obj});
    if (obj.value("kind", "") == "Job") s.jobs.push_back(obj);
  }
  return s;
}

void Finish(Json* job, const char* condition) {
  (*job)["status"]["conditions"] =
      Json::array({{{"type", condition}, {"status", "True"}, {"reason", condition}}});
  (*job)["status"]["startTime"] = "2024-03-01T10:00:00Z";
  if (std::string(condition) == "Complete") {
    (*job)["status"]["completionTime"] = "2024-03-01T11:00:00Z";
  }
}

Json* Find(Served* s, const std::string& name) {
  for (auto& j : s->jobs) {
    if (j["metadata"].value("name", "") == name) return &j;
  }
  return nullptr;
}

// Marks Jobs finished in both views (the Jobs the decision reads and the objects the plan reads).
void FinishJob(Served* s, const std::string& name, const char* condition) {
  Finish(Find(s, name), condition);
  for (auto& o : s->objects) {
    if (o.object["metadata"].value("name", "") == name && o.object.value("kind", "") == "Job") {
      Finish(&o.object, condition);
    }
  }
}

std::vector<std::string> Names(const std::vector<internal::CleanupTarget>& targets) {
  std::vector<std::string> out;
  for (const auto& t : targets) out.push_back(t.type->kind + "/" + t.name);
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

Json Run(const std::string& name, const std::string& condition, const std::string& start,
         const std::string& trigger) {
  Json job = {{"apiVersion", "batch/v1"},
              {"kind", "Job"},
              {"metadata",
               {{"name", name},
                {"namespace", "team-a"},
                {"uid", "uid-" + name},
                {"resourceVersion", "5"},
                {"creationTimestamp", start},
                {"labels", {{"tfk8s.io/scheduledjob", "nightly"}}}}},
              {"status", {{"startTime", start}}}};
  if (trigger != "on-demand") {
    job["metadata"]["ownerReferences"] =
        Json::array({{{"kind", "CronJob"}, {"name", "nightly"}, {"uid", "cj"}}});
  }
  if (trigger == "manual") {
    job["metadata"]["annotations"] = {{"cronjob.kubernetes.io/instantiate", "manual"}};
  }
  if (condition.empty()) {
    job["status"]["active"] = 1;
  } else {
    job["status"][condition == "Complete" ? "succeeded" : "failed"] = 1;
    job["status"]["conditions"] = Json::array(
        {{{"type", condition}, {"status", "True"}, {"reason", "BackoffLimitExceeded"}}});
  }
  return job;
}

std::vector<std::string> Pruned(const internal::HistoryPlan& plan) {
  std::vector<std::string> out;
  for (const auto& p : plan.prune) out.push_back(p.job["metadata"].value("name", ""));
  return out;
}

}  // namespace

TEST_SUITE("cleanup") {
  TEST_CASE("the cleanup policy: names, JSON round trip, default omitted, validation") {
    for (auto p : {TFCleanupPolicy::kNone, TFCleanupPolicy::kDeleteAll,
                   TFCleanupPolicy::kKeepSession, TFCleanupPolicy::kKeepLogs}) {
      CHECK(ParseTFCleanupPolicy(ToString(p)) == p);
      TFClusterSpec s = Spec(p);
      CHECK(TFClusterSpec::FromJson(s.ToJson()).cleanup == p);
      CHECK(s.ToJson().contains("cleanup") == (p != TFCleanupPolicy::kNone));
    }
    CHECK(ToString(TFCleanupPolicy::kKeepLogs) == "keep-logs");
    Json bad = Spec(TFCleanupPolicy::kNone).ToJson();
    bad["cleanup"] = "sometimes";
    try {
      TFClusterSpec::FromJson(bad);
      FAIL("accepted an unknown policy");
    } catch (const ValidationError& e) {
      CHECK(e.field() == "cleanup");
    }
    TFClusterSpec sts = Spec(TFCleanupPolicy::kKeepLogs);
    sts.topology = TFTopology::kStatefulSet;
    CHECK_THROWS_AS(sts.Validate(), ValidationError);
    sts.cleanup = TFCleanupPolicy::kNone;
    CHECK_NOTHROW(sts.Validate());
  }

  TEST_CASE("a cluster is finished once its chief's Job (worker 0 without one) has ended") {
    SysSeconds now = T("2024-03-01T12:00:00Z");
    Served s = Serve(Spec(TFCleanupPolicy::kKeepLogs));
    CHECK_FALSE(internal::DecideTFCleanup(s.root, s.jobs, now).act);  // everything running
    // A failed worker does not end the cluster while the chief runs.
    Finish(Find(&s, "mnist-worker-1"), "Failed");
    CHECK_FALSE(internal::DecideTFCleanup(s.root, s.jobs, now).act);
    Finish(Find(&s, "mnist-chief-0"), "Complete");
    auto d = internal::DecideTFCleanup(s.root, s.jobs, now);
    CHECK(d.act);
    CHECK(d.result == "Succeeded");
    CHECK(d.decider == "chief-0");
    CHECK(d.policy == TFCleanupPolicy::kKeepLogs);
    // A failed chief finishes it too (as TTL-after-finished treats Failed Jobs).
    Finish(Find(&s, "mnist-chief-0"), "Failed");
    CHECK(internal::DecideTFCleanup(s.root, s.jobs, now).result == "Failed");
    // A same-named Job not owned by this root is not evidence.
    Json* chief = Find(&s, "mnist-chief-0");
    (*chief)["metadata"]["ownerReferences"][0]["uid"] = "someone-else";
    CHECK_FALSE(internal::DecideTFCleanup(s.root, s.jobs, now).act);

    // Without a chief, worker 0 decides; policy none never acts.
    TFClusterSpec no_chief = Spec(TFCleanupPolicy::kDeleteAll);
    no_chief.chief.replicas = 0;
    Served w = Serve(no_chief);
    Finish(Find(&w, "mnist-worker-0"), "Complete");
    CHECK(internal::DecideTFCleanup(w.root, w.jobs, now).decider == "worker-0");
    Served none = Serve(Spec(TFCleanupPolicy::kNone));
    Finish(Find(&none, "mnist-chief-0"), "Complete");
    CHECK_FALSE(internal::DecideTFCleanup(none.root, none.jobs, now).act);
    // A root being deleted is left alone; a root without a spec is an error.
    Json deleting = w.root;
    deleting["metadata"]["deletionTimestamp"] = "2024-03-01T11:59:00Z";
    CHECK_FALSE(internal::DecideTFCleanup(deleting, w.jobs, now).act);
    Json broken = w.root;
    broken["data"].erase("spec.json");
    CHECK_THROWS_AS(internal::DecideTFCleanup(broken, w.jobs, now), ValidationError);
  }

  TEST_CASE("claims: done once per chief run, a live claim waits, an expired one is retaken") {
    Served s = Serve(Spec(TFCleanupPolicy::kKeepSession));
    Finish(Find(&s, "mnist-chief-0"), "Complete");
    Json& a = s.root["metadata"]["annotations"];
    a = {{"tfk8s.io/cleaned-up", "keep-session"},
         {"tfk8s.io/cleanup-of", "uid-mnist-chief-0-Job"},
         {"tfk8s.io/cleanup-state", "delivered"}};
    CHECK_FALSE(internal::DecideTFCleanup(s.root, s.jobs, T("2024-03-01T12:00:00Z")).act);
    a["tfk8s.io/cleanup-state"] = "sending";
    a["tfk8s.io/cleanup-deadline"] = "2024-03-01T12:01:00Z";
    auto d = internal::DecideTFCleanup(s.root, s.jobs, T("2024-03-01T12:00:00Z"));
    CHECK_FALSE(d.act);
    REQUIRE(d.recheck_at);
    CHECK(*d.recheck_at == T("2024-03-01T12:01:00Z"));
    d = internal::DecideTFCleanup(s.root, s.jobs, T("2024-03-01T12:01:00Z"));
    CHECK(d.act);
    CHECK(d.reclaim);
    // The cluster run again (a new chief Job): cleaned up again.
    a["tfk8s.io/cleanup-state"] = "delivered";
    (*Find(&s, "mnist-chief-0"))["metadata"]["uid"] = "uid-chief-second-run";
    d = internal::DecideTFCleanup(s.root, s.jobs, T("2024-03-01T12:00:00Z"));
    CHECK(d.act);
    CHECK_FALSE(d.reclaim);
  }

  TEST_CASE("what each policy deletes of a finished cluster") {
    Served s = Serve(Spec(TFCleanupPolicy::kKeepLogs));
    FinishJob(&s, "mnist-chief-0", "Complete");
    FinishJob(&s, "mnist-worker-0", "Complete");

    auto all = Names(internal::PlanTFCleanup(s.root, TFCleanupPolicy::kDeleteAll, s.objects));
    CHECK(all == std::vector<std::string>{"ConfigMap/mnist"});
    CHECK(internal::PlanTFCleanup(s.root, TFCleanupPolicy::kNone, s.objects).empty());

    auto keep_session =
        Names(internal::PlanTFCleanup(s.root, TFCleanupPolicy::kKeepSession, s.objects));
    // The ps and the worker still serving stop; the finished chief and worker 0 stay.
    for (const char* gone : {"Job/mnist-ps-0", "Job/mnist-ps-1", "Job/mnist-worker-1",
                             "Service/mnist-ps", "Service/mnist-worker", "Service/mnist-chief"}) {
      CHECK_MESSAGE(Has(keep_session, gone), gone);
    }
    for (const char* kept :
         {"Job/mnist-chief-0", "Job/mnist-worker-0", "Job/mnist-session", "Service/mnist-session",
          "Deployment/mnist-tf-board", "PersistentVolumeClaim/mnist-data", "ConfigMap/mnist"}) {
      CHECK_FALSE_MESSAGE(Has(keep_session, kept), kept);
    }
    CHECK(keep_session.size() == 6);
    // Workloads first (they hold the resources), then Services.
    CHECK(keep_session.front().rfind("Job/", 0) == 0);
    CHECK(keep_session.back().rfind("Service/", 0) == 0);

    auto keep_logs = Names(internal::PlanTFCleanup(s.root, TFCleanupPolicy::kKeepLogs, s.objects));
    for (const char* gone :
         {"Job/mnist-ps-0", "Job/mnist-worker-1", "Job/mnist-session", "Service/mnist-session",
          "Service/mnist-session-ssh", "Secret/mnist-session-credentials",
          "Deployment/mnist-tf-board", "Service/mnist-tf-board"}) {
      CHECK_MESSAGE(Has(keep_logs, gone), gone);
    }
    for (const char* kept : {"Job/mnist-chief-0", "Job/mnist-worker-0",
                             "PersistentVolumeClaim/mnist-data", "ConfigMap/mnist"}) {
      CHECK_FALSE_MESSAGE(Has(keep_logs, kept), kept);
    }
    CHECK(keep_logs.back() == "Secret/mnist-session-credentials");
    CHECK(internal::TFCleanupKinds(TFCleanupPolicy::kDeleteAll).empty());
  }

  TEST_CASE("nothing the finished cluster does not own is deleted") {
    Served s = Serve(Spec(TFCleanupPolicy::kKeepLogs));
    FinishJob(&s, "mnist-chief-0", "Complete");
    std::vector<internal::OwnedObject> foreign = s.objects;
    for (auto& o : foreign) o.object["metadata"].erase("ownerReferences");
    CHECK(internal::PlanTFCleanup(s.root, TFCleanupPolicy::kKeepLogs, foreign).empty());
    for (auto& o : foreign) {
      o.object["metadata"]["ownerReferences"] =
          Json::array({{{"kind", "ConfigMap"}, {"name", "mnist"}, {"uid", "an-older-root"}}});
    }
    CHECK(internal::PlanTFCleanup(s.root, TFCleanupPolicy::kKeepLogs, foreign).empty());
    // Objects already being deleted are not deleted again; every target carries its UID.
    std::vector<internal::OwnedObject> going = s.objects;
    for (auto& o : going) o.object["metadata"]["deletionTimestamp"] = "2024-03-01T11:00:00Z";
    CHECK(internal::PlanTFCleanup(s.root, TFCleanupPolicy::kKeepLogs, going).empty());
    for (const auto& t : internal::PlanTFCleanup(s.root, TFCleanupPolicy::kKeepLogs, s.objects)) {
      CHECK_MESSAGE(t.uid == "uid-" + t.name + "-" + t.type->kind, t.name);
    }
  }

  TEST_CASE("the cleanup alert names the cluster, the result and what went") {
    Served s = Serve(Spec(TFCleanupPolicy::kKeepLogs));
    Finish(Find(&s, "mnist-chief-0"), "Complete");
    auto d = internal::DecideTFCleanup(s.root, s.jobs, T("2024-03-01T12:00:00Z"));
    REQUIRE(d.act);
    ScheduledJobAlert a = internal::AlertForTFCleanup(
        s.root, d, {"Job/mnist-ps-0", "Service/mnist-ps"}, T("2024-03-01T12:00:00Z"));
    Json j = a.ToJson();
    CHECK(j["kind"] == "cleanup");
    CHECK(j["tfCluster"] == "mnist");
    CHECK(j["namespace"] == "team-a");
    CHECK(j["job"] == "mnist-chief-0");
    CHECK(j["reason"] == "TFClusterSucceeded");
    CHECK(j["deleted"] == Json::array({"Job/mnist-ps-0", "Service/mnist-ps"}));
    CHECK(j["endTime"] == "2024-03-01T11:00:00Z");
    CHECK(a.message.find("keep-logs") != std::string::npos);
    CHECK(a.message.find("Job/mnist-ps-0") != std::string::npos);
  }

  TEST_CASE("history limits: from the CronJob, else the newest stored spec, else defaults") {
    Json cj = {{"spec", {{"successfulJobsHistoryLimit", 5}, {"failedJobsHistoryLimit", 0}}}};
    auto l = internal::TaskHistoryLimits(&cj, {});
    CHECK(l.successful == 5);
    CHECK(l.failed == 0);
    // An on-demand task's runs carry its whole spec (as RunNow writes it).
    auto with_spec = [](Json run, const std::string& task, Json limits) {
      Json spec = {{"name", task},
                   {"namespace", "team-a"},
                   {"image", "python:3.11-slim"},
                   {"execCommand", "python3"},
                   {"entryPath", "train.py"}};
      spec.update(limits);
      run["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "tfk8s";
      run["metadata"]["annotations"] = {{"tfk8s.io/spec", spec.dump()}};
      return run;
    };
    Json old_run = with_spec(Run("a", "Complete", "2024-03-01T10:00:00Z", "on-demand"), "nightly",
                             {{"successfulJobsHistoryLimit", 7}, {"failedJobsHistoryLimit", 2}});
    Json new_run = with_spec(Run("b", "Complete", "2024-03-01T11:00:00Z", "on-demand"), "nightly",
                             {{"successfulJobsHistoryLimit", 1}});
    l = internal::TaskHistoryLimits(nullptr, {new_run, old_run});
    CHECK(l.successful == 1);
    CHECK(l.failed == 1);  // absent: Kubernetes' default
    // The newest run's spec names another task (its owner rewrote it): passed over (#35).
    Json forged = with_spec(Run("c", "Complete", "2024-03-01T12:00:00Z", "on-demand"), "other",
                            {{"successfulJobsHistoryLimit", 0}});
    l = internal::TaskHistoryLimits(nullptr, {forged, new_run, old_run});
    CHECK(l.successful == 1);
    l = internal::TaskHistoryLimits(nullptr, {Run("c", "", "2024-03-01T10:00:00Z", "manual")});
    CHECK(l.successful == 3);
    CHECK(l.failed == 1);
  }

  TEST_CASE("history: oldest finished manual and on-demand runs beyond the limit are pruned") {
    ScheduledJobWatcherOptions o;
    o.alert_on_failure = false;
    SysSeconds now = T("2024-03-02T00:00:00Z");
    std::vector<Json> runs = {
        Run("s1", "Complete", "2024-03-01T01:00:00Z", "manual"),
        Run("s2", "Complete", "2024-03-01T02:00:00Z", "scheduled"),
        Run("s3", "Complete", "2024-03-01T03:00:00Z", "on-demand"),
        Run("s4", "Complete", "2024-03-01T04:00:00Z", "manual"),
        Run("s5", "Complete", "2024-03-01T05:00:00Z", "manual"),
        Run("active-old", "", "2024-03-01T00:00:00Z", "manual"),
        Run("f1", "Failed", "2024-03-01T01:30:00Z", "manual"),
        Run("f2", "Failed", "2024-03-01T02:30:00Z", "manual"),
    };
    auto plan = internal::PlanHistoryPrune(runs, {2, 1}, now, o);
    // Successful: s5, s4 kept; s3 and s1 pruned; s2 is the controller's. Failed: f2 kept.
    CHECK(Pruned(plan) == std::vector<std::string>{"s3", "s1", "f1"});
    CHECK(plan.prune[0].message.find("(history limit 2)") != std::string::npos);
    // Limits of 0 keep no finished run; the active one still is never touched.
    auto none_kept = Pruned(internal::PlanHistoryPrune(runs, {0, 0}, now, o));
    CHECK(none_kept.size() == 6);
    CHECK_FALSE(Has(none_kept, "active-old"));
    CHECK_FALSE(Has(none_kept, "s2"));
    // Within the limits: nothing.
    CHECK(internal::PlanHistoryPrune(runs, {10, 10}, now, o).prune.empty());
  }

  TEST_CASE("history: failed runs wait for their alert, claims are honoured") {
    ScheduledJobWatcherOptions o;  // alerts on
    SysSeconds now = T("2024-03-01T12:00:00Z");
    std::vector<Json> runs = {Run("f1", "Failed", "2024-03-01T10:00:00Z", "on-demand"),
                              Run("f2", "Failed", "2024-03-01T11:00:00Z", "on-demand")};
    // f1 is past the limit but its failure has not been alerted yet.
    CHECK(internal::PlanHistoryPrune(runs, {3, 1}, now, o).prune.empty());
    runs[0]["metadata"]["annotations"] = {{"tfk8s.io/alerted", "failure"},
                                          {"tfk8s.io/alert-state", "sending"},
                                          {"tfk8s.io/alert-deadline", "2024-03-01T12:05:00Z"}};
    auto plan = internal::PlanHistoryPrune(runs, {3, 1}, now, o);
    CHECK(plan.prune.empty());
    REQUIRE(plan.recheck_at);
    runs[0]["metadata"]["annotations"]["tfk8s.io/alert-state"] = "delivered";
    CHECK(Pruned(internal::PlanHistoryPrune(runs, {3, 1}, now, o)) ==
          std::vector<std::string>{"f1"});
    // Another watcher's live prune claim: wait; expired: take it over; settled: leave it.
    runs[0]["metadata"]["annotations"]["tfk8s.io/cleanup-state"] = "sending";
    runs[0]["metadata"]["annotations"]["tfk8s.io/cleanup-deadline"] = "2024-03-01T12:01:00Z";
    plan = internal::PlanHistoryPrune(runs, {3, 1}, now, o);
    CHECK(plan.prune.empty());
    REQUIRE(plan.recheck_at);
    CHECK(*plan.recheck_at == T("2024-03-01T12:01:00Z"));
    CHECK(Pruned(internal::PlanHistoryPrune(runs, {3, 1}, T("2024-03-01T12:01:00Z"), o)) ==
          std::vector<std::string>{"f1"});
    ScheduledJobAlert a = internal::AlertForPrunedRun(
        internal::PlanHistoryPrune(runs, {3, 1}, T("2024-03-01T12:01:00Z"), o).prune.at(0),
        T("2024-03-01T12:01:00Z"));
    CHECK(a.kind == AlertKind::kCleanup);
    CHECK(a.reason == "HistoryLimit");
    CHECK(a.scheduled_job == "nightly");
    CHECK(a.deleted == std::vector<std::string>{"Job/f1"});
    // Being deleted already: left alone.
    runs[0]["metadata"]["annotations"].erase("tfk8s.io/cleanup-state");
    runs[0]["metadata"]["deletionTimestamp"] = "2024-03-01T11:59:00Z";
    CHECK(internal::PlanHistoryPrune(runs, {3, 1}, now, o).prune.empty());
  }
}
