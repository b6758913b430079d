// The pre-flight against a namespace's Pod Security labels, on the local cluster: a namespace
// labelled `pod-security.kubernetes.io/enforce` refuses, before anything is created, a workload
// whose pods would break its level (the v1.20 server has no Pod Security admission, so what is
// tested is tfk8s's own refusal: a v1.23+ server would refuse the pods only when the controller
// creates them, after the other objects exist); the warn option creates and reports instead.
#include <string>
#include <vector>

#include "cluster.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"
#include "workloads/kinds.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

using internal::kinds::kJobs;
using internal::kinds::kSecrets;
using internal::kinds::kServices;
using internal::kinds::kStatefulSets;

void LabelNamespace(Client& c, const std::string& ns, const Json& labels) {
  c.Patch(kNamespaces, "", ns, PatchType::kMerge, {{"metadata", {{"labels", labels}}}});
}

std::size_t Count(Client& c, const ResourceType& t, const std::string& ns) {
  return c.ListAll(t, ns)["items"].size();
}

DevInstanceSpec Dev(const std::string& ns) {
  DevInstanceSpec s;
  s.owner = "alice";
  s.name = "nb";
  s.namespace_name = ns;
  s.resources = {"100m", "128Mi", "", "", 0};
  s.home.enabled = false;
  return s;
}

}  // namespace

TEST_SUITE("pod security pre-flight") {
  TEST_CASE("enforce restricted: a DevInstance is refused with nothing created; warn creates it") {
    Client c = AdminClient();
    TestNamespace ns(c, "pss");
    LabelNamespace(c, ns.name(), {{"pod-security.kubernetes.io/enforce", "restricted"}});

    DevInstance refused(c, Dev(ns.name()));
    try {
      refused.Create();
      FAIL("a baseline DevInstance was created in a namespace enforcing restricted");
    } catch (const DevInstanceFailed& e) {
      std::string what = e.what();
      CHECK(what.find("nothing was changed") != std::string::npos);
      CHECK(what.find("enforces \"restricted\": StatefulSet nb breaks") != std::string::npos);
    }
    CHECK(Count(c, kStatefulSets, ns.name()) == 0);
    CHECK(Count(c, kServices, ns.name()) == 0);
    CHECK(Count(c, kSecrets, ns.name()) == 1);  // the default account's token only

    // Preflight() says the same, without sending anything.
    FitResult fit = refused.Preflight();
    CHECK_FALSE(fit.fits);
    CHECK(fit.Message().find("runAsNonRoot") != std::string::npos);

    // Warn: created, and every violation reported before anything was sent.
    std::vector<std::string> warnings;
    DevCreateOptions options;
    options.pod_security.admission = PodSecurityAdmission::kWarn;
    options.pod_security.on_warning = [&](const std::string& w) {
      CHECK(Count(c, kStatefulSets, ns.name()) == 0);
      warnings.push_back(w);
    };
    DevInstance warned(c, Dev(ns.name()));
    DevStartResult started = warned.Create(options);
    CHECK_FALSE(started.password.empty());
    REQUIRE_FALSE(warnings.empty());
    for (const auto& w : warnings) {
      CHECK(w.rfind("Pod Security: namespace " + ns.name() + " enforces \"restricted\"", 0) == 0);
    }
    CHECK(Count(c, kStatefulSets, ns.name()) == 1);
    warned.Delete();
  }

  TEST_CASE("TFCluster and ScheduledJob: restricted by default, so a restricted namespace fits") {
    Client c = AdminClient();
    TestNamespace ns(c, "pss");
    LabelNamespace(c, ns.name(),
                   {{"pod-security.kubernetes.io/enforce", "restricted"},
                    {"pod-security.kubernetes.io/warn", "restricted"}});
    TFClusterSpec cluster;
    cluster.name = "tiny";
    cluster.namespace_name = ns.name();
    cluster.ps.replicas = 1;
    cluster.ps.resources = {"100m", "128Mi", "", "", 0};
    cluster.worker.replicas = 1;
    cluster.worker.resources = {"100m", "128Mi", "", "", 0};
    cluster.placement.cputype = "xeon-gold";
    FitResult fit = TFCluster(c, cluster).Preflight();
    CHECK_MESSAGE(fit.fits, fit.Message());
    for (const auto& note : fit.notes) CHECK(note.find("Pod Security") == std::string::npos);

    ScheduledJobSpec job;
    job.name = "hello";
    job.namespace_name = ns.name();
    job.image = "python:3.11-slim";
    job.exec_command = "python3";
    job.entry_path = "train.py";
    job.resources = {"100m", "128Mi", "", "", 0};
    job.placement.cputype = "xeon-gold";
    RunOptions run;
    run.dry_run = true;
    CHECK_NOTHROW(ScheduledJob(c, job).RunNow(run));

    // Relaxed to privileged with an added capability: baseline refuses it, nothing is created.
    LabelNamespace(c, ns.name(), {{"pod-security.kubernetes.io/enforce", "baseline"}});
    job.pod_security = PodSecurityLevel::kPrivileged;
    job.pod.security_context.add_capabilities = {"SYS_ADMIN"};
    try {
      ScheduledJob(c, job).RunNow();
      FAIL("a run with SYS_ADMIN was created in a namespace enforcing baseline");
    } catch (const Error& e) {
      std::string what = e.what();
      CHECK(what.find("nothing was created") != std::string::npos);
      CHECK(what.find("enforces \"baseline\"") != std::string::npos);
      CHECK(what.find("capabilities_baseline") != std::string::npos);
    }
    CHECK(Count(c, kJobs, ns.name()) == 0);
  }
}
