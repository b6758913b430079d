// The controller's install manifests (controller/manifests.hpp): golden renderings, Pod
// Security "restricted" by the project's own checker, least-privilege RBAC (no wildcard, the
// leader Role only on Leases and its own pods, no Secrets), the webhook credential only as a
// secretKeyRef, validation naming the field, deterministic output.
#include <doctest/doctest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "controller/manifests.hpp"
#include "golden.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/pod_security.hpp"
#include "tfk8s/quota.hpp"

using namespace tfk8s;
using tfk8s::RenderControllerManifests;
using tfk8s::controller::ManifestOptions;
using tfk8s::testing::CheckGolden;

namespace {

ManifestOptions Defaults() {
  ManifestOptions o;
  o.image = "tfk8s.local/runtime:1";
  return o;
}

// Two watched namespaces (given unsorted), PriorityClasses, a NodePort and a webhook with its
// Authorization header in a Secret.
ManifestOptions Everything() {
  ManifestOptions o = Defaults();
  o.watch_namespaces = {"team-b", "team-a"};
  o.priority_classes = true;
  o.metrics_node_port = 30090;
  o.image_pull_policy = "IfNotPresent";
  o.webhook_url = "https://alerts.example.com/hooks/tfk8s";
  o.webhook_secret = "tfk8s-webhook";
  return o;
}

std::vector<Json> OfKind(const std::vector<Json>& objects, const std::string& kind) {
  std::vector<Json> out;
  for (const auto& o : objects) {
    if (o.value("kind", "") == kind) out.push_back(o);
  }
  return out;
}

// The first object of `kind` (in namespace `ns`, when given).
const Json& Only(const std::vector<Json>& objects, const std::string& kind,
                 const std::string& ns = "") {
  for (const auto& o : objects) {
    if (o.value("kind", "") == kind && (ns.empty() || o["metadata"].value("namespace", "") == ns)) {
      return o;
    }
  }
  FAIL("no " << kind << " in namespace '" << ns << "'");
  static const Json kNone;
  return kNone;
}

const Json& Container(const Json& deployment) {
  return deployment["spec"]["template"]["spec"]["containers"][0];
}

std::vector<std::string> Args(const std::vector<Json>& objects) {
  return Container(Only(objects, "Deployment"))["args"].get<std::vector<std::string>>();
}

// The field a ValidationError names ("" when Validate() accepts the options).
std::string RefusedField(const ManifestOptions& o) {
  try {
    o.Validate();
  } catch (const ValidationError& e) {
    return e.field();
  }
  return "";
}

// Every string anywhere in `j`, keys included.
void EachString(const Json& j, const std::function<void(const std::string&)>& f) {
  if (j.is_string()) {
    f(j.get<std::string>());
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      f(it.key());
      EachString(it.value(), f);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) EachString(v, f);
  }
}

std::vector<std::string> Kinds(const std::vector<Json>& objects) {
  std::vector<std::string> out;
  for (const auto& o : objects) {
    std::string ns = o["metadata"].value("namespace", "");
    out.push_back(o.value("kind", "") + "/" + (ns.empty() ? "" : ns + "/") +
                  o["metadata"].value("name", ""));
  }
  return out;
}

}  // namespace

