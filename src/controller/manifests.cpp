// The controller's install manifests (controller/manifests.hpp).

#include "controller/manifests.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <string_view>

#include "tfk8s/controller.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/quantity.hpp"
#include "tfk8s/validation.hpp"
#include "workloads/scheduledjob_internal.hpp"

namespace tfk8s::controller {

namespace {

constexpr const char* kRbacApiVersion = "rbac.authorization.k8s.io/v1";
constexpr const char* kRbacGroup = "rbac.authorization.k8s.io";

// One RBAC rule: one resource of one API group, with its verbs (and names, when a rule can
// be narrowed to them).
struct Rule {
  const char* group;
  const char* resource;
  std::vector<const char*> verbs;
  std::vector<const char*> resource_names = {};
};

// The leader election (src/leader_election.cpp): LeaderElector reads the Lease (Get), creates it
// when absent (Create) and renews, takes over or releases it with an update carrying the
// observed resourceVersion (Replace). Nothing else: no list, watch, patch or delete. A rule
// cannot narrow create by name (the name is not known when create is authorized), so this
// lives in a Role in the controller's own namespace only, never in the workload rules.
const std::vector<Rule>& LeaderRules() {
  static const std::vector<Rule> rules = {
      {"coordination.k8s.io", "leases", {"get", "create", "update"}},
      // The leader labels its own Pod tfk8s.io/controller-leader=true and the other replicas'
      // false (Controller::Impl::LabelOwnPod, UnlabelOtherLeaders: a merge patch, after a
      // list by that label), so the metrics Service selects the leader alone. Only pods of
      // the controller's own namespace, which holds nothing but its replicas.
      {"", "pods", {"list", "patch"}},
  };
  return rules;
}

// What the workload loops send, per resource (verbs in the order get, list, watch, create,
// update, patch, delete). Discovery (/api, /apis: Client::ResolvePreferred for CronJobs) needs
// no rule: Kubernetes' system:discovery ClusterRole gives it to every authenticated user.
const std::vector<Rule>& WorkloadRules() {
  static const std::vector<Rule> rules = {
      // TFCluster roots. list, watch: the Fleet's root ConfigMap informer (src/workloads/
      // fleet.cpp, FleetSource::kRootConfigMaps) and ScheduledJobWatcher's `roots` informer
      // (scheduledjob_alerts.cpp, clean_up_tf_clusters). patch: the watcher's clean-up claim
      // on the root (Impl::Claim via ClaimCleanup) and the delivery record (Impl::SendLoop).
      // delete: the "delete-all" clean-up deletes the root, the garbage collector the rest
      // (cleanup.cpp, PlanTFCleanup + DeleteTargets).
      {"", "configmaps", {"list", "watch", "patch", "delete"}},
      // ingress-nginx's tcp-services ConfigMap: a culled DevInstance with ingress-tcp exposure
      // gives its ports back when stopped (CullIdleDevInstances -> DevInstance::Stop ->
      // SyncExposure -> UpdateTcpServices in devinstance_expose.cpp: Get, then Replace). Stop
      // never creates it (may_create is false). Narrowed to the default name
      // (DevExposeSpec::configmap_name).
      {"", "configmaps", {"get", "update"}, {"tcp-services"}},
      // list, watch: the Fleet's Pod informer. get: DevInstance::Activity reads the instance's
      // pod (phase, container start) before probing it (devinstance_idle.cpp).
      {"", "pods", {"get", "list", "watch"}},
      // The idle probe: DevInstance::Activity runs a read-only script in the pod with
      // Client::Exec, a WebSocket upgrade of a GET (src/client/exec.cpp). Servers authorize it
      // as `get` before v1.30 and also as `create` from v1.30 on
      // (AuthorizePodWebsocketUpgradeCreatePermission): both are needed, nothing else.
      {"", "pods/exec", {"get", "create"}},
      // list: the "keep-session" and "keep-logs" clean-ups list the cluster's Services by label
      // (ScheduledJobWatcher::Impl::HandleCluster, TFCleanupKinds). delete: they delete the
      // session / TensorBoard Services (DeleteTargets); a culled DevInstance with NodePort
      // exposure gives its node ports back (DevInstance::SyncExposure deletes the Service).
      {"", "services", {"list", "delete"}},
      // No Secrets at all: get, list or watch would let the controller read every Secret in
      // scope. The "keep-logs" clean-up lists a cluster's Secrets to find its session Secret;
      // refused here, it leaves that Secret to go with the cluster (HandleCluster).
      // DevInstances (and TFCluster replicas). get: DevInstance::Load / GetRoot and Activity's
      // recorded last activity. list, watch: the Fleet's StatefulSet informer;
      // DevInstance::List (ListAll) at the start of each cull pass. patch: the cull records
      // tfk8s.io/last-activity (merge patch) and DevInstance::Stop server-side applies
      // replicas 0 (Client::Apply is a PATCH). Never deleted by a loop.
      {"apps", "statefulsets", {"get", "list", "watch", "patch"}},
      // The "keep-logs" clean-up lists (HandleCluster) and deletes (DeleteTargets) the session /
      // TensorBoard Deployments and their ReplicaSets.
      {"apps", "deployments", {"list", "delete"}},
      {"apps", "replicasets", {"list", "delete"}},
      // Runs and TFCluster replicas. list, watch: the Fleet's Job informer and the watcher's
      // `jobs` and `cluster_jobs` informers (the clean-ups' ListAll too). patch: alert claims
      // and delivery records (HandleJob, SendLoop), history claims (HandleHistory). delete:
      // history bounding (bound_history) and the keep-session / keep-logs clean-ups.
      {"batch", "jobs", {"list", "watch", "patch", "delete"}},
      // Schedules. batch/v1 or batch/v1beta1, whichever the server prefers
      // (ResolvePreferred): RBAC has no versions, one rule covers both. list, watch: the Fleet's
      // and the watcher's CronJob informers. patch: missed-schedule claims and records
      // (HandleCronJob, SendLoop). Never created, updated or deleted by a loop.
      {"batch", "cronjobs", {"list", "watch", "patch"}},
  };
  return rules;
}

// ingress-nginx's tcp-services ConfigMap in its own namespace (the WorkloadRules rule above
// reaches it only where that namespace is watched): with watched namespaces, a culled instance
// with ingress-tcp exposure must still give its ports back.
const std::vector<Rule>& TcpServicesRules() {
  static const std::vector<Rule> rules = {{"", "configmaps", {"get", "update"}, {"tcp-services"}}};
  return rules;
}

Json RulesJson(const std::vector<Rule>& rules) {
  Json out = Json::array();
  for (const auto& r : rules) {
    Json rule = {{"apiGroups", Json::array({r.group})}, {"resources", Json::array({r.resource})}};
    if (!r.resource_names.empty()) rule["resourceNames"] = r.resource_names;
    rule["verbs"] = r.verbs;
    out.push_back(std::move(rule));
  }
  return out;
}

// The labels of every object. Not app.kubernetes.io/managed-by=tfk8s: that label marks the
// workloads tfk8s manages — the Fleet's informers select it (their pods would count as
// workloads) and DeleteQuota(delete_namespace) deletes a Namespace carrying it.
Json CommonLabels() {
  return {{"app.kubernetes.io/name", kControllerName},
          {"app.kubernetes.io/component", "controller"},
          {"app.kubernetes.io/part-of", "tfk8s"}};
}

// What the Deployment selects: never changes (a Deployment's selector is immutable).
Json SelectorLabels() { return {{"app.kubernetes.io/name", kControllerName}}; }

Json Metadata(const std::string& name, const std::string& ns = "") {
  Json m = {{"name", name}};
  if (!ns.empty()) m["namespace"] = ns;
  m["labels"] = CommonLabels();
  return m;
}

Json ServiceAccountSubject(const ManifestOptions& o) {
  return Json::array(
      {{{"kind", "ServiceAccount"}, {"name", kControllerName}, {"namespace", o.namespace_name}}});
}

Json Binding(const char* kind, const char* role_kind, const std::string& name,
             const std::string& ns, const ManifestOptions& o) {
  return {{"apiVersion", kRbacApiVersion},
          {"kind", kind},
          {"metadata", Metadata(name, ns)},
          {"roleRef", {{"apiGroup", kRbacGroup}, {"kind", role_kind}, {"name", name}}},
          {"subjects", ServiceAccountSubject(o)}};
}

Json RoleObject(const char* kind, const std::string& name, const std::string& ns,
                const std::vector<Rule>& rules) {
  return {{"apiVersion", kRbacApiVersion},
          {"kind", kind},
          {"metadata", Metadata(name, ns)},
          {"rules", RulesJson(rules)}};
}

Json Namespace(const ManifestOptions& o) {
  Json labels = CommonLabels();
  // The controller's own pods meet "restricted"; nothing else belongs in this namespace.
  for (const char* mode : {"enforce", "audit", "warn"}) {
    labels[fmt::format("pod-security.kubernetes.io/{}", mode)] = "restricted";
  }
  return {{"apiVersion", "v1"},
          {"kind", "Namespace"},
          {"metadata", {{"name", o.namespace_name}, {"labels", labels}}}};
}

Json PriorityClass(const char* name, int value, const char* preemption, const char* description) {
  return {{"apiVersion", "scheduling.k8s.io/v1"},
          {"kind", "PriorityClass"},
          {"metadata", Metadata(name)},
          {"value", value},
          {"globalDefault", false},
          {"preemptionPolicy", preemption},
          {"description", description}};
}

// Kubernetes expands $(VAR) in args from the container's environment, "$$" being a literal '$':
// a value that must arrive as written is escaped.
std::string LiteralArg(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '$') out += '$';
    out += c;
  }
  return out;
}

