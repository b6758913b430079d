// `tfk8s controller run` (controller_cmd.hpp).
#include "controller_cmd.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <sstream>

#include "cli_core.hpp"
#include "tfk8s/controller.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/yaml.hpp"

namespace tfk8s::cli {
namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

extern "C" void OnStopSignal(int /*signal*/) { g_stop.store(true); }

std::string Env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): before any thread starts
  return v ? v : "";
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// "host:port", ":port" (every address) or "[v6]:port".
void ParseListen(const std::string& text, ControllerOptions& o) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) {
    throw ValidationError("--listen", text, "expected ADDRESS:PORT or :PORT");
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  o.listen_address = host.empty() ? "0.0.0.0" : host;
  const std::string port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535) {
    throw ValidationError("--listen", text, "the port must be a number 0..65535");
  }
  o.port = std::stoi(port);
}

// POD_NAME (or the host name) and a random suffix: a restarted container is a new candidate,
// never one that believes it still holds the Lease.
std::string DefaultIdentity() {
  std::string base = Env("POD_NAME");
  if (base.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) base = host;
  }
  if (base.empty()) base = "tfk8s-controller";
  std::random_device rd;
  std::ostringstream suffix;
  suffix << std::hex << rd();
  return base + "_" + suffix.str();
}

std::chrono::seconds Seconds(const std::string& text, const std::string& flag) {
  return std::chrono::duration_cast<std::chrono::seconds>(ParseDuration(text, flag));
}

}  // namespace

void AddControllerRunFlags(CLI::App* cmd, ControllerRunFlags& f) {
  cmd->add_option("--watch-namespaces", f.watch_namespaces,
                  "Comma-separated namespaces to act in (default: every namespace)");
  cmd->add_option("--listen", f.listen, "Address of /healthz, /readyz, /metrics (ADDR:PORT)")
      ->capture_default_str();
  cmd->add_option("--lease-namespace", f.lease_namespace,
                  "Namespace of the Lease (default: $POD_NAMESPACE when $POD_NAME is set too, "
                  "else the context's)");
  cmd->add_option("--lease-name", f.lease_name, "The Lease")->capture_default_str();
  cmd->add_option("--identity", f.identity,
                  "This replica among the candidates (default: $POD_NAME or the host name, "
                  "and a random suffix)");
  cmd->add_option("--lease-duration", f.lease_duration, "How long others wait to take over")
      ->capture_default_str();
  cmd->add_option("--renew-deadline", f.renew_deadline,
                  "A leader that cannot renew for this long stops acting")
      ->capture_default_str();
  cmd->add_option("--retry-period", f.retry_period, "Between acquire or renew attempts")
      ->capture_default_str();
  cmd->add_option("--webhook-url", f.webhook_url,
                  "POST alerts here (Authorization header: $TFK8S_WEBHOOK_AUTHORIZATION)");
  cmd->add_option("--webhook-ca-file", f.webhook_ca_file, "Trust this CA (PEM) for the webhook");
  cmd->add_flag("--webhook-allow-insecure-headers", f.webhook_allow_insecure_headers,
                "Send the Authorization header to an http:// webhook");
  cmd->add_flag("--no-alerts", f.no_alerts, "No failure, timeout or missed-schedule alerts");
  cmd->add_flag("--no-cleanup", f.no_cleanup, "Do not carry out TFCluster clean-up policies");
  cmd->add_flag("--no-history", f.no_history, "Do not bound tasks' run history");
  cmd->add_flag("--no-cull", f.no_cull, "No idle culling of DevInstances");
  cmd->add_option("--cull-interval", f.cull_interval, "Between culling passes")
      ->capture_default_str();
  cmd->add_option("--idle-after", f.idle_after,
                  "Cull instances without their own idle policy after this long idle")
      ->capture_default_str();
  cmd->add_flag("--policy-only", f.policy_only, "Cull only instances with their own idle policy");
  cmd->add_option("--missed-schedule-grace", f.missed_schedule_grace,
                  "A scheduled run not started this long after its time is missed")
      ->capture_default_str();
}

