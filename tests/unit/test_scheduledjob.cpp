// ScheduledJob without a server: golden JSON (a one-off Job, the CronJob in both API versions, a
// manual run), the argv with hostile arguments and the shell quoting proven through /bin/sh,
// validation errors, the JSON round trip, the run model, the alert decisions (failure, timeout,
// missed schedule, claims) and webhook delivery against a loopback receiver.
#include <doctest/doctest.h>

#include <map>

#include <cstdio>
#include <fstream>
#include <thread>

#include "golden.hpp"
#include "kubelet_expansion.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/yaml.hpp"
#include "webhook_receiver.hpp"
#include "workloads/cron.hpp"
#include "workloads/scheduledjob_internal.hpp"

using namespace tfk8s;
using tfk8s::internal::FormatTimestamp;
using tfk8s::internal::ParseTimestamp;
using tfk8s::internal::SysSeconds;
using tfk8s::testing::CheckGolden;
using tfk8s::testing::WebhookReceiver;

namespace {

// Every argument a shell would interpret if the command were one concatenated string.
const std::vector<std::string> kHostileArgs = {"--epochs=10",
                                               "a; rm -rf /",
                                               "it's",
                                               "\"double\"",
                                               "$(reboot)",
                                               "`id`",
                                               "two words",
                                               "line1\nline2",
                                               "",
                                               "$HOME",
                                               "*",
                                               "back\\slash",
                                               "'; echo pwned; '",
                                               "tab\there",
                                               "&& halt",
                                               "> /etc/passwd",
                                               "|| true",
                                               "#comment",
                                               "~",
                                               "-c"};

// The seed's scheduled task: the user's PVC at /root, `cd <workDir> && python3 /root/<entry>`.
ScheduledJobSpec SeedTask() {
  ScheduledJobSpec s;
  s.name = "nightly-train";
  s.namespace_name = "team-a";
  s.labels = {{"team", "vision"}};
  s.image = "tensorflow/tensorflow:2.4.0-gpu";
  s.home_claim = "alice-home";
  s.volumes = {{"imagenet", "/data/imagenet", true, ""}};
  s.working_dir = "projects/resnet";
  s.exec_command = "python3";
  s.exec_args = {"-u"};
  s.entry_path = "projects/resnet/train.py";
  s.args = {"--epochs", "10", "--name", "run one; $(date)"};
  s.env = {{"HADOOP_USER", "alice"}, {"TF_CPP_MIN_LOG_LEVEL", "2"}};
  s.resources = {"4", "16Gi", "", "32Gi", 1};
  s.placement.gputype = "v100";
  s.pod_annotations = {{"prometheus.io/scrape", "false"}};
  s.active_deadline_seconds = 3600;
  s.ttl_seconds_after_finished = 86400;
  return s;
}

ScheduledJobSpec ScheduledSeedTask() {
  ScheduledJobSpec s = SeedTask();
  s.schedule = "30 2 * * MON-FRI";
  s.starting_deadline_seconds = 300;
  s.successful_jobs_history_limit = 5;
  s.failed_jobs_history_limit = 3;
  return s;
}

const Json& Container(const Json& job) { return job["spec"]["template"]["spec"]["containers"][0]; }

// Runs `script` with /bin/sh and returns its standard output.
std::string RunShell(const std::string& script) {
  std::string quoted = ShellQuote(script);
  FILE* f = ::popen(("/bin/sh -c " + quoted).c_str(), "r");
  REQUIRE(f != nullptr);
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  ::pclose(f);
  return out;
}

std::vector<std::string> SplitNul(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t end = s.find('\0', start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A Job as the server returns it, in a given state.
Json JobObject(const std::string& name, const std::string& condition, const std::string& reason,
               int failed, int succeeded, int active, const std::string& end = "") {
  Json job = {{"apiVersion", "batch/v1"},
              {"kind", "Job"},
              {"metadata",
               {{"name", name},
                {"namespace", "team-a"},
                {"uid", "uid-" + name},
                {"resourceVersion", "42"},
                {"creationTimestamp", "2024-03-01T10:00:00Z"},
                {"labels", {{"tfk8s.io/scheduledjob", "nightly-train"}}}}},
              {"status",
               {{"startTime", "2024-03-01T10:00:05Z"},
                {"failed", failed},
                {"succeeded", succeeded},
                {"active", active}}}};
  if (!condition.empty()) {
    job["status"]["conditions"] = Json::array({{{"type", condition},
                                                {"status", "True"},
                                                {"reason", reason},
                                                {"message", "details"},
                                                {"lastTransitionTime", end}}});
    if (condition == "Complete") job["status"]["completionTime"] = end;
  }
  return job;
}

Json CronJobObject(const std::string& schedule, const std::string& created,
                   const std::string& last_schedule = "") {
  Json cj = {{"apiVersion", "batch/v1beta1"},
             {"kind", "CronJob"},
             {"metadata",
              {{"name", "nightly-train"},
               {"namespace", "team-a"},
               {"uid", "cj-uid"},
               {"resourceVersion", "7"},
               {"creationTimestamp", created},
               {"labels", {{"tfk8s.io/scheduledjob", "nightly-train"}}}}},
             {"spec", {{"schedule", schedule}, {"suspend", false}}},
             {"status", Json::object()}};
  if (!last_schedule.empty()) cj["status"]["lastScheduleTime"] = last_schedule;
  return cj;
}

SysSeconds T(const char* text) { return *ParseTimestamp(text); }

}  // namespace

TEST_SUITE("scheduledjob") {
  TEST_CASE("golden: a one-off run of the seed's task") {
    ScheduledJobRenderOptions o;
    o.job_name = "nightly-train-manual-1";
    CheckGolden("scheduledjob_run_job", RenderRunJob(SeedTask(), o));
    // Without a name the server generates one.
    Json generated = RenderRunJob(SeedTask());
    CHECK(generated["metadata"]["generateName"] == "nightly-train-");
    CHECK_FALSE(generated["metadata"].contains("name"));
  }

  TEST_CASE("golden: a run of the seed's task with a priority class") {
    ScheduledJobSpec s = SeedTask();
    s.pod.priority_class = "batch-low";
    ScheduledJobRenderOptions o;
    o.job_name = "nightly-train-manual-1";
    const Json job = RenderRunJob(s, o);
    CheckGolden("scheduledjob_priority_class", job);
    CHECK(job["spec"]["template"]["spec"]["priorityClassName"] == "batch-low");
    // The CronJob's runs carry it too.
    s.schedule = "30 2 * * MON-FRI";
    CHECK(
        RenderCronJob(s)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["priorityClassName"] ==
        "batch-low");
  }

  TEST_CASE("golden: the schedule as a CronJob in batch/v1 and batch/v1beta1") {
    ScheduledJobRenderOptions v1;
    v1.cronjob_api_version = "batch/v1";
    Json cj_v1 = RenderCronJob(ScheduledSeedTask(), v1);
    CheckGolden("scheduledjob_cron_batch_v1", cj_v1);
    ScheduledJobRenderOptions beta;
    beta.cronjob_api_version = "batch/v1beta1";
    Json cj_beta = RenderCronJob(ScheduledSeedTask(), beta);
    CheckGolden("scheduledjob_cron_batch_v1beta1", cj_beta);
    // The two differ only in apiVersion.
    cj_beta["apiVersion"] = "batch/v1";
    CHECK(cj_beta == cj_v1);
    CHECK_THROWS_AS(RenderCronJob(SeedTask(), v1), ValidationError);  // no schedule
    ScheduledJobRenderOptions bogus;
    bogus.cronjob_api_version = "batch/v2";
    CHECK_THROWS_AS(RenderCronJob(ScheduledSeedTask(), bogus), ValidationError);
    // RenderScheduledJob picks the CronJob for a schedule, the Job otherwise.
    CHECK(RenderScheduledJob(ScheduledSeedTask()).front()["kind"] == "CronJob");
    CHECK(RenderScheduledJob(SeedTask()).front()["kind"] == "Job");
  }

  TEST_CASE("golden: run now from the CronJob, like kubectl create job --from") {
    ScheduledJobRenderOptions beta;
    beta.cronjob_api_version = "batch/v1beta1";
    Json cj = RenderCronJob(ScheduledSeedTask(), beta);
    cj["metadata"]["uid"] = "0f0e0d0c-0000-4000-8000-000000000001";
    Json job = RenderManualRun(cj, "nightly-train-manual", {{"sim.tfk8s.io/exit-code", "0"}});
    CheckGolden("scheduledjob_manual_run", job);
    CHECK(job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual");
    CHECK(job["metadata"]["ownerReferences"][0]["kind"] == "CronJob");
    CHECK(job["metadata"]["ownerReferences"][0]["apiVersion"] == "batch/v1beta1");
    CHECK(job["metadata"]["ownerReferences"][0]["controller"] == true);
    CHECK(job["spec"] == [&] {
      Json s = cj["spec"]["jobTemplate"]["spec"];
      s["template"]["metadata"]["annotations"]["sim.tfk8s.io/exit-code"] = "0";
      return s;
    }());
    Json no_uid = cj;
    no_uid["metadata"].erase("uid");
    CHECK_THROWS_AS(RenderManualRun(no_uid), ValidationError);
  }

  TEST_CASE("time zone: rendered on batch/v1 servers that know it, refused elsewhere") {
    ScheduledJobSpec s = ScheduledSeedTask();
    s.time_zone = "Asia/Shanghai";
    ScheduledJobRenderOptions v1;
    REQUIRE_MESSAGE(std::ifstream("/usr/share/zoneinfo/Asia/Shanghai").good(),
                    "no tz database: tools/install-deps.sh installs tzdata");
    CHECK(RenderCronJob(s, v1)["spec"]["timeZone"] == "Asia/Shanghai");
    ScheduledJobRenderOptions old = v1;
    old.time_zone_supported = false;
    CHECK_THROWS_WITH_AS(RenderCronJob(s, old), doctest::Contains("Kubernetes >= 1.25"),
                         ValidationError);
    ScheduledJobRenderOptions beta;
    beta.cronjob_api_version = "batch/v1beta1";
    CHECK_THROWS_AS(RenderCronJob(s, beta), ValidationError);
    // UTC needs no field and works everywhere.
    s.time_zone = "UTC";
    beta.time_zone_supported = false;
    CHECK_FALSE(RenderCronJob(s, beta)["spec"].contains("timeZone"));
  }

  TEST_CASE("hostile arguments arrive as one literal argv element each, no shell anywhere") {
    ScheduledJobSpec s = SeedTask();
    s.args = kHostileArgs;
    std::vector<std::string> expected = {"python3", "-u", "/root/projects/resnet/train.py"};
    expected.insert(expected.end(), kHostileArgs.begin(), kHostileArgs.end());
    CHECK(s.Command() == expected);
    Json job = RenderRunJob(s);
    const Json& c = Container(job);
    // What the process receives is the rendered argv after the kubelet's $(VAR) / $$ expansion.
    const std::map<std::string, std::string> env = {{"HOME", "/root"}, {"ENV_REF", "expanded"}};
    auto received = [&](const Json& container) {
      return testing::KubeletExpand(container["command"].get<std::vector<std::string>>(), env);
    };
    CHECK(received(c) == expected);
    CHECK_FALSE(c.contains("args"));
    CHECK(c["workingDir"] == "/root/projects/resnet");
    // Through the CronJob and a manual run as well.
    s.schedule = "@daily";
    Json cj = RenderCronJob(s);
    CHECK(received(cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]) ==
          expected);
    cj["metadata"]["uid"] = "u";
    CHECK(received(Container(RenderManualRun(cj))) == expected);
    // The YAML a user would `kubectl apply` keeps each argument whole too.
    Json back = FromYaml(ToYaml(job));
    CHECK(received(Container(back)) == expected);
  }

  TEST_CASE("$(VAR), $$ and $ reach the process verbatim unless expansion is asked for") {
    ScheduledJobSpec s = SeedTask();
    const std::vector<std::string> tricky = {"$(ENV_REF)", "$$(id)",   "$$",
                                             "$",          "a$b",      "$(",
                                             "$(HOME)/x",  "pid=[$$]", "`id`; echo PWNED"};
    s.args = tricky;
    const std::map<std::string, std::string> env = {{"ENV_REF", "expanded"}, {"HOME", "/root"}};
    std::vector<std::string> rendered = Container(RenderRunJob(s))["command"];
    std::vector<std::string> received = testing::KubeletExpand(rendered, env);
    CHECK(std::vector<std::string>(received.end() - tricky.size(), received.end()) == tricky);
    CHECK(rendered.back() == "`id`; echo PWNED");  // no '$': nothing to escape
    CHECK(rendered[rendered.size() - tricky.size()] == "$$(ENV_REF)");
    // Asked for: Kubernetes' expansion applies, as documented for container commands.
    s.expand_variable_references = true;
    rendered = Container(RenderRunJob(s))["command"].get<std::vector<std::string>>();
    received = testing::KubeletExpand(rendered, env);
    CHECK(received[received.size() - tricky.size()] == "expanded");
    CHECK(received[received.size() - tricky.size() + 1] == "$(id)");
    CHECK(ScheduledJobSpec::FromJson(s.ToJson()).expand_variable_references);
    CHECK_FALSE(ScheduledJobSpec::FromJson(SeedTask().ToJson()).expand_variable_references);
    CHECK_FALSE(SeedTask().ToJson().contains("expandVariableReferences"));
  }

  TEST_CASE("entry path, working directory and interpreter variants") {
    ScheduledJobSpec s = SeedTask();
    s.exec_command.clear();
    s.exec_args.clear();
    s.entry_path = "bin/run.sh";
    s.args.clear();
    CHECK(s.Command() == std::vector<std::string>{"/root/bin/run.sh"});
    s.entry_path = "/root/bin/run.sh";  // absolute under home: accepted as the same file
    CHECK(s.Command() == std::vector<std::string>{"/root/bin/run.sh"});
    s.working_dir.clear();
    CHECK(s.WorkingDirectory() == "/root");
    s.working_dir = "/scratch";
    CHECK(s.WorkingDirectory() == "/scratch");
    s.home_path = "/home/alice";
    s.entry_path = "train.py";
    CHECK(s.Command() == std::vector<std::string>{"/home/alice/train.py"});
    Json c = Container(RenderRunJob(s));
    CHECK(c["volumeMounts"][0]["mountPath"] == "/home/alice");
  }

  TEST_CASE("ShellQuote: known forms, and /bin/sh gives back every hostile word exactly") {
    CHECK(ShellQuote("") == "''");
    CHECK(ShellQuote("plain") == "'plain'");
    CHECK(ShellQuote("it's") == "'it'\\''s'");
    CHECK(ShellQuote("'") == "''\\'''");
    for (const auto& word : kHostileArgs) {
      CAPTURE(word);
      std::string out = RunShell("printf '%s\\0' " + ShellQuote(word));
      CHECK(out == word + std::string(1, '\0'));
    }
    // All at once, in order, as separate arguments.
    std::string script = "printf '%s\\0'";
    for (const auto& word : kHostileArgs) script += " " + ShellQuote(word);
    CHECK(SplitNul(RunShell(script)) == kHostileArgs);
  }

  TEST_CASE("CommandLine(): the seed's shell form, run by /bin/sh, passes the same argv") {
    ScheduledJobSpec s;
    s.name = "echo";
    s.image = "busybox";
    s.home_path = "/tmp";
    s.working_dir = "/";
    s.exec_command = "printf";
    s.exec_args = {"%s\\0"};
    s.entry_path = "entry";
    s.args = kHostileArgs;
    std::string line = s.CommandLine();
    CHECK(line.rfind("cd '/' && 'printf'", 0) == 0);
    std::string out = RunShell(line);
    std::string expected = "/tmp/entry" + std::string(1, '\0');
    for (const auto& a : kHostileArgs) expected += a + std::string(1, '\0');
    CHECK(out == expected);
  }

  TEST_CASE("validation names the field") {
    struct Case {
      const char* field;
      std::function<void(ScheduledJobSpec&)> change;
    };
    std::vector<Case> cases = {
        {"name", [](auto& s) { s.name = "Bad_Name"; }},
        {"name", [](auto& s) { s.name = std::string(53, 'a'); }},
        {"namespace", [](auto& s) { s.namespace_name = ""; }},
        {"labels", [](auto& s) { s.labels["tfk8s.io/scheduledjob"] = "x"; }},
        {"labels", [](auto& s) { s.labels["tfk8s.io/owner"] = "alice"; }},
        {"owner", [](auto& s) { s.owner = "Alice Smith"; }},
        {"image", [](auto& s) { s.image = ""; }},
        {"image", [](auto& s) { s.image = "busybox; reboot"; }},
        {"imagePullSecrets[0]", [](auto& s) { s.pod.image_pull_secrets = {"Bad Secret"}; }},
        {"homeClaim", [](auto& s) { s.home_claim = "Bad Claim"; }},
        {"homePath", [](auto& s) { s.home_path = "root"; }},
        {"volumes[0].mountPath", [](auto& s) { s.volumes[0].mount_path = "data"; }},
        {"volumes[0].mountPath", [](auto& s) { s.volumes[0].mount_path = "/root"; }},
        {"volumes[0].subPath", [](auto& s) { s.volumes[0].sub_path = "../other"; }},
        {"volumes[0].claimName", [](auto& s) { s.volumes[0].claim = ""; }},
        {"workingDir", [](auto& s) { s.working_dir = "../../etc"; }},
        {"execCommand", [](auto& s) { s.exec_command = "python3 -u"; }},
        {"execArgs",
         [](auto& s) {
           s.exec_command.clear();
           s.exec_args = {"-u"};
         }},
        {"entryPath", [](auto& s) { s.entry_path = ""; }},
        {"entryPath", [](auto& s) { s.entry_path = "/etc/passwd"; }},
        {"entryPath", [](auto& s) { s.entry_path = "../escape.py"; }},
        {"args[1]", [](auto& s) { s.args[1] = std::string("a\0b", 3); }},
        {"env[0].name", [](auto& s) { s.env[0].name = "1BAD"; }},
        {"env[1].name", [](auto& s) { s.env[1].name = s.env[0].name; }},
        {"resources.cpu", [](auto& s) { s.resources.cpu = "lots"; }},
        {"resources.memoryLimit", [](auto& s) { s.resources.memory_limit = "1Gi"; }},
        {"resources.gpus", [](auto& s) { s.resources.gpus = -1; }},
        {"placement.gputype", [](auto& s) { s.resources.gpus = 0; }},
        {"placement.pool", [](auto& s) { s.placement.pool = "private"; }},
        {"placement.privateName", [](auto& s) { s.placement.pool = "unshared"; }},
        {"placement.privateName", [](auto& s) { s.placement.private_name = "alice"; }},
        {"podAnnotations", [](auto& s) { s.pod_annotations["bad key!"] = "x"; }},
        {"backoffLimit", [](auto& s) { s.backoff_limit = -1; }},
        {"activeDeadlineSeconds", [](auto& s) { s.active_deadline_seconds = 0; }},
        {"ttlSecondsAfterFinished", [](auto& s) { s.ttl_seconds_after_finished = -1; }},
        {"schedule", [](auto& s) { s.schedule = "61 * * * *"; }},
        {"schedule", [](auto& s) { s.schedule = "@every 1h"; }},
        {"timeZone", [](auto& s) { s.time_zone = "Europe/Berlin"; }},  // without a schedule
        {"timeZone",
         [](auto& s) {
           s.schedule = "@daily";
           s.time_zone = "Nowhere/Land";
         }},
        {"startingDeadlineSeconds",
         [](auto& s) {
           s.schedule = "@daily";
           s.starting_deadline_seconds = 5;
         }},
        {"failedJobsHistoryLimit",
         [](auto& s) {
           s.schedule = "@daily";
           s.failed_jobs_history_limit = -1;
         }},
    };
    for (const auto& c : cases) {
      ScheduledJobSpec s = SeedTask();
      c.change(s);
      CAPTURE(c.field);
      try {
        s.Validate();
        FAIL("no error");
      } catch (const ValidationError& e) {
        CHECK_MESSAGE(e.field() == c.field, e.what());
      }
    }
    CHECK_NOTHROW(SeedTask().Validate());
    CHECK_NOTHROW(ScheduledSeedTask().Validate());
    // The bad part of a schedule is named.
    ScheduledJobSpec s = SeedTask();
    s.schedule = "0 9 * * MON-FRY";
    CHECK_THROWS_WITH_AS(s.Validate(), doctest::Contains("\"FRY\""), ValidationError);
  }

  TEST_CASE("JSON round trip, and bad JSON names the field") {
    ScheduledJobSpec s = ScheduledSeedTask();
    s.args = kHostileArgs;
    s.concurrency_policy = ConcurrencyPolicy::kReplace;
    s.suspend = true;
    s.pod.image_pull_secrets = {"registry"};
    s.pod.service_account = "trainer";
    Json j = s.ToJson();
    CHECK(ScheduledJobSpec::FromJson(j).ToJson() == j);
    CHECK(ScheduledJobSpec::FromJson(Json::parse(j.dump())).args == kHostileArgs);
    CHECK(ScheduledJobSpec::FromJson({{"name", "x"}}).backoff_limit == 0);
    CHECK_FALSE(j.contains("owner"));  // written only when set
    s.owner = "alice";
    CHECK(ScheduledJobSpec::FromJson(s.ToJson()).owner == "alice");
    // The owner label on the CronJob, the Jobs it makes and their pods, and on a one-off run.
    Json cronjob = RenderCronJob(s);
    CHECK(cronjob["metadata"]["labels"]["tfk8s.io/owner"] == "alice");
    CHECK(cronjob["spec"]["jobTemplate"]["metadata"]["labels"]["tfk8s.io/owner"] == "alice");
    CHECK(cronjob["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
                 ["tfk8s.io/owner"] == "alice");
    Json run = RenderRunJob(s);
    CHECK(run["metadata"]["labels"]["tfk8s.io/owner"] == "alice");
    CHECK(run["spec"]["template"]["metadata"]["labels"]["tfk8s.io/owner"] == "alice");
    CHECK(ScheduledJobSpec::FromJson({{"name", "x"}}).concurrency_policy ==
          ConcurrencyPolicy::kForbid);
    CHECK_THROWS_WITH_AS(ScheduledJobSpec::FromJson({{"args", "not a list"}}),
                         doctest::Contains("args"), ValidationError);
    CHECK_THROWS_WITH_AS(ScheduledJobSpec::FromJson({{"concurrencyPolicy", "Sometimes"}}),
                         doctest::Contains("concurrencyPolicy"), ValidationError);
    CHECK_THROWS_AS(ScheduledJobSpec::FromJson(Json::array()), ValidationError);
    CHECK(ParseConcurrencyPolicy("Allow") == ConcurrencyPolicy::kAllow);
  }

  TEST_CASE("runs: trigger, scheduled time, result, attempts, duration") {
    JobRun failed = RunOf(JobObject("nightly-train-1709287200", "Failed", "BackoffLimitExceeded", 3,
                                    0, 0, "2024-03-01T10:01:05Z"));
    CHECK(failed.result == RunResult::kFailed);
    CHECK(failed.finished());
    CHECK(failed.attempts == 3);
    CHECK(failed.reason == "BackoffLimitExceeded");
    REQUIRE(failed.duration);
    CHECK(failed.duration->count() == 60);
    CHECK(failed.scheduled_job == "nightly-train");
    CHECK(failed.trigger == RunTrigger::kOnDemand);  // no CronJob owner

    Json scheduled = JobObject("nightly-train-1709287200", "", "", 0, 0, 1);
    scheduled["metadata"]["ownerReferences"] =
        Json::array({{{"kind", "CronJob"}, {"name", "nightly-train"}}});
    JobRun s = RunOf(scheduled);
    CHECK(s.trigger == RunTrigger::kScheduled);
    CHECK(s.result == RunResult::kRunning);
    CHECK_FALSE(s.finished());
    REQUIRE(s.scheduled_time);  // 1.20 names: Unix seconds
    CHECK(FormatTimestamp(internal::ToSysSeconds(*s.scheduled_time)) == "2024-03-01T10:00:00Z");
    scheduled["metadata"]["name"] = "nightly-train-28488120";  // ≥ 1.21 names: minutes
    CHECK(FormatTimestamp(internal::ToSysSeconds(*RunOf(scheduled).scheduled_time)) ==
          "2024-03-01T10:00:00Z");
    scheduled["metadata"]["annotations"] = {
        {"batch.kubernetes.io/cronjob-scheduled-timestamp", "2024-03-01T09:00:00Z"}};
    CHECK(FormatTimestamp(internal::ToSysSeconds(*RunOf(scheduled).scheduled_time)) ==
          "2024-03-01T09:00:00Z");
    scheduled["metadata"]["annotations"] = {{"cronjob.kubernetes.io/instantiate", "manual"}};
    CHECK(RunOf(scheduled).trigger == RunTrigger::kManual);
    CHECK_FALSE(RunOf(scheduled).scheduled_time);

    JobRun timed_out =
        RunOf(JobObject("t", "Failed", "DeadlineExceeded", 1, 0, 0, "2024-03-01T10:00:35Z"));
    CHECK(timed_out.result == RunResult::kTimedOut);
    JobRun ok = RunOf(JobObject("ok", "Complete", "", 0, 1, 0, "2024-03-01T10:00:07Z"));
    CHECK(ok.result == RunResult::kSucceeded);
    CHECK(ok.duration->count() == 2);
    CHECK(RunOf(JobObject("p", "", "", 0, 0, 0)).result == RunResult::kPending);

    std::string table = FormatRunTable({failed, ok});
    CHECK(table.find("NAME") == 0);
    CHECK(table.find("BackoffLimitExceeded") != std::string::npos);
    CHECK(table.find("1m0s") != std::string::npos);
    CHECK(RunRows({failed}).size() == 2);
    CHECK(ToString(RunResult::kTimedOut) == "TimedOut");
    CHECK(ToString(RunTrigger::kManual) == "manual");
  }

  TEST_CASE("alert decisions for Jobs: kinds, claims, expiry, age, switches") {
    ScheduledJobWatcherOptions o;
    SysSeconds now = T("2024-03-01T10:02:00Z");
    Json failed = JobObject("f", "Failed", "BackoffLimitExceeded", 3, 0, 0, "2024-03-01T10:01:00Z");
    auto d = internal::DecideJobAlert(failed, now, o);
    CHECK(d.alert);
    CHECK(d.kind == AlertKind::kFailure);
    CHECK_FALSE(d.reclaim);

    Json timed_out = JobObject("t", "Failed", "DeadlineExceeded", 1, 0, 0, "2024-03-01T10:01:00Z");
    CHECK(internal::DecideJobAlert(timed_out, now, o).kind == AlertKind::kTimeout);
    CHECK_FALSE(internal::DecideJobAlert(JobObject("r", "", "", 0, 0, 1), now, o).alert);
    CHECK_FALSE(internal::DecideJobAlert(
                    JobObject("c", "Complete", "", 0, 1, 0, "2024-03-01T10:01:00Z"), now, o)
                    .alert);

    // Switches and age.
    ScheduledJobWatcherOptions quiet = o;
    quiet.alert_on_timeout = false;
    CHECK_FALSE(internal::DecideJobAlert(timed_out, now, quiet).alert);
    CHECK(internal::DecideJobAlert(failed, now, quiet).alert);
    quiet.max_alert_age = std::chrono::seconds(30);
    CHECK_FALSE(internal::DecideJobAlert(failed, now, quiet).alert);

    // Claimed: delivered / failed are final; "sending" waits for its deadline, then is retaken.
    Json claimed = failed;
    claimed["metadata"]["annotations"] = {{"tfk8s.io/alerted", "failure"},
                                          {"tfk8s.io/alert-state", "delivered"}};
    CHECK_FALSE(internal::DecideJobAlert(claimed, now, o).alert);
    claimed["metadata"]["annotations"]["tfk8s.io/alert-state"] = "failed";
    CHECK_FALSE(internal::DecideJobAlert(claimed, now, o).alert);
    claimed["metadata"]["annotations"]["tfk8s.io/alert-state"] = "sending";
    claimed["metadata"]["annotations"]["tfk8s.io/alert-deadline"] = "2024-03-01T10:03:00Z";
    d = internal::DecideJobAlert(claimed, now, o);
    CHECK_FALSE(d.alert);
    REQUIRE(d.recheck_at);
    CHECK(FormatTimestamp(*d.recheck_at) == "2024-03-01T10:03:00Z");
    d = internal::DecideJobAlert(claimed, T("2024-03-01T10:03:00Z"), o);
    CHECK(d.alert);
    CHECK(d.reclaim);
    CHECK(d.kind == AlertKind::kFailure);
  }

  TEST_CASE("missed schedules: expected runs from the cron parser, grace, deadline, claims") {
    std::chrono::seconds grace(60);
    // Created at 10:00:30, every 5 minutes: 10:05 is due; missed only after 10:06.
    Json cj = CronJobObject("*/5 * * * *", "2024-03-01T10:00:30Z");
    auto c = internal::CheckMissedSchedule(cj, T("2024-03-01T10:05:30Z"), grace);
    CHECK_FALSE(c.missed_time);
    REQUIRE(c.recheck_at);
    CHECK(FormatTimestamp(*c.recheck_at) == "2024-03-01T10:06:00Z");
    c = internal::CheckMissedSchedule(cj, T("2024-03-01T10:16:00Z"), grace);
    REQUIRE(c.missed_time);
    CHECK(FormatTimestamp(*c.missed_time) == "2024-03-01T10:15:00Z");
    CHECK(c.missed_runs == 3);  // 10:05, 10:10, 10:15

    // The controller ran 10:15: nothing missed at 10:16.
    cj["status"]["lastScheduleTime"] = "2024-03-01T10:15:00Z";
    c = internal::CheckMissedSchedule(cj, T("2024-03-01T10:16:00Z"), grace);
    CHECK_FALSE(c.missed_time);
    CHECK(FormatTimestamp(*c.recheck_at) == "2024-03-01T10:21:00Z");

    // startingDeadlineSeconds widens the slack.
    cj["spec"]["startingDeadlineSeconds"] = 120;
    CHECK_FALSE(internal::CheckMissedSchedule(cj, T("2024-03-01T10:22:30Z"), grace).missed_time);
    CHECK(internal::CheckMissedSchedule(cj, T("2024-03-01T10:23:00Z"), grace).missed_time);
    cj["spec"].erase("startingDeadlineSeconds");

    // Suspended: never missed. Resumed later: the base moves to the resume time.
    cj["spec"]["suspend"] = true;
    CHECK_FALSE(internal::CheckMissedSchedule(cj, T("2024-03-01T12:00:00Z"), grace).missed_time);
    cj["spec"]["suspend"] = false;
    cj["metadata"]["annotations"]["tfk8s.io/resumed-at"] = "2024-03-01T11:58:00Z";
    CHECK_FALSE(internal::CheckMissedSchedule(cj, T("2024-03-01T12:00:30Z"), grace).missed_time);
    c = internal::CheckMissedSchedule(cj, T("2024-03-01T12:01:00Z"), grace);
    REQUIRE(c.missed_time);
    CHECK(FormatTimestamp(*c.missed_time) == "2024-03-01T12:00:00Z");
    CHECK(c.missed_runs == 1);

    // Already alerted for 12:00 (delivered): quiet until the next miss.
    cj["metadata"]["annotations"]["tfk8s.io/missed-alerted"] = "2024-03-01T12:00:00Z";
    cj["metadata"]["annotations"]["tfk8s.io/missed-alert-state"] = "delivered";
    CHECK_FALSE(internal::CheckMissedSchedule(cj, T("2024-03-01T12:05:30Z"), grace).missed_time);
    c = internal::CheckMissedSchedule(cj, T("2024-03-01T12:06:00Z"), grace);
    REQUIRE(c.missed_time);
    CHECK(FormatTimestamp(*c.missed_time) == "2024-03-01T12:05:00Z");
    // A claim still being delivered elsewhere, then expired.
    cj["metadata"]["annotations"]["tfk8s.io/missed-alerted"] = "2024-03-01T12:05:00Z";
    cj["metadata"]["annotations"]["tfk8s.io/missed-alert-state"] = "sending";
    cj["metadata"]["annotations"]["tfk8s.io/missed-alert-deadline"] = "2024-03-01T12:08:00Z";
    c = internal::CheckMissedSchedule(cj, T("2024-03-01T12:07:00Z"), grace);
    CHECK_FALSE(c.missed_time);
    CHECK(FormatTimestamp(*c.recheck_at) == "2024-03-01T12:08:00Z");
    c = internal::CheckMissedSchedule(cj, T("2024-03-01T12:08:00Z"), grace);
    CHECK(c.reclaim);
    CHECK(FormatTimestamp(*c.missed_time) == "2024-03-01T12:05:00Z");

    // A schedule we cannot read is reported, not guessed.
    CHECK_FALSE(internal::CheckMissedSchedule(CronJobObject("@every 1m", "2024-03-01T10:00:00Z"),
                                              T("2024-03-01T12:00:00Z"), grace)
                    .error.empty());

    // The alert says what, when, how many, and why when Forbid skipped it.
    Json busy = CronJobObject("*/5 * * * *", "2024-03-01T10:00:30Z");
    busy["spec"]["concurrencyPolicy"] = "Forbid";
    busy["status"]["active"] = Json::array({{{"name", "nightly-train-1"}}});
    auto check = internal::CheckMissedSchedule(busy, T("2024-03-01T10:16:00Z"), grace);
    ScheduledJobAlert a = internal::AlertForMissedSchedule(busy, check, T("2024-03-01T10:16:00Z"));
    CHECK(a.kind == AlertKind::kMissedSchedule);
    CHECK(a.missed_runs == 3);
    CHECK(a.message.find("concurrencyPolicy is Forbid") != std::string::npos);
    Json j = a.ToJson();
    CHECK(j["kind"] == "missed-schedule");
    CHECK(j["scheduledTime"] == "2024-03-01T10:15:00Z");
    CHECK(j["scheduledJob"] == "nightly-train");
  }

  TEST_CASE("alert payload") {
    Json job = JobObject("nightly-train-x", "Failed", "BackoffLimitExceeded", 3, 0, 0,
                         "2024-03-01T10:01:00Z");
    ScheduledJobAlert a =
        internal::AlertForJob(job, AlertKind::kFailure, T("2024-03-01T10:01:02Z"));
    Json j = a.ToJson();
    CHECK(j["source"] == "tfk8s");
    CHECK(j["kind"] == "failure");
    CHECK(j["namespace"] == "team-a");
    CHECK(j["scheduledJob"] == "nightly-train");
    CHECK(j["job"] == "nightly-train-x");
    CHECK(j["jobUid"] == "uid-nightly-train-x");
    CHECK(j["reason"] == "BackoffLimitExceeded");
    CHECK(j["attempts"] == 3);
    CHECK(j["startTime"] == "2024-03-01T10:00:05Z");
    CHECK(j["endTime"] == "2024-03-01T10:01:00Z");
    CHECK(j["scheduledTime"].is_null());
    CHECK(j["time"] == "2024-03-01T10:01:02Z");
    CHECK(a.message.find("failed after 3 attempts") != std::string::npos);
  }

  TEST_CASE("webhook delivery: success, retries on 5xx, no retry on 4xx, down, slow") {
    ScheduledJobAlert alert;
    alert.scheduled_job = "nightly-train";
    alert.time = std::chrono::system_clock::now();
    AlertWebhook hook;
    hook.retry_backoff = std::chrono::milliseconds(50);
    hook.timeout = std::chrono::milliseconds(2000);
    hook.headers = {{"Authorization", "Bearer secret-token"}};
    hook.allow_insecure_headers = true;  // the receiver is plain http on loopback
    {
      WebhookReceiver receiver;
      hook.url = receiver.url();
      WebhookDelivery d = SendWebhookAlert(hook, alert);
      CHECK(d.delivered);
      CHECK(d.attempts == 1);
      CHECK(d.status == 200);
      REQUIRE(receiver.accepted().size() == 1);
      CHECK(Json::parse(receiver.accepted()[0]) == alert.ToJson());
      CHECK(receiver.last_headers().find("Authorization: Bearer secret-token") !=
            std::string::npos);
      CHECK(receiver.last_headers().find("application/json") != std::string::npos);
    }
    {
      WebhookReceiver receiver({500, 503});
      hook.url = receiver.url();
      WebhookDelivery d = SendWebhookAlert(hook, alert);
      CHECK(d.delivered);
      CHECK(d.attempts == 3);
      CHECK(receiver.requests() == 3);
      CHECK(receiver.accepted().size() == 1);
    }
    {
      WebhookReceiver receiver({400});
      hook.url = receiver.url();
      WebhookDelivery d = SendWebhookAlert(hook, alert);
      CHECK_FALSE(d.delivered);
      CHECK(d.attempts == 1);
      CHECK(d.status == 400);
      CHECK(d.error == "HTTP 400");
    }
    {
      // Nothing listens on the port any more: every attempt fails fast, bounded.
      int port;
      {
        WebhookReceiver gone;
        port = gone.port();
      }
      hook.url = "http://127.0.0.1:" + std::to_string(port) + "/alerts";
      auto start = std::chrono::steady_clock::now();
      WebhookDelivery d = SendWebhookAlert(hook, alert);
      CHECK_FALSE(d.delivered);
      CHECK(d.attempts == 3);
      CHECK(d.status == 0);
      CHECK_FALSE(d.error.empty());
      CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    }
    {
      // A receiver slower than the timeout: each attempt is cut at the timeout.
      WebhookReceiver slow({}, std::chrono::milliseconds(1500));
      hook.url = slow.url();
      hook.timeout = std::chrono::milliseconds(300);
      hook.attempts = 2;
      auto start = std::chrono::steady_clock::now();
      WebhookDelivery d = SendWebhookAlert(hook, alert);
      CHECK_FALSE(d.delivered);
      CHECK(d.attempts == 2);
      CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    }
    CHECK(internal::ClaimDuration(std::nullopt).count() == 30);
    AlertWebhook defaults;
    CHECK(internal::ClaimDuration(defaults).count() == 30 + 3 * 5 + 1 + 2 + 4);
  }

  TEST_CASE("the watcher refuses a malformed webhook before running") {
    ScheduledJobWatcherOptions o;
    o.webhook = AlertWebhook{};
    o.webhook->url = "ftp://example.com";
    ClientConfig config;
    config.server = "https://127.0.0.1:1";
    CHECK_THROWS_AS(ScheduledJobWatcher(Client(config), o), ValidationError);
    // The refused URL is not echoed with its token.
    o.webhook->url = "ftp://hooks.example.com/services/T000/B000/token-SECRET";
    try {
      ScheduledJobWatcher(Client(config), o);
      FAIL("not refused");
    } catch (const ValidationError& e) {
      CHECK(std::string(e.what()).find("SECRET") == std::string::npos);
      CHECK(std::string(e.what()).find("ftp://hooks.example.com/…") != std::string::npos);
    }
  }

  TEST_CASE("webhook URLs are printed without user info, path, query or fragment") {
    using internal::RedactedWebhookUrl;
    CHECK(RedactedWebhookUrl("https://hooks.slack.com/services/T0/B0/XXXX") ==
          "https://hooks.slack.com/…");
    CHECK(RedactedWebhookUrl("http://user:pw@10.0.0.1:8080/alerts?token=abc#x") ==
          "http://10.0.0.1:8080/…");
    CHECK(RedactedWebhookUrl("https://alerts.example.com") == "https://alerts.example.com");
    CHECK(RedactedWebhookUrl("https://alerts.example.com/") == "https://alerts.example.com");
    CHECK(RedactedWebhookUrl("https://a.example.com?key=1") == "https://a.example.com/…");
  }
}