std::vector<std::string> SortedWatchNamespaces(const ManifestOptions& o) {
  std::vector<std::string> out = o.watch_namespaces;
  std::sort(out.begin(), out.end());
  return out;
}

Json ControllerArgs(const ManifestOptions& o) {
  // No --identity: the CLI's default is $POD_NAME plus a random suffix, so that a restarted
  // container is a new candidate, never one that believes it still holds the Lease
  // (tools/cli/controller_cmd.cpp, DefaultIdentity).
  Json args = Json::array({"controller", "run", "--lease-namespace=$(POD_NAMESPACE)",
                           fmt::format("--listen=:{}", o.port)});
  if (!o.watch_namespaces.empty()) {
    args.push_back(fmt::format("--watch-namespaces={}", fmt::join(SortedWatchNamespaces(o), ",")));
  }
  if (!o.label_selector.empty()) args.push_back("--selector=" + LiteralArg(o.label_selector));
  if (!o.webhook_url.empty()) args.push_back("--webhook-url=" + LiteralArg(o.webhook_url));
  for (const auto& a : o.extra_args) args.push_back(a);
  return args;
}

Json FieldEnv(const char* name, const char* field_path) {
  return {{"name", name},
          {"valueFrom", {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", field_path}}}}}};
}

Json ControllerContainer(const ManifestOptions& o) {
  Json env = Json::array(
      {FieldEnv("POD_NAME", "metadata.name"), FieldEnv("POD_NAMESPACE", "metadata.namespace")});
  if (!o.webhook_secret.empty()) {
    // From the Secret at start, never a value in the manifests. Not optional: a missing Secret
    // keeps the pod from starting (CreateContainerConfigError) instead of sending unsigned.
    env.push_back({{"name", kWebhookAuthorizationEnv},
                   {"valueFrom",
                    {{"secretKeyRef", {{"name", o.webhook_secret}, {"key", kWebhookSecretKey}}}}}});
  }
  // The endpoint answers one connection at a time and gives a stalled client up to 5 s
  // (http_endpoint.hpp): a probe queued behind one must not count as a failure.
  auto probe = [](const char* path) {
    return Json{{"httpGet", {{"path", path}, {"port", "http"}, {"scheme", "HTTP"}}},
                {"timeoutSeconds", 5}};
  };
  Json liveness = probe("/healthz");
  liveness["initialDelaySeconds"] = 10;
  liveness["periodSeconds"] = 10;
  liveness["failureThreshold"] = 3;
  Json readiness = probe("/readyz");
  readiness["periodSeconds"] = 5;
  readiness["failureThreshold"] = 3;
  Json c = {{"name", "controller"}, {"image", o.image}};
  if (!o.image_pull_policy.empty()) c["imagePullPolicy"] = o.image_pull_policy;
  c["command"] = Json::array({kControllerBinary});
  c["args"] = ControllerArgs(o);
  c["env"] = env;
  // protocol explicit: v1.20 servers refuse a server-side apply of a port without one.
  c["ports"] = Json::array({{{"name", "http"}, {"containerPort", o.port}, {"protocol", "TCP"}}});
  c["livenessProbe"] = liveness;
  c["readinessProbe"] = readiness;
  c["resources"] = {{"requests", {{"cpu", "50m"}, {"memory", o.memory_request}}},
                    {"limits", {{"memory", o.memory_limit}}}};
  c["securityContext"] = {{"allowPrivilegeEscalation", false},
                          {"capabilities", {{"drop", Json::array({"ALL"})}}},
                          {"readOnlyRootFilesystem", true}};
  return c;
}

Json Deployment(const ManifestOptions& o) {
  Json pod_labels = CommonLabels();
  Json pod_spec = {
      {"serviceAccountName", kControllerName},
      // It is an API client: it needs its ServiceAccount's token.
      {"automountServiceAccountToken", true},
      // Pod Security "restricted" (65532: the conventional "nonroot" user of distroless images).
      {"securityContext",
       {{"runAsNonRoot", true},
        {"runAsUser", 65532},
        {"runAsGroup", 65532},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      // The standby on another node: losing a node then costs a lease duration, not a reschedule.
      {"affinity",
       {{"podAntiAffinity",
         {{"preferredDuringSchedulingIgnoredDuringExecution",
           Json::array({{{"weight", 100},
                         {"podAffinityTerm",
                          {{"labelSelector", {{"matchLabels", SelectorLabels()}}},
                           {"topologyKey", "kubernetes.io/hostname"}}}}})}}}}},
      // Enough for a leader to release its Lease on SIGTERM (it stops acting within the renew
      // deadline, 10 s).
      {"terminationGracePeriodSeconds", 30},
      {"containers", Json::array({ControllerContainer(o)})}};
  if (!o.node_selector.empty()) pod_spec["nodeSelector"] = o.node_selector;
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", Metadata(kControllerName, o.namespace_name)},
          {"spec",
           {{"replicas", o.replicas},
            {"selector", {{"matchLabels", SelectorLabels()}}},
            {"template", {{"metadata", {{"labels", pod_labels}}}, {"spec", pod_spec}}}}}};
}

Json MetricsService(const ManifestOptions& o) {
  Json metadata = Metadata(kMetricsServiceName, o.namespace_name);
  // The conventional scrape annotations (Prometheus' kubernetes_sd example relabelling).
  metadata["annotations"] = {{"prometheus.io/scrape", "true"},
                             {"prometheus.io/port", std::to_string(o.port)},
                             {"prometheus.io/path", "/metrics"}};
  Json port = {{"name", "metrics"}, {"port", o.port}, {"targetPort", "http"}, {"protocol", "TCP"}};
  if (o.metrics_node_port) port["nodePort"] = *o.metrics_node_port;
  // Selects the leader alone: it labels its own Pod tfk8s.io/controller-leader=true (and the
  // others false). Workload metrics (phases, requested resources, GPU-hours, alerts, clean-ups,
  // culls) come from the leader only, so a scrape through the Service that reached a standby
  // would see them vanish and come back; a standby's own /metrics stays on its pod's port.
  Json selector = SelectorLabels();
  selector[kControllerLeaderLabel] = "true";
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", metadata},
          {"spec",
           {{"type", o.metrics_node_port ? "NodePort" : "ClusterIP"},
            {"selector", selector},
            {"ports", Json::array({port})}}}};
}

bool HasSpaceOrControl(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u <= 0x20 || u == 0x7f;
  });
}

// The flags the options set: given again in extra_args, which one wins would be the CLI's
// parser's choice.
constexpr std::string_view kOwnFlags[] = {"--lease-namespace", "--listen",   "--watch-namespaces",
                                          "--webhook-url",     "--selector", "-l"};
// The CLI's flag that lets the Authorization header go to an http:// webhook.
constexpr std::string_view kInsecureHeadersFlag = "--webhook-allow-insecure-headers";

void ValidateWebhookOptions(const ManifestOptions& o) {
  const std::string& url = o.webhook_url;
  if (!url.empty()) {
    const std::string shown = internal::RedactedWebhookUrl(url);
    const bool http = url.rfind("http://", 0) == 0;
    if (!http && url.rfind("https://", 0) != 0) {
      throw ValidationError("webhook_url", shown, "must start with http:// or https://");
    }
    if (HasSpaceOrControl(url)) {
      throw ValidationError("webhook_url", shown, "must not contain spaces or control characters");
    }
    if (!internal::UserInfoOf(url).empty()) {
      throw ValidationError("webhook_url", shown,
                            "carries credentials (user:password@), which anyone who can read "
                            "the Deployment would see; put the Authorization header in a "
                            "Secret and name it in webhook_secret");
    }
    const std::size_t host = url.find("://") + 3;
    if (host >= url.size() || url.find_first_of("/?#", host) == host) {
      throw ValidationError("webhook_url", shown, "has no host");
    }
    const bool insecure_allowed = std::find(o.extra_args.begin(), o.extra_args.end(),
                                            kInsecureHeadersFlag) != o.extra_args.end();
    if (http && !o.webhook_secret.empty() && !insecure_allowed) {
      throw ValidationError("webhook_secret", o.webhook_secret,
                            fmt::format("webhook_url {} is http://: the Authorization header "
                                        "would travel in clear text (the controller refuses "
                                        "it too); use https://, or pass {} in extra_args",
                                        shown, kInsecureHeadersFlag));
    }
  }
  if (!o.webhook_secret.empty()) {
    validation::RequireDns1123Subdomain("webhook_secret", o.webhook_secret);
    if (url.empty()) {
      throw ValidationError("webhook_secret", o.webhook_secret,
                            "names the webhook's Authorization header, but webhook_url is empty");
    }
  }
}

}  // namespace