void AddControllerManifestFlags(CLI::App* cmd, ControllerManifestFlags& f) {
  cmd->add_option("--image", f.image,
                  "The tfk8s runtime image (it ships /usr/local/bin/tfk8s), e.g. "
                  "tfk8s/runtime:2.15.0")
      ->required();
  cmd->add_option("--image-pull-policy", f.image_pull_policy, "Always, IfNotPresent or Never");
  cmd->add_option("--watch-namespaces", f.watch_namespaces,
                  "Comma-separated namespaces to act in, each with its own Role (default: every "
                  "namespace, a ClusterRole)");
  cmd->add_option("--replicas", f.replicas, "Candidates for the leadership")->capture_default_str();
  cmd->add_option("--port", f.port, "Port of /healthz, /readyz, /metrics")->capture_default_str();
  cmd->add_option("--metrics-node-port", f.metrics_node_port,
                  "Make the metrics Service a NodePort Service on this port");
  cmd->add_flag("--priority-classes", f.priority_classes,
                "Also create the PriorityClasses tfk8s-scheduled (1000) and tfk8s-dev (100)");
  cmd->add_option("--memory-request", f.memory_request, "The container's memory request")
      ->capture_default_str();
  cmd->add_option("--memory-limit", f.memory_limit,
                  "The container's memory limit (the leader holds about twice the Fleet's "
                  "caches: docs/controller.md)")
      ->capture_default_str();
  cmd->add_option("--node-selector", f.node_selector,
                  "key=value: run the controller pods only on nodes with this label (repeatable)");
  cmd->add_option("--webhook-url", f.webhook_url, "Where the controller POSTs alerts");
  cmd->add_option("--webhook-secret", f.webhook_secret,
                  "Secret (in -n) whose key `authorization` is the webhook's Authorization header");
  cmd->add_option("--controller-arg", f.controller_args,
                  "One more argument of `tfk8s controller run` (repeatable), e.g. "
                  "--controller-arg=--cull-interval=1m");
}

void PrintControllerManifests(const ControllerManifestFlags& f, const std::string& ns,
                              const std::string& output, const std::string& selector) {
  ControllerManifestOptions o;
  o.label_selector = selector;
  if (!ns.empty()) o.namespace_name = ns;
  o.watch_namespaces = SplitList(f.watch_namespaces);
  o.image = f.image;
  o.image_pull_policy = f.image_pull_policy;
  o.replicas = f.replicas;
  o.port = f.port;
  if (f.metrics_node_port != 0) o.metrics_node_port = f.metrics_node_port;
  o.priority_classes = f.priority_classes;
  o.memory_request = f.memory_request;
  o.memory_limit = f.memory_limit;
  for (const auto& pair : f.node_selector) {
    const std::size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw ValidationError("--node-selector", pair, "must be key=value");
    }
    const std::string key = pair.substr(0, eq);
    if (!o.node_selector.emplace(key, pair.substr(eq + 1)).second) {
      throw ValidationError("--node-selector", key, "is given twice");
    }
  }
  o.webhook_url = f.webhook_url;
  o.webhook_secret = f.webhook_secret;
  o.extra_args = f.controller_args;
  const std::vector<Json> objects = RenderControllerManifests(o);
  if (output == "json") {
    std::cout << Json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", objects}}.dump(2) << "\n";
  } else {
    std::cout << ToYamlDocuments(objects);
  }
}

int RunController(const ControllerRunFlags& f, const KubeconfigOptions& kubeconfig,
                  const std::string& selector) {
  ControllerOptions o;
  o.namespaces = SplitList(f.watch_namespaces);
  o.label_selector = selector;
  ParseListen(f.listen, o);
  o.election.lease_name = f.lease_name;
  o.election.identity = f.identity.empty() ? DefaultIdentity() : f.identity;
  o.election.lease_duration = ParseDuration(f.lease_duration, "--lease-duration");
  o.election.renew_deadline = ParseDuration(f.renew_deadline, "--renew-deadline");
  o.election.retry_period = ParseDuration(f.retry_period, "--retry-period");
  o.alerts = !f.no_alerts;
  o.cleanup = !f.no_cleanup;
  o.history = !f.no_history;
  o.cull = !f.no_cull;
  o.cull_interval = Seconds(f.cull_interval, "--cull-interval");
  o.idle_after = Seconds(f.idle_after, "--idle-after");
  o.cull_policy_only = f.policy_only;
  o.missed_schedule_grace = Seconds(f.missed_schedule_grace, "--missed-schedule-grace");
  if (!f.webhook_url.empty()) {
    AlertWebhook w;
    w.url = f.webhook_url;
    w.allow_insecure_headers = f.webhook_allow_insecure_headers;
    if (std::string auth = Env("TFK8S_WEBHOOK_AUTHORIZATION"); !auth.empty()) {
      w.headers["Authorization"] = auth;
    }
    if (!f.webhook_ca_file.empty()) {
      std::ifstream in(f.webhook_ca_file, std::ios::binary);
      if (!in) throw ValidationError("--webhook-ca-file", f.webhook_ca_file, "cannot be read");
      w.ca_pem.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    o.webhook = w;
  }
  o.pod_name = Env("POD_NAME");
  o.pod_namespace = Env("POD_NAMESPACE");
  if (o.pod_name.empty() || o.pod_namespace.empty()) o.pod_name = o.pod_namespace = "";

  ClientConfig config = LoadDefaultConfig(kubeconfig);
  o.election.namespace_name = !f.lease_namespace.empty() ? f.lease_namespace
                              : !o.pod_namespace.empty() ? o.pod_namespace
                                                         : config.default_namespace;
  Controller controller(std::move(config), std::move(o), std::cerr);

  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  try {
    controller.Run(g_stop);
  } catch (const std::exception&) {
    return kExitError;  // Run() logged why, as its last JSON line
  }
  return kExitOk;
}

}  // namespace tfk8s::cli