TEST_SUITE("controller manifests") {
  TEST_CASE("golden: controller manifests with the defaults, every namespace") {
    CheckGolden("controller_manifests_default", Json(RenderControllerManifests(Defaults())));
  }

  TEST_CASE("golden: controller manifests for two namespaces, PriorityClasses, NodePort, webhook") {
    CheckGolden("controller_manifests_namespaced", Json(RenderControllerManifests(Everything())));
  }

  TEST_CASE("controller manifests: apply order, and Roles per watched namespace sorted") {
    CHECK(Kinds(RenderControllerManifests(Defaults())) ==
          std::vector<std::string>{
              "Namespace/tfk8s-system", "ServiceAccount/tfk8s-system/tfk8s-controller",
              "Role/tfk8s-system/tfk8s-controller-leader",
              "RoleBinding/tfk8s-system/tfk8s-controller-leader", "ClusterRole/tfk8s-controller",
              "ClusterRoleBinding/tfk8s-controller", "Deployment/tfk8s-system/tfk8s-controller",
              "Service/tfk8s-system/tfk8s-controller-metrics"});
    CHECK(Kinds(RenderControllerManifests(Everything())) ==
          std::vector<std::string>{
              "Namespace/tfk8s-system", "ServiceAccount/tfk8s-system/tfk8s-controller",
              "Role/tfk8s-system/tfk8s-controller-leader",
              "RoleBinding/tfk8s-system/tfk8s-controller-leader", "Role/team-a/tfk8s-controller",
              "RoleBinding/team-a/tfk8s-controller", "Role/team-b/tfk8s-controller",
              "RoleBinding/team-b/tfk8s-controller",
              "Role/kube-system/tfk8s-controller-tcp-services-tfk8s-system",
              "RoleBinding/kube-system/tfk8s-controller-tcp-services-tfk8s-system",
              "PriorityClass/tfk8s-scheduled", "PriorityClass/tfk8s-dev",
              "Deployment/tfk8s-system/tfk8s-controller",
              "Service/tfk8s-system/tfk8s-controller-metrics"});
  }

  TEST_CASE("controller manifests: the pod passes Pod Security restricted, as its namespace says") {
    for (const auto& options : {Defaults(), Everything()}) {
      auto objects = RenderControllerManifests(options);
      const Json& deployment = Only(objects, "Deployment");
      auto violations = CheckPodSecurity(deployment, PodSecurityLevel::kRestricted);
      for (const auto& v : violations) MESSAGE(v.ToJson().dump());
      CHECK(violations.empty());
      const Json& ns = Only(objects, "Namespace");
      for (const char* mode : {"enforce", "audit", "warn"}) {
        CHECK(ns["metadata"]["labels"][std::string("pod-security.kubernetes.io/") + mode] ==
              "restricted");
      }
      FitResult fit = EvaluateNamespacePodSecurity(ns, objects);
      CHECK(fit.fits);
      CHECK(fit.notes.empty());
      // And the rest of what the brief of a hardened controller asks for.
      const Json& pod = deployment["spec"]["template"]["spec"];
      CHECK(pod["securityContext"]["runAsUser"] == 65532);
      CHECK(Container(deployment)["securityContext"]["readOnlyRootFilesystem"] == true);
      CHECK(pod["automountServiceAccountToken"] == true);
      CHECK(pod["serviceAccountName"] == "tfk8s-controller");
    }
  }

  TEST_CASE("controller manifests: no wildcard, no escalation verbs, no Secrets") {
    for (const auto& options : {Defaults(), Everything()}) {
      auto objects = RenderControllerManifests(options);
      int roles = 0;
      for (const auto& o : objects) {
        const std::string kind = o.value("kind", "");
        if (kind != "Role" && kind != "ClusterRole") continue;
        ++roles;
        EachString(o, [&](const std::string& s) {
          CHECK_MESSAGE(s.find('*') == std::string::npos, kind << " holds '*': " << s);
        });
        for (const auto& rule : o["rules"]) {
          CHECK(rule.contains("verbs"));
          CHECK(!rule.contains("nonResourceURLs"));
          for (const auto& verb : rule["verbs"]) {
            CHECK(
                std::set<std::string>{"get", "list", "watch", "create", "update", "patch", "delete"}
                    .count(verb.get<std::string>()) == 1);
          }
          for (const auto& resource : rule["resources"]) CHECK(resource != "secrets");
        }
      }
      CHECK(roles == (options.watch_namespaces.empty() ? 2 : 4));
    }
  }

  TEST_CASE(
      "controller manifests: the leader Role names only Leases and its own pods, in the "
      "controller's namespace") {
    for (const auto& options : {Defaults(), Everything()}) {
      auto objects = RenderControllerManifests(options);
      int leader_roles = 0;
      for (const auto& o : objects) {
        const std::string kind = o.value("kind", "");
        if (kind != "Role" && kind != "ClusterRole") continue;
        const std::string name = o["metadata"]["name"];
        for (const auto& rule : o["rules"]) {
          // Leases (create cannot be narrowed by name) only in the leader Role.
          if (rule["resources"] == Json::array({"leases"})) {
            CHECK(name == "tfk8s-controller-leader");
          }
        }
        if (name != "tfk8s-controller-leader") continue;
        ++leader_roles;
        CHECK(kind == "Role");
        CHECK(o["metadata"]["namespace"] == "tfk8s-system");
        CHECK(o["rules"] == Json::parse(R"([{"apiGroups": ["coordination.k8s.io"],
                                             "resources": ["leases"],
                                             "verbs": ["get", "create", "update"]},
                                            {"apiGroups": [""], "resources": ["pods"],
                                             "verbs": ["list", "patch"]}])"));
      }
      CHECK(leader_roles == 1);
    }
  }

  TEST_CASE("controller manifests: every binding gives its own Role to the controller's account") {
    auto objects = RenderControllerManifests(Everything());
    std::set<std::string> roles;
    for (const auto& o : objects) {
      const std::string kind = o.value("kind", "");
      if (kind == "Role" || kind == "ClusterRole") {
        roles.insert(kind + "/" + o["metadata"].value("namespace", "") + "/" +
                     o["metadata"].value("name", ""));
      }
    }
    int bindings = 0;
    for (const auto& o : objects) {
      const std::string kind = o.value("kind", "");
      if (kind != "RoleBinding" && kind != "ClusterRoleBinding") continue;
      ++bindings;
      const Json& ref = o["roleRef"];
      CHECK(ref["apiGroup"] == "rbac.authorization.k8s.io");
      CHECK(roles.count(ref.value("kind", "") + "/" + o["metadata"].value("namespace", "") + "/" +
                        ref.value("name", "")) == 1);
      CHECK(o["subjects"] == Json::parse(R"([{"kind": "ServiceAccount", "name": "tfk8s-controller",
                                              "namespace": "tfk8s-system"}])"));
    }
    CHECK(bindings == 4);
  }

  TEST_CASE("controller manifests: with watched namespaces, tcp-services keeps a Role of its own") {
    // A culled instance with ingress-tcp exposure gives its ports back in ingress-nginx's
    // ConfigMap, kube-system/tcp-services: only that ConfigMap, get and update.
    const Json role = Only(RenderControllerManifests(Everything()), "Role", "kube-system");
    CHECK(role["metadata"]["name"] == "tfk8s-controller-tcp-services-tfk8s-system");
    CHECK(role["rules"] == Json::parse(R"([{"apiGroups": [""], "resources": ["configmaps"],
                                            "resourceNames": ["tcp-services"],
                                            "verbs": ["get", "update"]}])"));
    // Watching kube-system itself, its workload Role has the rule already.
    ManifestOptions o = Everything();
    o.watch_namespaces = {"kube-system"};
    for (const auto& object : RenderControllerManifests(o)) {
      CHECK(object["metadata"].value("name", "").find("tcp-services") == std::string::npos);
    }
  }

  TEST_CASE("controller manifests: the webhook credential appears only as a secretKeyRef") {
    ManifestOptions o = Everything();
    o.webhook_secret = "alerting-token-7f3a";
    auto objects = RenderControllerManifests(o);
    int mentions = 0;
    for (const auto& object : objects) {
      EachString(object, [&](const std::string& s) {
        if (s.find("alerting-token-7f3a") != std::string::npos) ++mentions;
      });
    }
    CHECK(mentions == 1);
    Json wanted;
    for (const auto& env : Container(Only(objects, "Deployment"))["env"]) {
      if (env["name"] == "TFK8S_WEBHOOK_AUTHORIZATION") wanted = env;
    }
    CHECK(wanted == Json::parse(R"({"name": "TFK8S_WEBHOOK_AUTHORIZATION",
                                    "valueFrom": {"secretKeyRef": {"name": "alerting-token-7f3a",
                                                                   "key": "authorization"}}})"));
    // Without a Secret, no such variable at all.
    o.webhook_secret.clear();
    const auto without = RenderControllerManifests(o);
    for (const auto& env : Container(Only(without, "Deployment"))["env"]) {
      CHECK(env["name"] != "TFK8S_WEBHOOK_AUTHORIZATION");
    }
    CHECK(OfKind(without, "Secret").empty());
  }

  TEST_CASE("controller manifests: the command line, from the options") {
    CHECK(Args(RenderControllerManifests(Defaults())) ==
          std::vector<std::string>{"controller", "run", "--lease-namespace=$(POD_NAMESPACE)",
                                   "--listen=:8080"});
    ManifestOptions o = Everything();
    o.port = 9090;
    // A '$' of the URL reaches the program as written, not as a variable reference.
    o.webhook_url = "https://alerts.example.com/hooks/$(POD_NAME)";
    o.extra_args = {"--verbose", "--cull-idle=2h"};
    o.label_selector = "team in (vision,nlp),tier!=$(x)";
    CHECK(Args(RenderControllerManifests(o)) ==
          std::vector<std::string>{"controller", "run", "--lease-namespace=$(POD_NAMESPACE)",
                                   "--listen=:9090", "--watch-namespaces=team-a,team-b",
                                   "--selector=team in (vision,nlp),tier!=$$(x)",
                                   "--webhook-url=https://alerts.example.com/hooks/$$(POD_NAME)",
                                   "--verbose", "--cull-idle=2h"});
    const auto objects = RenderControllerManifests(o);
    const Json& c = Container(Only(objects, "Deployment"));
    CHECK(c["command"] == Json::array({"/usr/local/bin/tfk8s"}));
    CHECK(c["ports"] == Json::parse(R"([{"name": "http", "containerPort": 9090,
                                         "protocol": "TCP"}])"));
  }

  TEST_CASE("controller manifests: the metrics Service is ClusterIP, or NodePort when asked") {
    const Json cluster_ip = Only(RenderControllerManifests(Defaults()), "Service");
    CHECK(cluster_ip["spec"]["type"] == "ClusterIP");
    CHECK(!cluster_ip["spec"]["ports"][0].contains("nodePort"));
    CHECK(cluster_ip["spec"]["ports"][0]["targetPort"] == "http");
    const Json node_port = Only(RenderControllerManifests(Everything()), "Service");
    CHECK(node_port["spec"]["type"] == "NodePort");
    CHECK(node_port["spec"]["ports"][0]["nodePort"] == 30090);
    // The leader alone: the Deployment's own selector and the label the leader puts on itself.
    Json leader = Only(RenderControllerManifests(Everything()),
                       "Deployment")["spec"]["selector"]["matchLabels"];
    leader["tfk8s.io/controller-leader"] = "true";
    CHECK(node_port["spec"]["selector"] == leader);
  }

  TEST_CASE("controller manifests: memory request and limit, from the options") {
    CHECK(Container(Only(RenderControllerManifests(Defaults()), "Deployment"))["resources"] ==
          Json::parse(R"({"requests": {"cpu": "50m", "memory": "128Mi"},
                          "limits": {"memory": "1Gi"}})"));
    ManifestOptions o = Defaults();
    o.memory_request = "512Mi";
    o.memory_limit = "3Gi";
    const Json resources = Container(Only(RenderControllerManifests(o), "Deployment"))["resources"];
    CHECK(resources["requests"]["memory"] == "512Mi");
    CHECK(resources["limits"]["memory"] == "3Gi");
  }

  TEST_CASE("controller manifests: the pods' nodeSelector, only when given") {
    const Json spec_default =
        Only(RenderControllerManifests(Defaults()), "Deployment")["spec"]["template"]["spec"];
    CHECK(!spec_default.contains("nodeSelector"));
    ManifestOptions o = Defaults();
    o.node_selector = {{"node-role.kubernetes.io/system", "true"}, {"pool", "infra"}};
    const Json spec = Only(RenderControllerManifests(o), "Deployment")["spec"]["template"]["spec"];
    CHECK(spec["nodeSelector"] ==
          Json{{"node-role.kubernetes.io/system", "true"}, {"pool", "infra"}});
  }

  TEST_CASE("controller manifests: nothing carries tfk8s's workload label") {
    // app.kubernetes.io/managed-by=tfk8s marks workloads: the Fleet would count the
    // controller's pods, DeleteQuota(delete_namespace) would take its Namespace.
    for (const auto& object : RenderControllerManifests(Everything())) {
      EachString(object, [&](const std::string& s) {
        CHECK(s.find("app.kubernetes.io/managed-by") == std::string::npos);
      });
    }
  }

  TEST_CASE("controller manifests: deterministic, whatever the order of the namespaces") {
    ManifestOptions a = Everything();
    ManifestOptions b = Everything();
    b.watch_namespaces = {"team-a", "team-b"};
    CHECK(Json(RenderControllerManifests(a)).dump() == Json(RenderControllerManifests(a)).dump());
    CHECK(Json(RenderControllerManifests(a)).dump() == Json(RenderControllerManifests(b)).dump());
  }

  TEST_CASE("controller manifests: Validate() names the offending field") {
    CHECK(RefusedField(Defaults()).empty());
    CHECK(RefusedField(Everything()).empty());
    struct Case {
      const char* why;
      std::function<void(ManifestOptions&)> change;
      std::string field;
    };
    const std::vector<Case> cases = {
        {"bad namespace", [](ManifestOptions& o) { o.namespace_name = "Tfk8s"; }, "namespace_name"},
        {"empty namespace", [](ManifestOptions& o) { o.namespace_name = ""; }, "namespace_name"},
        {"system namespace", [](ManifestOptions& o) { o.namespace_name = "kube-system"; },
         "namespace_name"},
        {"bad watched namespace",
         [](ManifestOptions& o) {
           o.watch_namespaces = {"team-a", "team_b"};
         },
         "watch_namespaces[1]"},
        {"watched twice",
         [](ManifestOptions& o) {
           o.watch_namespaces = {"team-a", "team-a"};
         },
         "watch_namespaces[1]"},
        {"no image", [](ManifestOptions& o) { o.image = ""; }, "image"},
        {"image with a space", [](ManifestOptions& o) { o.image = "tfk8s runtime"; }, "image"},
        {"pull policy", [](ManifestOptions& o) { o.image_pull_policy = "Sometimes"; },
         "image_pull_policy"},
        {"no replicas", [](ManifestOptions& o) { o.replicas = 0; }, "replicas"},
        {"port 0", [](ManifestOptions& o) { o.port = 0; }, "port"},
        {"port too high", [](ManifestOptions& o) { o.port = 70000; }, "port"},
        {"privileged port", [](ManifestOptions& o) { o.port = 80; }, "port"},
        {"node port", [](ManifestOptions& o) { o.metrics_node_port = 0; }, "metrics_node_port"},
        {"url scheme", [](ManifestOptions& o) { o.webhook_url = "ftp://alerts.example.com"; },
         "webhook_url"},
        {"url without scheme", [](ManifestOptions& o) { o.webhook_url = "alerts.example.com"; },
         "webhook_url"},
        {"url without host", [](ManifestOptions& o) { o.webhook_url = "https:///hook"; },
         "webhook_url"},
        {"credentials in the url",
         [](ManifestOptions& o) { o.webhook_url = "https://bot:hunter2@alerts.example.com/"; },
         "webhook_url"},
        {"secret over http",
         [](ManifestOptions& o) { o.webhook_url = "http://alerts.example.com/hook"; },
         "webhook_secret"},
        {"secret without url", [](ManifestOptions& o) { o.webhook_url = ""; }, "webhook_secret"},
        {"bad secret name", [](ManifestOptions& o) { o.webhook_secret = "Webhook_Token"; },
         "webhook_secret"},
        {"memory request", [](ManifestOptions& o) { o.memory_request = "lots"; }, "memory_request"},
        {"no memory limit", [](ManifestOptions& o) { o.memory_limit = ""; }, "memory_limit"},
        {"request over limit",
         [](ManifestOptions& o) {
           o.memory_request = "2Gi";
           o.memory_limit = "1Gi";
         },
         "memory_request"},
        {"selector with a newline", [](ManifestOptions& o) { o.label_selector = "team=a\nb"; },
         "label_selector"},
        {"the selector in extra_args",
         [](ManifestOptions& o) { o.extra_args = {"--selector=team=a"}; }, "extra_args[0]"},
        {"node selector key",
         [](ManifestOptions& o) {
           o.node_selector = {{"bad key!", "x"}};
         },
         "node_selector"},
        {"node selector value",
         [](ManifestOptions& o) {
           o.node_selector = {{"node-role.kubernetes.io/system", "not a value"}};
         },
         "node_selector[node-role.kubernetes.io/system]"},
        {"a flag the options set",
         [](ManifestOptions& o) {
           o.extra_args = {"--verbose", "--listen=:9999"};
         },
         "extra_args[1]"},
    };
    for (const auto& c : cases) {
      CAPTURE(c.why);
      ManifestOptions o = Everything();
      c.change(o);
      CHECK(RefusedField(o) == c.field);
      CHECK_THROWS_AS(RenderControllerManifests(o), ValidationError);
    }
    // A webhook over http:// without a Secret is the controller's own business (a receiver on
    // loopback or in the cluster).
    ManifestOptions plain = Defaults();
    plain.webhook_url = "http://receiver.monitoring.svc:8080/alerts";
    CHECK(RefusedField(plain).empty());
    // With a Secret, only when the CLI is told to send it anyway.
    plain.webhook_secret = "tfk8s-webhook";
    CHECK(RefusedField(plain) == "webhook_secret");
    plain.extra_args = {"--webhook-allow-insecure-headers"};
    CHECK(RefusedField(plain).empty());
  }

  TEST_CASE("controller manifests: the credentials of a refused URL are not echoed") {
    ManifestOptions o = Defaults();
    o.webhook_url = "https://bot:hunter2@alerts.example.com/hooks/T0KEN";
    try {
      o.Validate();
      FAIL("accepted");
    } catch (const ValidationError& e) {
      CHECK(std::string(e.what()).find("hunter2") == std::string::npos);
      CHECK(std::string(e.what()).find("T0KEN") == std::string::npos);
      CHECK(e.value().find("hunter2") == std::string::npos);
    }
  }
}