std::vector<Json> RenderManifests(const ManifestOptions& options) {
  options.Validate();
  const ManifestOptions& o = options;
  const std::string& ns = o.namespace_name;
  std::vector<Json> out;
  out.push_back(Namespace(o));
  out.push_back({{"apiVersion", "v1"},
                 {"kind", "ServiceAccount"},
                 {"metadata", Metadata(kControllerName, ns)}});
  out.push_back(RoleObject("Role", kLeaderRoleName, ns, LeaderRules()));
  out.push_back(Binding("RoleBinding", "Role", kLeaderRoleName, ns, o));
  if (o.watch_namespaces.empty()) {
    out.push_back(RoleObject("ClusterRole", kControllerName, "", WorkloadRules()));
    out.push_back(Binding("ClusterRoleBinding", "ClusterRole", kControllerName, "", o));
  } else {
    const std::vector<std::string> watched_namespaces = SortedWatchNamespaces(o);
    for (const auto& watched : watched_namespaces) {
      out.push_back(RoleObject("Role", kControllerName, watched, WorkloadRules()));
      out.push_back(Binding("RoleBinding", "Role", kControllerName, watched, o));
    }
    const std::string tcp_ns = DevExposeSpec{}.configmap_namespace;
    if (std::find(watched_namespaces.begin(), watched_namespaces.end(), tcp_ns) ==
        watched_namespaces.end()) {
      const std::string name = kTcpServicesRolePrefix + ns;
      out.push_back(RoleObject("Role", name, tcp_ns, TcpServicesRules()));
      out.push_back(Binding("RoleBinding", "Role", name, tcp_ns, o));
    }
  }
  if (o.priority_classes) {
    // Scheduled runs may evict dev instances (the seed: scheduled jobs above dev instances).
    out.push_back(PriorityClass(kScheduledPriorityClass, 1000, "PreemptLowerPriority",
                                "tfk8s: scheduled training runs; may preempt dev instances "
                                "(tfk8s-dev) to start on time."));
    // Never: a dev instance is interactive and can wait; evicting someone's training (or another
    // user's instance) to start one would be worse. Its value still orders it ahead of
    // unprioritised pods in the scheduling queue, and below tfk8s-scheduled, which may preempt it.
    out.push_back(PriorityClass(kDevPriorityClass, 100, "Never",
                                "tfk8s: dev instances; queued ahead of pods without a priority, "
                                "never preempt other pods."));
  }
  out.push_back(Deployment(o));
  out.push_back(MetricsService(o));
  return out;
}

}  // namespace tfk8s::controller

