// Tests for tfk8s::CheckPodSecurity (tfk8s/pod_security.hpp): every Pod Security Standards rule
// with a passing and a failing pod at each level it belongs to, the object shapes the checker
// accepts, and the verdict on every rendered pod of every golden file.

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tfk8s/error.hpp"
#include "tfk8s/pod_security.hpp"

namespace {

using tfk8s::CheckPodSecurity;
using tfk8s::Json;
using tfk8s::PodSecurityLevel;
using Strings = std::vector<std::string>;

constexpr auto kBaseline = PodSecurityLevel::kBaseline;
constexpr auto kRestricted = PodSecurityLevel::kRestricted;

// A pod that satisfies restricted: the starting point every case changes one thing in.
Json RestrictedPod() {
  return Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
    "spec": {
      "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
      "initContainers": [{"name": "init", "image": "busybox", "securityContext": {
        "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
      "containers": [{"name": "app", "image": "busybox", "securityContext": {
        "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]
    }})");
}

// "check field" of each violation, in the checker's order.
Strings Found(const Json& object, PodSecurityLevel level) {
  Strings out;
  for (const auto& v : CheckPodSecurity(object, level)) out.push_back(v.check + " " + v.field);
  return out;
}

// One violation a line, so that doctest prints a failing comparison readably.
std::string Lines(const Strings& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

struct Case {
  const char* name;
  std::function<void(Json& pod)> change;  // applied to RestrictedPod()
  Strings baseline;                       // expected violations at baseline
  Strings restricted;                     // expected violations at restricted
};

Json& Spec(Json& pod) { return pod["spec"]; }
Json& App(Json& pod) { return pod["spec"]["containers"][0]; }
Json& AppSc(Json& pod) { return App(pod)["securityContext"]; }
Json& Init(Json& pod) { return pod["spec"]["initContainers"][0]; }
Json& PodSc(Json& pod) { return pod["spec"]["securityContext"]; }

const std::string kApp = "spec.containers[0].securityContext.";
const std::string kInit = "spec.initContainers[0].securityContext.";

void RunCases(const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    std::string name = c.name;
    CAPTURE(name);
    Json pod = RestrictedPod();
    c.change(pod);
    CHECK(Lines(Found(pod, kBaseline)) == Lines(c.baseline));
    CHECK(Lines(Found(pod, kRestricted)) == Lines(c.restricted));
    CHECK(Found(pod, PodSecurityLevel::kPrivileged).empty());
  }
}

}  // namespace

TEST_CASE("pod security: the restricted starting pod passes every level") {
  for (auto level : {PodSecurityLevel::kPrivileged, kBaseline, kRestricted}) {
    CHECK(CheckPodSecurity(RestrictedPod(), level).empty());
  }
}

TEST_CASE("pod security: a minimally specified pod passes baseline and fails restricted") {
  Json pod = Json::parse(R"({"kind": "Pod", "metadata": {"name": "p"},
                            "spec": {"containers": [{"name": "app", "image": "busybox"}]}})");
  CHECK(Found(pod, kBaseline).empty());
  CHECK(Lines(Found(pod, kRestricted)) ==
        Lines(Strings{
            "allowPrivilegeEscalation spec.containers[0].securityContext.allowPrivilegeEscalation",
            "runAsNonRoot spec.containers[0].securityContext.runAsNonRoot",
            "seccompProfile_restricted spec.containers[0].securityContext.seccompProfile.type",
            "capabilities_restricted spec.containers[0].securityContext.capabilities.drop"}));
}

TEST_CASE("pod security baseline: HostProcess") {
  RunCases({
      {"hostProcess false",
       [](Json& p) {
         PodSc(p)["windowsOptions"]["hostProcess"] = false;
         AppSc(p)["windowsOptions"]["hostProcess"] = false;
       },
       {},
       {}},
      {"hostProcess true on pod and container",
       [](Json& p) {
         PodSc(p)["windowsOptions"]["hostProcess"] = true;
         AppSc(p)["windowsOptions"]["hostProcess"] = true;
       },
       {"hostProcess spec.securityContext.windowsOptions.hostProcess",
        "hostProcess " + kApp + "windowsOptions.hostProcess"},
       {"hostProcess spec.securityContext.windowsOptions.hostProcess",
        "hostProcess " + kApp + "windowsOptions.hostProcess"}},
  });
}

TEST_CASE("pod security baseline: host namespaces") {
  RunCases({
      {"all false",
       [](Json& p) {
         Spec(p)["hostNetwork"] = false;
         Spec(p)["hostPID"] = false;
         Spec(p)["hostIPC"] = false;
       },
       {},
       {}},
      {"all true",
       [](Json& p) {
         Spec(p)["hostNetwork"] = true;
         Spec(p)["hostPID"] = true;
         Spec(p)["hostIPC"] = true;
       },
       {"hostNamespaces spec.hostNetwork", "hostNamespaces spec.hostPID",
        "hostNamespaces spec.hostIPC"},
       {"hostNamespaces spec.hostNetwork", "hostNamespaces spec.hostPID",
        "hostNamespaces spec.hostIPC"}},
  });
}

TEST_CASE("pod security baseline: privileged containers") {
  RunCases({
      {"privileged false", [](Json& p) { AppSc(p)["privileged"] = false; }, {}, {}},
      {"privileged init container",
       [](Json& p) { Init(p)["securityContext"]["privileged"] = true; },
       {"privileged " + kInit + "privileged"},
       {"privileged " + kInit + "privileged"}},
  });
}

TEST_CASE("pod security: capabilities") {
  RunCases({
      {"add NET_BIND_SERVICE (allowed by both)",
       [](Json& p) { AppSc(p)["capabilities"]["add"] = Json::array({"NET_BIND_SERVICE"}); },
       {},
       {}},
      {"add CHOWN (baseline's default set, not restricted's)",
       [](Json& p) { AppSc(p)["capabilities"]["add"] = Json::array({"CHOWN"}); },
       {},
       {"capabilities_restricted " + kApp + "capabilities.add[0]"}},
      {"add SYS_ADMIN",
       [](Json& p) {
         AppSc(p)["capabilities"]["add"] = Json::array({"NET_BIND_SERVICE", "SYS_ADMIN"});
       },
       {"capabilities_baseline " + kApp + "capabilities.add[1]"},
       {"capabilities_baseline " + kApp + "capabilities.add[1]",
        "capabilities_restricted " + kApp + "capabilities.add[1]"}},
      {"no drop",
       [](Json& p) { AppSc(p).erase("capabilities"); },
       {},
       {"capabilities_restricted " + kApp + "capabilities.drop"}},
      {"drop without ALL",
       [](Json& p) {
         AppSc(p)["capabilities"]["drop"] = Json::array({"NET_RAW", "all"});
       },
       {},
       {"capabilities_restricted " + kApp + "capabilities.drop"}},
      {"drop ALL among others",
       [](Json& p) {
         AppSc(p)["capabilities"]["drop"] = Json::array({"NET_RAW", "ALL"});
       },
       {},
       {}},
      {"Windows pods skip the restricted capabilities check",
       [](Json& p) {
         Spec(p)["os"]["name"] = "windows";
         AppSc(p).erase("capabilities");
       },
       {},
       {}},
  });
}

TEST_CASE("pod security: volumes") {
  RunCases({
      {"every restricted volume type",
       [](Json& p) {
         Spec(p)["volumes"] = Json::parse(R"([
           {"name": "a", "configMap": {"name": "c"}}, {"name": "b", "csi": {"driver": "d"}},
           {"name": "c", "downwardAPI": {}}, {"name": "d", "emptyDir": {}},
           {"name": "e", "ephemeral": {"volumeClaimTemplate": {}}},
           {"name": "f", "image": {"reference": "r"}},
           {"name": "g", "persistentVolumeClaim": {"claimName": "c"}},
           {"name": "h", "projected": {"sources": []}}, {"name": "i", "secret": {"secretName": "s"}},
           {"name": "j"}])");
       },
       {},
       {}},
      {"nfs (allowed by baseline only)",
       [](Json& p) {
         Spec(p)["volumes"] = Json::parse(R"([{"name": "a", "emptyDir": {}},
                                              {"name": "n", "nfs": {"server": "s", "path": "/"}}])");
       },
       {},
       {"restrictedVolumes spec.volumes[1].nfs"}},
      {"hostPath",
       [](Json& p) {
         Spec(p)["volumes"] =
             Json::parse(R"([{"name": "tz", "hostPath": {"path": "/etc/localtime"}}])");
       },
       {"hostPathVolumes spec.volumes[0].hostPath"},
       {"hostPathVolumes spec.volumes[0].hostPath", "restrictedVolumes spec.volumes[0].hostPath"}},
  });
}

TEST_CASE("pod security baseline: host ports") {
  RunCases({
      {"container ports without host ports",
       [](Json& p) {
         App(p)["ports"] =
             Json::parse(R"([{"containerPort": 80}, {"containerPort": 81, "hostPort": 0}])");
       },
       {},
       {}},
      {"a host port",
       [](Json& p) {
         App(p)["ports"] =
             Json::parse(R"([{"containerPort": 80}, {"containerPort": 81, "hostPort": 8081}])");
       },
       {"hostPorts spec.containers[0].ports[1].hostPort"},
       {"hostPorts spec.containers[0].ports[1].hostPort"}},
  });
}

TEST_CASE("pod security baseline: host in probes and lifecycle hooks") {
  RunCases({
      {"probes and hooks without host",
       [](Json& p) {
         App(p)["readinessProbe"] = Json::parse(R"({"httpGet": {"path": "/", "port": 80}})");
         App(p)["livenessProbe"] = Json::parse(R"({"tcpSocket": {"port": 80, "host": ""}})");
         App(p)["lifecycle"] =
             Json::parse(R"({"preStop": {"httpGet": {"path": "/q", "port": 80}}})");
       },
       {},
       {}},
      {"host set",
       [](Json& p) {
         App(p)["startupProbe"] = Json::parse(R"({"httpGet": {"host": "10.0.0.1", "port": 80}})");
         App(p)["lifecycle"] =
             Json::parse(R"({"postStart": {"tcpSocket": {"host": "localhost", "port": 1}}})");
       },
       {"hostProbesAndLifecycle spec.containers[0].startupProbe.httpGet.host",
        "hostProbesAndLifecycle spec.containers[0].lifecycle.postStart.tcpSocket.host"},
       {"hostProbesAndLifecycle spec.containers[0].startupProbe.httpGet.host",
        "hostProbesAndLifecycle spec.containers[0].lifecycle.postStart.tcpSocket.host"}},
  });
}

TEST_CASE("pod security baseline: AppArmor") {
  const std::string annotation = "container.apparmor.security.beta.kubernetes.io/app";
  RunCases({
      {"RuntimeDefault, Localhost and the allowed annotations",
       [&](Json& p) {
         PodSc(p)["appArmorProfile"]["type"] = "RuntimeDefault";
         AppSc(p)["appArmorProfile"] = {{"type", "Localhost"}, {"localhostProfile", "k8s-x"}};
         p["metadata"]["annotations"][annotation] = "runtime/default";
         p["metadata"]["annotations"]["container.apparmor.security.beta.kubernetes.io/init"] =
             "localhost/k8s-x";
         p["metadata"]["annotations"]["other"] = "unconfined";
       },
       {},
       {}},
      {"Unconfined field and annotation",
       [&](Json& p) {
         AppSc(p)["appArmorProfile"]["type"] = "Unconfined";
         p["metadata"]["annotations"][annotation] = "unconfined";
       },
       {"appArmorProfile " + kApp + "appArmorProfile.type",
        "appArmorProfile metadata.annotations[\"" + annotation + "\"]"},
       {"appArmorProfile " + kApp + "appArmorProfile.type",
        "appArmorProfile metadata.annotations[\"" + annotation + "\"]"}},
  });
}

TEST_CASE("pod security baseline: SELinux") {
  RunCases({
      {"allowed type and any level",
       [](Json& p) {
         PodSc(p)["seLinuxOptions"] = {{"type", "container_init_t"}, {"level", "s0:c123,c456"}};
         AppSc(p)["seLinuxOptions"] = {{"type", ""}, {"user", ""}, {"role", ""}};
       },
       {},
       {}},
      {"custom type, user and role",
       [](Json& p) {
         PodSc(p)["seLinuxOptions"] = {{"type", "spc_t"}};
         AppSc(p)["seLinuxOptions"] = {{"user", "system_u"}, {"role", "sysadm_r"}};
       },
       {"seLinuxOptions spec.securityContext.seLinuxOptions.type",
        "seLinuxOptions " + kApp + "seLinuxOptions.user",
        "seLinuxOptions " + kApp + "seLinuxOptions.role"},
       {"seLinuxOptions spec.securityContext.seLinuxOptions.type",
        "seLinuxOptions " + kApp + "seLinuxOptions.user",
        "seLinuxOptions " + kApp + "seLinuxOptions.role"}},
  });
}

TEST_CASE("pod security baseline: /proc mount type") {
  RunCases({
      {"Default", [](Json& p) { AppSc(p)["procMount"] = "Default"; }, {}, {}},
      {"Unmasked",
       [](Json& p) { AppSc(p)["procMount"] = "Unmasked"; },
       {"procMount " + kApp + "procMount"},
       {"procMount " + kApp + "procMount"}},
  });
}

TEST_CASE("pod security: seccomp") {
  RunCases({
      {"Localhost on a container",
       [](Json& p) {
         AppSc(p)["seccompProfile"] = {{"type", "Localhost"}, {"localhostProfile", "p.json"}};
       },
       {},
       {}},
      {"no pod profile, every container RuntimeDefault or Localhost",
       [](Json& p) {
         PodSc(p).erase("seccompProfile");
         AppSc(p)["seccompProfile"]["type"] = "RuntimeDefault";
         Init(p)["securityContext"]["seccompProfile"]["type"] = "Localhost";
       },
       {},
       {}},
      {"no profile anywhere (baseline allows it)",
       [](Json& p) { PodSc(p).erase("seccompProfile"); },
       {},
       {"seccompProfile_restricted " + kApp + "seccompProfile.type",
        "seccompProfile_restricted " + kInit + "seccompProfile.type"}},
      {"Unconfined container under a RuntimeDefault pod",
       [](Json& p) { AppSc(p)["seccompProfile"]["type"] = "Unconfined"; },
       {"seccompProfile_baseline " + kApp + "seccompProfile.type"},
       {"seccompProfile_baseline " + kApp + "seccompProfile.type",
        "seccompProfile_restricted " + kApp + "seccompProfile.type"}},
      {"Unconfined pod, containers RuntimeDefault",
       [](Json& p) {
         PodSc(p)["seccompProfile"]["type"] = "Unconfined";
         AppSc(p)["seccompProfile"]["type"] = "RuntimeDefault";
         Init(p)["securityContext"]["seccompProfile"]["type"] = "RuntimeDefault";
       },
       {"seccompProfile_baseline spec.securityContext.seccompProfile.type"},
       {"seccompProfile_baseline spec.securityContext.seccompProfile.type",
        "seccompProfile_restricted spec.securityContext.seccompProfile.type"}},
      {"Windows pods skip the restricted seccomp check",
       [](Json& p) {
         Spec(p)["os"]["name"] = "windows";
         PodSc(p).erase("seccompProfile");
       },
       {},
       {}},
  });
}

TEST_CASE("pod security baseline: sysctls") {
  RunCases({
      {"safe sysctls",
       [](Json& p) {
         PodSc(p)["sysctls"] = Json::parse(R"([{"name": "kernel.shm_rmid_forced", "value": "1"},
                                               {"name": "net.ipv4.tcp_rmem", "value": "4096 87380 16777216"},
                                               {"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}])");
       },
       {},
       {}},
      {"an unsafe sysctl",
       [](Json& p) {
         PodSc(p)["sysctls"] = Json::parse(R"([{"name": "net.ipv4.tcp_syncookies", "value": "1"},
                                               {"name": "kernel.msgmax", "value": "65536"}])");
       },
       {"sysctls spec.securityContext.sysctls[1].name"},
       {"sysctls spec.securityContext.sysctls[1].name"}},
  });
}

TEST_CASE("pod security restricted: privilege escalation") {
  RunCases({
      {"unset",
       [](Json& p) { AppSc(p).erase("allowPrivilegeEscalation"); },
       {},
       {"allowPrivilegeEscalation " + kApp + "allowPrivilegeEscalation"}},
      {"true",
       [](Json& p) { Init(p)["securityContext"]["allowPrivilegeEscalation"] = true; },
       {},
       {"allowPrivilegeEscalation " + kInit + "allowPrivilegeEscalation"}},
      {"Windows pods skip it",
       [](Json& p) {
         Spec(p)["os"]["name"] = "windows";
         AppSc(p).erase("allowPrivilegeEscalation");
       },
       {},
       {}},
  });
}

TEST_CASE("pod security restricted: running as non-root") {
  RunCases({
      {"every container instead of the pod",
       [](Json& p) {
         PodSc(p).erase("runAsNonRoot");
         AppSc(p)["runAsNonRoot"] = true;
         Init(p)["securityContext"]["runAsNonRoot"] = true;
       },
       {},
       {}},
      {"one container without it",
       [](Json& p) {
         PodSc(p).erase("runAsNonRoot");
         AppSc(p)["runAsNonRoot"] = true;
       },
       {},
       {"runAsNonRoot " + kInit + "runAsNonRoot"}},
      {"a container overriding the pod with false",
       [](Json& p) { AppSc(p)["runAsNonRoot"] = false; },
       {},
       {"runAsNonRoot " + kApp + "runAsNonRoot"}},
      {"the pod false, every container true",
       [](Json& p) {
         PodSc(p)["runAsNonRoot"] = false;
         AppSc(p)["runAsNonRoot"] = true;
         Init(p)["securityContext"]["runAsNonRoot"] = true;
       },
       {},
       {"runAsNonRoot spec.securityContext.runAsNonRoot"}},
      {"user namespaces (hostUsers: false) skip it",
       [](Json& p) {
         Spec(p)["hostUsers"] = false;
         PodSc(p).erase("runAsNonRoot");
       },
       {},
       {}},
  });
}

TEST_CASE("pod security restricted: runAsUser") {
  RunCases({
      {"non-zero",
       [](Json& p) {
         PodSc(p)["runAsUser"] = 1000;
         AppSc(p)["runAsUser"] = 1001;
       },
       {},
       {}},
      {"root on the pod and a container",
       [](Json& p) {
         PodSc(p)["runAsUser"] = 0;
         Init(p)["securityContext"]["runAsUser"] = 0;
       },
       {},
       {"runAsUser spec.securityContext.runAsUser", "runAsUser " + kInit + "runAsUser"}},
      {"user namespaces (hostUsers: false) skip it",
       [](Json& p) {
         Spec(p)["hostUsers"] = false;
         PodSc(p)["runAsUser"] = 0;
       },
       {},
       {}},
  });
}

TEST_CASE("pod security: ephemeral containers are checked like the others") {
  Json pod = RestrictedPod();
  pod["spec"]["ephemeralContainers"] = Json::parse(
      R"([{"name": "debug", "image": "busybox", "securityContext": {"privileged": true}}])");
  const std::string sc = "spec.ephemeralContainers[0].securityContext.";
  CHECK(Lines(Found(pod, kBaseline)) == Lines(Strings{"privileged " + sc + "privileged"}));
  CHECK(Lines(Found(pod, kRestricted)) ==
        Lines(Strings{"privileged " + sc + "privileged",
                      "allowPrivilegeEscalation " + sc + "allowPrivilegeEscalation",
                      "capabilities_restricted " + sc + "capabilities.drop"}));
}

TEST_CASE("pod security: messages say the rule and what the pod does") {
  Json pod = RestrictedPod();
  AppSc(pod).erase("allowPrivilegeEscalation");
  pod["spec"]["volumes"] =
      Json::parse(R"([{"name": "tz", "hostPath": {"path": "/etc/localtime"}}])");
  auto found = CheckPodSecurity(pod, kRestricted);
  REQUIRE(found.size() == 3);
  CHECK(found[0].message ==
        "hostPath volumes are not allowed: volume \"tz\" mounts the node's \"/etc/localtime\"");
  CHECK(found[1].check == "restrictedVolumes");
  CHECK(found[1].message.find("volume \"tz\" is a hostPath volume") != std::string::npos);
  CHECK(found[2].message ==
        "privilege escalation (e.g. through set-user-ID programs) must be disallowed: container "
        "\"app\" must set allowPrivilegeEscalation to false (it is unset)");
  CHECK(found[2].ToJson() == Json{{"check", "allowPrivilegeEscalation"},
                                  {"field", kApp + "allowPrivilegeEscalation"},
                                  {"message", found[2].message}});
}

TEST_CASE("pod security: objects that carry pods, and their field paths") {
  Json spec = RestrictedPod()["spec"];
  spec["containers"][0]["securityContext"]["privileged"] = true;
  Json meta = {
      {"annotations", {{"container.apparmor.security.beta.kubernetes.io/app", "unconfined"}}}};
  struct Shape {
    Json object;
    std::string prefix;       // of the pod spec
    std::string meta_prefix;  // of the pod metadata ("" = no metadata checked)
  };
  Json pod_template = {{"metadata", meta}, {"spec", spec}};
  std::vector<Shape> shapes = {
      {{{"kind", "Pod"}, {"metadata", meta}, {"spec", spec}}, "spec.", "metadata."},
      {{{"kind", "PodTemplate"}, {"template", pod_template}},
       "template.spec.",
       "template.metadata."},
      {spec, "", ""},
      {{{"metadata", meta}, {"spec", spec}}, "spec.", "metadata."},  // a pod without kind
  };
  for (const char* kind :
       {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job"}) {
    Json workload = {{"kind", kind}};
    workload["spec"]["template"] = pod_template;
    shapes.push_back({workload, "spec.template.spec.", "spec.template.metadata."});
  }
  Json cron_job = {{"kind", "CronJob"}};
  cron_job["spec"]["jobTemplate"]["spec"]["template"] = pod_template;
  shapes.push_back({cron_job, "spec.jobTemplate.spec.template.spec.",
                    "spec.jobTemplate.spec.template.metadata."});
  for (const auto& shape : shapes) {
    CAPTURE(shape.object.value("kind", "PodSpec"));
    Strings expected = {"privileged " + shape.prefix + "containers[0].securityContext.privileged"};
    if (!shape.meta_prefix.empty()) {
      expected.push_back("appArmorProfile " + shape.meta_prefix +
                         "annotations[\"container.apparmor.security.beta.kubernetes.io/app\"]");
    }
    CHECK(Lines(Found(shape.object, kBaseline)) == Lines(expected));
  }
}

TEST_CASE("pod security: objects without a pod and wrongly typed fields are ValidationErrors") {
  CHECK_THROWS_AS(
      CheckPodSecurity(Json{{"kind", "Service"}, {"spec", {{"ports", Json::array()}}}}, kBaseline),
      tfk8s::ValidationError);
  CHECK_THROWS_AS(CheckPodSecurity(Json::array(), kBaseline), tfk8s::ValidationError);

  Json pod = RestrictedPod();
  AppSc(pod)["privileged"] = "yes";
  try {
    CheckPodSecurity(pod, kBaseline);
    FAIL("expected a ValidationError");
  } catch (const tfk8s::ValidationError& e) {
    CHECK(e.field() == kApp + "privileged");
    CHECK(e.value() == "\"yes\"");
  }
  pod = RestrictedPod();
  pod["spec"]["containers"] = "app";
  try {
    CheckPodSecurity(pod, kRestricted);
    FAIL("expected a ValidationError");
  } catch (const tfk8s::ValidationError& e) {
    CHECK(e.field() == "spec.containers");
  }
}

TEST_CASE("pod security: levels as namespace labels spell them") {
  CHECK(tfk8s::ParsePodSecurityLevel("privileged") == PodSecurityLevel::kPrivileged);
  CHECK(tfk8s::ParsePodSecurityLevel("baseline") == kBaseline);
  CHECK(tfk8s::ParsePodSecurityLevel("restricted") == kRestricted);
  for (auto level : {PodSecurityLevel::kPrivileged, kBaseline, kRestricted}) {
    CHECK(tfk8s::ParsePodSecurityLevel(tfk8s::ToString(level)) == level);
  }
  for (const char* bad : {"Restricted", "", "strict", "restricted "}) {
    CAPTURE(bad);
    try {
      tfk8s::ParsePodSecurityLevel(bad);
      FAIL("expected a ValidationError");
    } catch (const tfk8s::ValidationError& e) {
      CHECK(e.value() == bad);
      CHECK(std::string(e.what()).find("privileged, baseline or restricted") != std::string::npos);
    }
  }
}

// ---- the rendered pods of every golden file ------------------------------------------------

namespace {

// Each golden file's verdict today: check -> the pod-carrying objects that fail it ("every pod"
// when all of the file's pod-carrying objects do). A golden absent from this table, or a row that
// differs, fails the test, which prints the actual row to paste.
//
// What remains are the pods that run sshd as root by design (DevInstance, the TFCluster
// session). Whoever changes the rendering updates the rows; an empty row means the golden's pods
// pass that level.
struct GoldenVerdict {
  std::map<std::string, std::string> baseline;
  std::map<std::string, std::string> restricted;
};

const std::map<std::string, GoldenVerdict> kGoldenVerdicts = {
    // The controller's Deployment: restricted, as the Namespace it creates enforces.
    {"controller_manifests_default", {{}, {}}},
    {"controller_manifests_namespaced", {{}, {}}},
    // DevInstance: baseline (seccompProfile RuntimeDefault, no hostPath: the time zone is TZ);
    // not restricted, by design: sshd and the tools run as root (docs/devinstance.md).
    {"devinstance_cpu",
     {{},
      {{"allowPrivilegeEscalation", "every pod"},
       {"capabilities_restricted", "every pod"},
       {"runAsNonRoot", "every pod"}}}},
    {"devinstance_gpu",
     {{},
      {{"allowPrivilegeEscalation", "every pod"},
       {"capabilities_restricted", "every pod"},
       {"runAsNonRoot", "every pod"}}}},
    {"devinstance_priority_class",
     {{},
      {{"allowPrivilegeEscalation", "every pod"},
       {"capabilities_restricted", "every pod"},
       {"runAsNonRoot", "every pod"}}}},
    // ScheduledJob runs, TFCluster replicas and TensorBoard: restricted by default
    // (podSecurity). The TFCluster session runs sshd as root: baseline, by design.
    {"scheduledjob_cron_batch_v1", {{}, {}}},
    {"scheduledjob_cron_batch_v1beta1", {{}, {}}},
    {"scheduledjob_manual_run", {{}, {}}},
    {"scheduledjob_priority_class", {{}, {}}},
    {"scheduledjob_run_job", {{}, {}}},
    {"tfcluster_gpu_per_replica",
     {{},
      {{"allowPrivilegeEscalation", "Job/resnet-session"},
       {"capabilities_restricted", "Job/resnet-session"},
       {"runAsNonRoot", "Job/resnet-session"},
       {"seccompProfile_restricted", "Job/resnet-session"}}}},
    {"tfcluster_seed_statefulset",
     {{},
      {{"allowPrivilegeEscalation", "Job/tf-dis-task-session"},
       {"capabilities_restricted", "Job/tf-dis-task-session"},
       {"runAsNonRoot", "Job/tf-dis-task-session"},
       {"seccompProfile_restricted", "Job/tf-dis-task-session"}}}},
    {"tfcluster_priority_class", {{}, {}}},
    {"tfcluster_spread_required", {{}, {}}},
};

const std::set<std::string> kPodKinds = {
    "Pod",        "PodTemplate",           "Deployment", "StatefulSet", "DaemonSet",
    "ReplicaSet", "ReplicationController", "Job",        "CronJob"};

std::map<std::string, std::string> Verdict(const std::vector<Json>& pod_objects,
                                           PodSecurityLevel level) {
  std::map<std::string, std::set<std::string>> failing;  // check -> "Kind/name"
  for (const auto& o : pod_objects) {
    std::string id = o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>();
    for (const auto& v : CheckPodSecurity(o, level)) failing[v.check].insert(id);
  }
  std::map<std::string, std::string> out;
  for (const auto& [check, ids] : failing) {
    if (ids.size() == pod_objects.size()) {
      out[check] = "every pod";
      continue;
    }
    std::string joined;
    for (const auto& id : ids) joined += (joined.empty() ? "" : ", ") + id;
    out[check] = joined;
  }
  return out;
}

std::string Row(const std::map<std::string, std::string>& verdict) {
  std::string out = "{";
  for (const auto& [check, ids] : verdict) {
    out += (out.size() > 1 ? ", " : "") + std::string("{\"") + check + "\", \"" + ids + "\"}";
  }
  return out + "}";
}

}  // namespace

TEST_CASE("pod security: every rendered pod of every golden file (issue #18's table)") {
  const std::filesystem::path dir = std::filesystem::path(TFK8S_TEST_DATA_DIR) / "golden";
  std::set<std::string> seen;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    std::string golden = entry.path().stem().string();
    CAPTURE(golden);
    seen.insert(golden);
    std::ifstream in(entry.path());
    REQUIRE(in.good());
    std::stringstream text;
    text << in.rdbuf();
    Json document = Json::parse(text.str());
    std::vector<Json> objects =
        document.is_array() ? document.get<std::vector<Json>>() : std::vector<Json>{document};
    std::vector<Json> pod_objects;
    for (auto& o : objects) {
      if (kPodKinds.count(o.value("kind", ""))) pod_objects.push_back(o);
    }
    CHECK_MESSAGE(!pod_objects.empty(), golden << " renders no pod");
    auto baseline = Verdict(pod_objects, kBaseline);
    auto restricted = Verdict(pod_objects, kRestricted);
    std::string actual_row =
        "{\"" + golden + "\",\n     {" + Row(baseline) + ",\n      " + Row(restricted) + "}},";
    auto expected = kGoldenVerdicts.find(golden);
    bool has_row = expected != kGoldenVerdicts.end();
    CHECK_MESSAGE(has_row, "no row for golden " << golden << "; today it is:\n    " << actual_row);
    if (!has_row) continue;
    CHECK_MESSAGE(expected->second.baseline == baseline,
                  "baseline differs; today:\n    " << actual_row);
    CHECK_MESSAGE(expected->second.restricted == restricted,
                  "restricted differs; today:\n    " << actual_row);
  }
  for (const auto& [golden, verdict] : kGoldenVerdicts) {
    CHECK_MESSAGE(seen.count(golden), "the table names " << golden << ", which is no golden file");
  }
}

// ---- the namespace pre-flight (EvaluateNamespacePodSecurity, tfk8s/quota.hpp) -------------

#include "tfk8s/quota.hpp"

namespace {

Json NamespaceWith(const Json& labels) {
  return {{"apiVersion", "v1"},
          {"kind", "Namespace"},
          {"metadata", {{"name", "team-a"}, {"labels", labels}}}};
}

// A StatefulSet whose pod template is a baseline pod (root allowed) but not restricted.
Json BaselineStatefulSet() {
  Json pod = RestrictedPod();
  pod["spec"]["securityContext"].erase("runAsNonRoot");
  pod["spec"].erase("initContainers");  // one container: one violation
  return {{"apiVersion", "apps/v1"},
          {"kind", "StatefulSet"},
          {"metadata", {{"name", "nb"}}},
          {"spec", {{"template", {{"metadata", Json::object()}, {"spec", pod["spec"]}}}}}};
}

}  // namespace

TEST_CASE("namespace pod security: enforce refuses, warn and audit only note") {
  using tfk8s::EvaluateNamespacePodSecurity;
  const std::vector<Json> objects = {
      BaselineStatefulSet(),
      {{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", {{"name", "nb"}}}}};

  SUBCASE("no labels: nothing to say") {
    auto fit = EvaluateNamespacePodSecurity(NamespaceWith(Json::object()), objects);
    CHECK(fit.fits);
    CHECK(fit.problems.empty());
    CHECK(fit.notes.empty());
  }
  SUBCASE("enforce restricted: a problem naming the object, check and field") {
    auto fit = EvaluateNamespacePodSecurity(
        NamespaceWith({{"pod-security.kubernetes.io/enforce", "restricted"}}), objects);
    CHECK_FALSE(fit.fits);
    REQUIRE(fit.problems.size() == 1);
    CHECK(fit.problems[0] ==
          "Pod Security: namespace team-a enforces \"restricted\": StatefulSet nb breaks "
          "runAsNonRoot at spec.template.spec.containers[0].securityContext.runAsNonRoot: " +
              CheckPodSecurity(objects[0], kRestricted).at(0).message);
    CHECK(fit.notes.empty());
  }
  SUBCASE("enforce baseline passes; warn restricted is a note") {
    auto fit = EvaluateNamespacePodSecurity(
        NamespaceWith({{"pod-security.kubernetes.io/enforce", "baseline"},
                       {"pod-security.kubernetes.io/warn", "restricted"},
                       {"pod-security.kubernetes.io/audit", "restricted"}}),
        objects);
    CHECK(fit.fits);
    CHECK(fit.problems.empty());
    REQUIRE(fit.notes.size() == 2);
    CHECK(fit.notes[0].rfind("Pod Security: namespace team-a warns \"restricted\": ", 0) == 0);
    CHECK(fit.notes[1].rfind("Pod Security: namespace team-a audits \"restricted\": ", 0) == 0);
  }
  SUBCASE("a pinned version is named; an unknown level is a note, not a refusal") {
    auto pinned = EvaluateNamespacePodSecurity(
        NamespaceWith({{"pod-security.kubernetes.io/enforce", "restricted"},
                       {"pod-security.kubernetes.io/enforce-version", "v1.25"}}),
        objects);
    REQUIRE(pinned.problems.size() == 1);
    CHECK(pinned.problems[0].find("(the namespace pins v1.25; checked against the latest "
                                  "definitions)") != std::string::npos);
    auto unknown = EvaluateNamespacePodSecurity(
        NamespaceWith({{"pod-security.kubernetes.io/enforce", "strict"}}), objects);
    CHECK(unknown.fits);
    REQUIRE(unknown.notes.size() == 1);
    CHECK(unknown.notes[0].find("pod-security.kubernetes.io/enforce=strict names no level") !=
          std::string::npos);
  }
  SUBCASE("a restricted pod passes a restricted namespace") {
    Json sts = BaselineStatefulSet();
    sts["spec"]["template"]["spec"] = RestrictedPod()["spec"];
    auto fit = EvaluateNamespacePodSecurity(
        NamespaceWith({{"pod-security.kubernetes.io/enforce", "restricted"}}), {sts});
    CHECK(fit.fits);
    CHECK(fit.problems.empty());
  }
}

TEST_CASE("pod carriers: the kinds whose objects Pod Security admission reaches") {
  for (const char* kind : {"Pod", "PodTemplate", "Deployment", "StatefulSet", "DaemonSet",
                           "ReplicaSet", "Job", "ReplicationController", "CronJob"}) {
    CHECK_MESSAGE(tfk8s::IsPodCarrier(Json{{"kind", kind}}), kind);
  }
  for (const Json& other : {Json{{"kind", "Service"}}, Json{{"kind", "Secret"}}, Json{{"kind", 7}},
                            Json::object(), Json::array()}) {
    CHECK_FALSE_MESSAGE(tfk8s::IsPodCarrier(other), other.dump());
  }
}