namespace tfk8s {

void ControllerManifestOptions::Validate() const {
  using controller::HasSpaceOrControl;
  using controller::kOwnFlags;
  using controller::ValidateWebhookOptions;
  validation::RequireNamespaceName("namespace_name", namespace_name);
  // Its Namespace object enforces Pod Security "restricted": on a system namespace that would
  // refuse the pods that live there.
  for (const char* reserved : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    if (namespace_name == reserved) {
      throw ValidationError("namespace_name", namespace_name,
                            "is a namespace Kubernetes owns; the controller's namespace is "
                            "labelled Pod Security restricted, so give it its own "
                            "(e.g. tfk8s-system)");
    }
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < watch_namespaces.size(); ++i) {
    const std::string field = fmt::format("watch_namespaces[{}]", i);
    validation::RequireNamespaceName(field, watch_namespaces[i]);
    if (!seen.insert(watch_namespaces[i]).second) {
      throw ValidationError(field, watch_namespaces[i], "is listed twice");
    }
  }
  if (std::any_of(label_selector.begin(), label_selector.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    throw ValidationError("label_selector", label_selector, "must not contain control characters");
  }
  if (image.empty()) {
    throw ValidationError("image", "", "is required (the runtime image, which ships the CLI)");
  }
  if (HasSpaceOrControl(image)) {
    throw ValidationError("image", image, "must not contain spaces or control characters");
  }
  if (!image_pull_policy.empty() && image_pull_policy != "Always" &&
      image_pull_policy != "IfNotPresent" && image_pull_policy != "Never") {
    throw ValidationError("image_pull_policy", image_pull_policy,
                          "must be Always, IfNotPresent or Never (or empty: the default)");
  }
  if (replicas < 1) {
    throw ValidationError("replicas", std::to_string(replicas),
                          "must be at least 1 (2 or more: a standby takes over at once)");
  }
  validation::RequirePort("port", port);
  if (port < 1024) {
    throw ValidationError("port", std::to_string(port),
                          "must be at least 1024: the container drops every capability, so it "
                          "cannot bind a privileged port");
  }
  if (metrics_node_port) validation::RequirePort("metrics_node_port", *metrics_node_port);
  validation::RequireQuantity("memory_request", memory_request, true);
  validation::RequireQuantity("memory_limit", memory_limit, true);
  if (Quantity::Parse(memory_request).Compare(Quantity::Parse(memory_limit)) > 0) {
    throw ValidationError("memory_request", memory_request,
                          fmt::format("is more than memory_limit {}", memory_limit));
  }
  for (const auto& [key, value] : node_selector) {
    validation::RequireLabelKey("node_selector", key);
    validation::RequireLabelValue(fmt::format("node_selector[{}]", key), value);
  }
  ValidateWebhookOptions(*this);
  for (std::size_t i = 0; i < extra_args.size(); ++i) {
    const std::string_view arg = extra_args[i];
    for (std::string_view flag : kOwnFlags) {
      if (arg == flag || (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag &&
                          arg[flag.size()] == '=')) {
        throw ValidationError(fmt::format("extra_args[{}]", i), std::string(flag),
                              "is set by the manifest options; set it there");
      }
    }
  }
}

std::vector<Json> RenderControllerManifests(const ControllerManifestOptions& options) {
  return controller::RenderManifests(options);
}
}  // namespace tfk8s
