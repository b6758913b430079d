// The C++ side of the benchmarks (bench/run.py drives it). Each subcommand does one measured
// operation against a cluster and prints one JSON line: {"ms": <wall time>, ...}.
//
//   tfk8s_bench render <spec.json>                       rendered objects as JSON (stdout)
//   tfk8s_bench render-yaml <spec.json>                  the same as YAML for kubectl apply -f
//   tfk8s_bench apply <kubeconfig> <spec.json>           TFCluster::Apply until all accepted
//   tfk8s_bench floor-apply <kubeconfig> <objects.json>  raw parallel SSA PATCHes (no client layer)
//   tfk8s_bench wait-running <kubeconfig> <spec.json>    Apply + Wait(kReady)
//   tfk8s_bench sts-running <kubeconfig> <ns> <name> <replicas> <OrderedReady|Parallel>
//               [<start-delay-seconds>]                  a plain StatefulSet until all Ready; the
//                                                        delay sets sim.tfk8s.io/start-delay
//   tfk8s_bench create-pods <kubeconfig> <ns> <count>    unscheduled pods for the list scenario
//   tfk8s_bench list <kubeconfig> <ns>                   ListAll + decode of every pod
//   tfk8s_bench floor-list <kubeconfig> <ns>             one raw GET + JSON parse
//   tfk8s_bench watch <kubeconfig> <ns> <count> <rounds> informer events/s while objects change
//   tfk8s_bench changes <kubeconfig> <ns> <count>        write objects; print the rv before
//   tfk8s_bench watch-replay <kubeconfig> <ns> <rv> <n>  decode n events replayed from rv
//   tfk8s_bench delete-ns <kubeconfig> <ns>              delete a namespace and wait for it
//   tfk8s_bench fleet-fixture <kubeconfig> <prefix> <namespaces> <devinstances> <tfclusters>
//               [<wait-s>]                               the fleet scenario's workloads: SSA of
//                                                        the rendered objects in parallel, then
//                                                        until every pod is Running
//   tfk8s_bench fleet-cleanup <kubeconfig> <prefix> <namespaces>  delete the fixture's namespaces
//   tfk8s_bench fleet-floor <kubeconfig>                 the Fleet's LISTs, raw + nlohmann parse
//   tfk8s_bench fleet <kubeconfig> <changes>             Fleet: sync, heap, queries, callbacks

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "http/transport.hpp"
#include "tfk8s/client.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/fleet.hpp"
#include "tfk8s/tfcluster.hpp"
#include "tfk8s/yaml.hpp"
#include "workloads/kinds.hpp"
#include "workloads/tfcluster_internal.hpp"

// ---- live heap bytes -------------------------------------------------------------------------
// Every C++ allocation of the process (the library's included) goes through these, so the
// fleet scenario can count what the Fleet holds exactly: the bytes of live operator new blocks
// (malloc_usable_size, so allocator rounding is counted). libcurl's and OpenSSL's malloc()s are
// not C++ allocations and are not counted (the resident set is reported beside it).
namespace {
std::atomic<long long> g_live_heap{0};
}  // namespace

void* operator new(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (!p) throw std::bad_alloc();
  g_live_heap.fetch_add(static_cast<long long>(malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept {
  if (!p) return;
  g_live_heap.fetch_sub(static_cast<long long>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
void operator delete[](void* p, std::size_t) noexcept { operator delete(p); }

using namespace tfk8s;
using Clock = std::chrono::steady_clock;

namespace {

const ResourceType kPods{"", "v1", "Pod", "pods", true};
const ResourceType kNamespaces{"", "v1", "Namespace", "namespaces", false};
const ResourceType kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};
const ResourceType kStatefulSets{"apps", "v1", "StatefulSet", "statefulsets", true};

double Ms(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

Json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

ClientConfig Config(const std::string& kubeconfig) {
  KubeconfigOptions o;
  o.path = kubeconfig;
  ClientConfig c = LoadKubeconfig(o);
  // Benchmarks measure the library, not client-side throttling (kubectl and the official
  // client do not throttle at these volumes either).
  c.rate_limit.qps = 0;
  c.request_timeout = std::chrono::minutes(5);
  return c;
}

// A kB field of /proc/self/status: VmRSS (resident now), VmHWM (peak resident).
long StatusKb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
  }
  return -1;
}

long RssKb() { return StatusKb("VmRSS"); }

void EnsureNamespace(Client& c, const std::string& ns) {
  try {
    c.Create(kNamespaces, "", {{"metadata", {{"name", ns}}}});
  } catch (const AlreadyExists&) {
  }
}

// Pods are refused ("No API token found for service account default") until the service
// account controller has given a new namespace's default account its token: wait for it.
void WaitForDefaultServiceAccount(Client& c, const std::string& ns) {
  const ResourceType accounts{"", "v1", "ServiceAccount", "serviceaccounts", true};
  ListOptions sel;
  sel.field_selector = "metadata.name=default";
  Informer w(c, accounts, ns, sel);
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    for (const auto& sa : w.Snapshot()) {
      if (!sa.value("secrets", Json::array()).empty()) return;
    }
    w.Next(std::chrono::milliseconds(500));
  }
  throw std::runtime_error("the default service account of " + ns + " got no token in 60 s");
}

int Render(const std::string& spec_path) {
  auto objects = RenderTFCluster(TFClusterSpec::FromJson(ReadJson(spec_path)));
  std::cout << Json(objects).dump() << "\n";
  return 0;
}

int RenderYaml(const std::string& spec_path) {
  std::cout << ToYamlDocuments(RenderTFCluster(TFClusterSpec::FromJson(ReadJson(spec_path))));
  return 0;
}

int Apply(const std::string& kubeconfig, const std::string& spec_path) {
  Client c(Config(kubeconfig));
  TFClusterSpec spec = TFClusterSpec::FromJson(ReadJson(spec_path));
  EnsureNamespace(c, spec.namespace_name);
  c.ServerVersion();  // connect (TLS handshake) outside the measurement, as a warm client would
  auto t0 = Clock::now();
  TFCluster cluster(c, spec);
  auto applied = cluster.Apply();
  double ms = Ms(t0);
  std::cout << Json{{"ms", ms}, {"objects", applied.size()}}.dump() << "\n";
  return 0;
}

// The floor: every object's server-side apply PATCH issued at once over one multiplexed
// transport, with no discovery, validation, pre-flight or retry logic. Paths come from a
// fixed kind table.
int FloorApply(const std::string& kubeconfig, const std::string& objects_path) {
  ClientConfig cfg = Config(kubeconfig);
  Json objects = ReadJson(objects_path);
  auto transport = internal::MakeCurlTransport();
  auto tls = std::make_shared<internal::TlsSettings>();
  tls->ca_pem = cfg.ca_pem;
  auto request = [&](const Json& o) {
    std::string kind = o["kind"];
    std::string api = o["apiVersion"];
    static const std::map<std::string, std::string> plural = {
        {"ConfigMap", "configmaps"},
        {"Service", "services"},
        {"Job", "jobs"},
        {"StatefulSet", "statefulsets"},
        {"Deployment", "deployments"},
        {"ReplicaSet", "replicasets"},
        {"PersistentVolumeClaim", "persistentvolumeclaims"}};
    std::string base = api.find('/') == std::string::npos ? "/api/" + api : "/apis/" + api;
    internal::HttpRequest r;
    r.method = "PATCH";
    r.url = cfg.server + base + "/namespaces/" + o["metadata"]["namespace"].get<std::string>() +
            "/" + plural.at(kind) + "/" + o["metadata"]["name"].get<std::string>() +
            "?fieldManager=floor&force=true";
    r.headers = {"Authorization: Bearer " + cfg.token, "Content-Type: application/apply-patch+yaml",
                 "Accept: application/json"};
    r.body = o.dump();
    r.tls = tls;
    r.accept_compressed = !cfg.disable_compression;  // the same bytes as the client asks for
    r.timeout = std::chrono::minutes(2);
    return r;
  };
  {  // warm the connection like the other contenders
    internal::HttpRequest warm;
    warm.url = cfg.server + "/version";
    warm.headers = {"Authorization: Bearer " + cfg.token};
    warm.tls = tls;
    transport->Send(warm).get();
  }
  auto t0 = Clock::now();
  // The root first (the others reference nothing on the server), then the rest at once.
  std::vector<std::future<internal::HttpResponse>> futures;
  for (const auto& o : objects) futures.push_back(transport->Send(request(o)));
  int ok = 0;
  for (auto& f : futures) ok += f.get().status / 100 == 2;
  std::cout << Json{{"ms", Ms(t0)}, {"objects", objects.size()}, {"ok", ok}}.dump() << "\n";
  return ok == static_cast<int>(objects.size()) ? 0 : 1;
}

int WaitRunning(const std::string& kubeconfig, const std::string& spec_path) {
  Client c(Config(kubeconfig));
  TFClusterSpec spec = TFClusterSpec::FromJson(ReadJson(spec_path));
  EnsureNamespace(c, spec.namespace_name);
  // Namespace set-up, not bring-up: without the token, the controllers' first pod creates are
  // refused and retried after a back-off, adding a random second to a run.
  WaitForDefaultServiceAccount(c, spec.namespace_name);
  c.ServerVersion();
  auto t0 = Clock::now();
  TFCluster cluster(c, spec);
  cluster.Apply();
  auto st = cluster.Wait({.until = WaitUntil::kReady, .timeout = std::chrono::minutes(10)});
  std::cout << Json{{"ms", Ms(t0)}, {"replicas", st.replicas.size()}}.dump() << "\n";
  return 0;
}

// A plain StatefulSet (the seed's original design) until every pod is Running and Ready.
// A non-empty `start_delay` (seconds) goes into the pod template as the node simulator's
// sim.tfk8s.io/start-delay annotation: each container then takes that long to start, as with
// a real kubelet.
int StsRunning(const std::string& kubeconfig, const std::string& ns, const std::string& name,
               int replicas, const std::string& policy, const std::string& start_delay = "") {
  if (!start_delay.empty()) {
    double seconds = -1;
    try {
      seconds = std::stod(start_delay);
    } catch (const std::exception&) {
    }
    if (!(seconds >= 0)) {
      throw std::invalid_argument(
          "sts-running: the start delay must be a number of seconds >= 0, got \"" + start_delay +
          "\"");
    }
  }
  Client c(Config(kubeconfig));
  EnsureNamespace(c, ns);
  WaitForDefaultServiceAccount(c, ns);  // as in WaitRunning
  c.ServerVersion();
  Json sts = {
      {"apiVersion", "apps/v1"},
      {"kind", "StatefulSet"},
      {"metadata", {{"name", name}, {"namespace", ns}}},
      {"spec",
       {{"serviceName", name},
        {"replicas", replicas},
        {"podManagementPolicy", policy},
        {"selector", {{"matchLabels", {{"bench", name}}}}},
        {"template",
         {{"metadata", {{"labels", {{"bench", name}}}}},
          {"spec",
           {{"containers", Json::array({{{"name", "tf"},
                                         {"image", "tensorflow/tensorflow:2.4.0"},
                                         {"resources", {{"requests", {{"cpu", "10m"}}}}}}})}}}}}}}};
  if (!start_delay.empty()) {
    sts["spec"]["template"]["metadata"]["annotations"] = {
        {"sim.tfk8s.io/start-delay", start_delay}};
  }
  auto t0 = Clock::now();
  c.Apply(sts);
  ListOptions sel;
  sel.label_selector = "bench=" + name;
  Informer pods(c, kPods, ns, sel);
  std::map<std::string, bool> ready;
  auto deadline = Clock::now() + std::chrono::minutes(10);
  auto count_ready = [&] {
    int n = 0;
    for (const auto& [k, v] : ready) n += v;
    return n;
  };
  while (count_ready() < replicas && Clock::now() < deadline) {
    auto ev = pods.Next(std::chrono::seconds(1));
    if (!ev) continue;
    bool is_ready = false;
    for (const auto& cond :
         ev->object.value("status", Json::object()).value("conditions", Json::array())) {
      if (cond.value("type", "") == "Ready" && cond.value("status", "") == "True") is_ready = true;
    }
    ready[ev->object["metadata"]["name"]] = ev->type != WatchEventType::kDeleted && is_ready;
  }
  std::cout << Json{{"ms", Ms(t0)}, {"ready", count_ready()}}.dump() << "\n";
  return count_ready() == replicas ? 0 : 1;
}

int CreatePods(const std::string& kubeconfig, const std::string& ns, int count) {
  Client c(Config(kubeconfig));
  EnsureNamespace(c, ns);
  std::vector<Json> pods;
  for (int i = 0; i < count; ++i) {
    // A scheduler nobody runs: the pods stay Pending and unbound, so they cost the cluster
    // nothing but storage and can be deleted at once.
    pods.push_back(
        {{"apiVersion", "v1"},
         {"kind", "Pod"},
         {"metadata",
          {{"name", "bench-pod-" + std::to_string(i)},
           {"namespace", ns},
           {"labels",
            {{"app", "bench"}, {"tfk8s.io/cluster", "bench"}, {"index", std::to_string(i)}}},
           {"annotations", {{"description", "a pod of the list benchmark with a typical size"}}}}},
         {"spec",
          {{"schedulerName", "tfk8s-bench-none"},
           {"containers",
            Json::array(
                {{{"name", "tensorflow"},
                  {"image", "tensorflow/tensorflow:2.4.0-gpu"},
                  {"command", Json::array({"python", "/data/train.py"})},
                  {"env", Json::array({{{"name", "TASK_INDEX"}, {"value", std::to_string(i)}},
                                       {{"name", "TASK_NAME"}, {"value", "bench"}}})},
                  {"ports", Json::array({{{"containerPort", 2222}, {"protocol", "TCP"}}})},
                  {"resources", {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}}}});
  }
  WaitForDefaultServiceAccount(c, ns);
  auto t0 = Clock::now();
  int failed = 0;
  for (const auto& r : c.ApplyAll(pods, {}, 64)) {
    if (!r.ok() && failed++ == 0) std::cerr << "create-pods: " << r.error_message() << "\n";
  }
  std::cout << Json{{"ms", Ms(t0)}, {"created", count - failed}}.dump() << "\n";
  return failed == 0 ? 0 : 1;
}

int List(const std::string& kubeconfig, const std::string& ns) {
  Client c(Config(kubeconfig));
  c.ServerVersion();
  auto t0 = Clock::now();
  // One request, like kubectl and the official client (no paging).
  Json list = c.ListAll(kPods, ns, {}, 0);
  // "Decode": touch every pod's typed fields as a caller would.
  std::size_t names = 0;
  for (const auto& p : list["items"])
    names += p["metadata"]["name"].get_ref<const std::string&>().size() > 0;
  std::cout << Json{{"ms", Ms(t0)}, {"items", names}}.dump() << "\n";
  return 0;
}

// A floor's GET: the cluster's credentials and CA, JSON, no client layer.
internal::HttpRequest FloorGet(const ClientConfig& cfg) {
  auto tls = std::make_shared<internal::TlsSettings>();
  tls->ca_pem = cfg.ca_pem;
  internal::HttpRequest r;
  r.headers = {"Authorization: Bearer " + cfg.token, "Accept: application/json"};
  r.tls = tls;
  r.accept_compressed = !cfg.disable_compression;  // the same bytes as the client asks for
  r.timeout = std::chrono::minutes(5);
  return r;
}

int FloorList(const std::string& kubeconfig, const std::string& ns) {
  ClientConfig cfg = Config(kubeconfig);
  auto transport = internal::MakeCurlTransport();
  internal::HttpRequest r = FloorGet(cfg);
  r.url = cfg.server + "/version";
  transport->Send(r).get();
  r.url = cfg.server + "/api/v1/namespaces/" + ns + "/pods";
  auto t0 = Clock::now();
  auto resp = transport->Send(r).get();
  Json list = Json::parse(resp.body);
  std::cout
      << Json{{"ms", Ms(t0)}, {"items", list["items"].size()}, {"bytes", resp.body.size()}}.dump()
      << "\n";
  return 0;
}

int Watch(const std::string& kubeconfig, const std::string& ns, int count, int rounds) {
  Client c(Config(kubeconfig));
  EnsureNamespace(c, ns);
  ListOptions sel;
  sel.label_selector = "bench=watch";
  Informer informer(c, kConfigMaps, ns, sel);
  while (informer.Next(std::chrono::milliseconds(300))) {
  }
  Json rss = Json::array();
  std::vector<double> rates;
  Client writer(Config(kubeconfig));
  for (int round = 0; round < rounds; ++round) {
    std::vector<Json> objects;
    for (int i = 0; i < count; ++i) {
      objects.push_back(
          {{"apiVersion", "v1"},
           {"kind", "ConfigMap"},
           {"metadata",
            {{"name", "w-" + std::to_string(i)},
             {"namespace", ns},
             {"labels", {{"bench", "watch"}}}}},
           {"data", {{"round", std::to_string(round)}, {"payload", std::string(512, 'x')}}}});
    }
    auto apply = std::async(std::launch::async, [&] { writer.ApplyAll(objects, {}, 32); });
    int events = 0;
    Clock::time_point first{}, last{};
    auto deadline = Clock::now() + std::chrono::minutes(3);
    while (events < count && Clock::now() < deadline) {
      auto ev = informer.Next(std::chrono::seconds(1));
      if (!ev) continue;
      if (events == 0) first = Clock::now();
      last = Clock::now();
      ++events;
    }
    apply.get();
    double seconds = std::chrono::duration<double>(last - first).count();
    rates.push_back(seconds > 0 ? (events - 1) / seconds : 0);
    rss.push_back(RssKb());
  }
  std::sort(rates.begin(), rates.end());
  std::cout << Json{{"events_per_s_median", rates[rates.size() / 2]}, {"rss_kb", rss}}.dump()
            << "\n";
  return 0;
}

// Makes `count` changes (one round of ConfigMap writes) and prints the resourceVersion from
// before them, so every contender can replay the very same watch stream.
int Changes(const std::string& kubeconfig, const std::string& ns, int count) {
  Client c(Config(kubeconfig));
  EnsureNamespace(c, ns);
  std::string rv = c.List(kConfigMaps, ns)["metadata"]["resourceVersion"];
  std::vector<Json> objects;
  for (int i = 0; i < count; ++i) {
    objects.push_back({{"apiVersion", "v1"},
                       {"kind", "ConfigMap"},
                       {"metadata",
                        {{"name", "r-" + std::to_string(i)},
                         {"namespace", ns},
                         {"labels", {{"bench", "watch"}}}}},
                       {"data", {{"payload", std::string(512, 'x')}}}});
  }
  int failed = 0;
  for (const auto& r : c.ApplyAll(objects, {}, 32)) failed += !r.ok();
  std::cout << Json{{"rv", rv}, {"changes", count - failed}}.dump() << "\n";
  return failed == 0 ? 0 : 1;
}

int WatchReplay(const std::string& kubeconfig, const std::string& ns, const std::string& rv,
                int count) {
  Client c(Config(kubeconfig));
  c.ServerVersion();
  WatchOptions o;
  o.resource_version = rv;
  o.label_selector = "bench=watch";
  o.allow_bookmarks = false;
  o.timeout_seconds = 120;
  auto t0 = Clock::now();
  WatchStream w = c.Watch(kConfigMaps, ns, o);
  int events = 0;
  while (events < count) {
    auto ev = w.Next(std::chrono::seconds(10));
    if (!ev) break;
    events += !ev->object["metadata"]["name"].get_ref<const std::string&>().empty();
  }
  double ms = Ms(t0);
  std::cout << Json{{"ms", ms}, {"events", events}, {"events_per_s", events / (ms / 1000.0)}}.dump()
            << "\n";
  return events == count ? 0 : 1;
}

int DeleteNamespace(const std::string& kubeconfig, const std::string& ns) {
  Client c(Config(kubeconfig));
  try {
    c.Delete(kNamespaces, "", ns);
  } catch (const NotFound&) {
    return 0;
  }
  ListOptions sel;
  sel.field_selector = "metadata.name=" + ns;
  Informer w(c, kNamespaces, "", sel);
  auto deadline = Clock::now() + std::chrono::minutes(5);
  while (Clock::now() < deadline) {
    auto ev = w.Next(std::chrono::seconds(1));
    if ((ev && ev->type == WatchEventType::kDeleted) || (!ev && w.Snapshot().empty())) return 0;
  }
  std::cerr << "namespace " << ns << " not deleted in time\n";
  return 1;
}

// ---- the fleet scenario --------------------------------------------------------------------

std::string TeamNamespace(const std::string& prefix, int i) {
  return prefix + "-team-" + std::to_string(i);
}

// The owners: 500 users (or fewer), so ByOwner finds a handful of workloads each.
std::string UserOf(int i, int users) { return "user-" + std::to_string(i % users); }

// The fixture: `namespaces` team namespaces, `devinstances` DevInstances and `tfclusters`
// TFClusters (1 ps + 2 workers + chief, per-replica) spread over them round robin, every
// rendered object sent by server-side apply at once (64 in flight), then until every pod is
// Running on the simulated nodes.
int FleetFixture(const std::string& kubeconfig, const std::string& prefix, int namespaces,
                 int devinstances, int tfclusters, int wait_s) {
  Client c(Config(kubeconfig));
  auto t0 = Clock::now();
  std::vector<Json> ns_objects;
  for (int i = 0; i < namespaces; ++i) {
    ns_objects.push_back(
        {{"apiVersion", "v1"},
         {"kind", "Namespace"},
         {"metadata",
          {{"name", TeamNamespace(prefix, i)}, {"labels", {{"tfk8s-bench", prefix}}}}}});
  }
  auto report_failures = [](const std::vector<ApplyResult>& results, const char* what) {
    int failed = 0;
    for (const auto& r : results) {
      if (!r.ok() && failed++ == 0) std::cerr << what << ": " << r.error_message() << "\n";
    }
    return failed;
  };
  if (report_failures(c.ApplyAll(ns_objects, {}, 64), "namespaces") > 0) return 1;
  const int users = std::max(1, std::min(500, devinstances / 4));
  std::vector<Json> objects;
  DevCredentials credentials = DevCredentials::Generate();  // one for all: rendering only
  for (int i = 0; i < devinstances; ++i) {
    DevInstanceSpec s;
    s.owner = UserOf(i, users);
    s.name = "dev-" + std::to_string(i);
    s.namespace_name = TeamNamespace(prefix, i % namespaces);
    s.resources.cpu = "100m";
    s.resources.memory = "256Mi";
    s.home.enabled = false;  // no PVC: the simulated nodes need none, the Fleet reads none
    DevRenderOptions o;
    o.credentials = credentials;
    for (auto& obj : RenderDevInstance(s, o)) objects.push_back(std::move(obj));
  }
  int pods = devinstances;
  for (int i = 0; i < tfclusters; ++i) {
    auto role = [](int replicas) {
      return Json{{"replicas", replicas}, {"resources", {{"cpu", "100m"}, {"memory", "128Mi"}}}};
    };
    Json spec = {{"name", "tf-" + std::to_string(i)},
                 {"namespace", TeamNamespace(prefix, i % namespaces)},
                 {"owner", UserOf(i * 7, users)},
                 {"topology", "per-replica"},
                 {"strategy", "parameter-server"},
                 {"placement", {{"cputype", "xeon-gold"}, {"pool", "shared"}}},
                 {"ps", role(1)},
                 {"worker", role(2)},
                 {"chief", role(1)}};
    for (auto& obj : RenderTFCluster(TFClusterSpec::FromJson(spec))) {
      objects.push_back(std::move(obj));
    }
    pods += 4;
  }
  auto rendered = Ms(t0);
  int failed = report_failures(c.ApplyAll(objects, {}, 64), "fixture");
  double applied_ms = Ms(t0);
  // Until every pod is Running (the controllers create them, the scheduler binds them and the
  // node simulator starts them).
  ListOptions managed;
  managed.label_selector = internal::kinds::kManagedBySelector;
  int running = 0;
  auto deadline = Clock::now() + std::chrono::seconds(wait_s);
  while (Clock::now() < deadline) {
    Json list = c.ListAll(kPods, "", managed);
    running = 0;
    for (const auto& p : list["items"]) {
      bool ours = p["metadata"].value("namespace", "").rfind(prefix + "-team-", 0) == 0;
      running += ours && p.value("status", Json::object()).value("phase", "") == "Running";
    }
    if (running >= pods) break;
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  std::cout << Json{{"ms", Ms(t0)},
                    {"render_ms", rendered},
                    {"applied_ms", applied_ms},
                    {"objects", objects.size()},
                    {"failed", failed},
                    {"pods", pods},
                    {"running", running}}
                   .dump()
            << "\n";
  return failed == 0 && running >= pods ? 0 : 1;
}

// Deletes every namespace of the fixture at once, then waits until they are all gone (the
// namespace controller deletes their objects, the node simulator their pods).
int FleetCleanup(const std::string& kubeconfig, const std::string& prefix, int namespaces) {
  Client c(Config(kubeconfig));
  auto t0 = Clock::now();
  for (int i = 0; i < namespaces; ++i) {
    try {
      c.Delete(kNamespaces, "", TeamNamespace(prefix, i));
    } catch (const NotFound&) {
    }
  }
  ListOptions fixture;
  fixture.label_selector = "tfk8s-bench=" + prefix;
  std::size_t left = 0;
  auto deadline = Clock::now() + std::chrono::minutes(15);
  while (Clock::now() < deadline) {
    left = c.ListAll(kNamespaces, "", fixture)["items"].size();
    if (left == 0) break;
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  std::cout << Json{{"ms", Ms(t0)}, {"left", left}}.dump() << "\n";
  return left == 0 ? 0 : 1;
}

// The LISTs a Fleet over every namespace makes: the kind, and the label selector.
std::vector<std::pair<ResourceType, std::string>> FleetLists(Client& c) {
  const std::string& managed = internal::kinds::kManagedBySelector;
  std::vector<std::pair<ResourceType, std::string>> out = {
      {kConfigMaps, std::string(kComponentLabel) + "=root," + managed},
      {kStatefulSets, managed},
      {internal::kinds::kJobs, managed},
      {kPods, managed}};
  try {
    out.emplace_back(c.ResolvePreferred("batch", "CronJob", {"v1", "v1beta1"}), managed);
  } catch (const NotFound&) {
  }
  return out;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", ch);
      out += buf;
    }
  }
  return out;
}

struct FloorResult {
  double ms = 0;
  std::size_t bytes = 0;
  std::size_t items = 0;
};

// The floor of the Fleet's first sync: the same LISTs (kinds, label selectors, every
// namespace, pages of 500 as Client::ListAll makes them) over the same curl transport, each
// kind's pages one after the other and the kinds at once (as the Fleet's informers list), each
// page parsed with nlohmann::json. No informer, no copies, no indexing.
FloorResult FloorFleetLists(const ClientConfig& cfg,
                            const std::vector<std::pair<ResourceType, std::string>>& lists,
                            std::vector<Json>* keep = nullptr) {
  auto transport = internal::MakeCurlTransport();
  internal::HttpRequest base = FloorGet(cfg);
  base.url = cfg.server + "/version";
  transport->Send(base).get();  // connected, as the client is
  std::atomic<std::size_t> bytes{0}, items{0};
  std::mutex keep_mu;
  auto t0 = Clock::now();
  std::vector<std::future<void>> kinds;
  for (const auto& [type, selector] : lists) {
    kinds.push_back(std::async(std::launch::async, [&, type = type, selector = selector] {
      std::string prefix =
          type.group.empty() ? "/api/" + type.version : "/apis/" + type.group + "/" + type.version;
      std::string cont;
      do {
        internal::HttpRequest r = base;
        r.url = cfg.server + prefix + "/" + type.plural + "?labelSelector=" + Escape(selector) +
                "&limit=500" + (cont.empty() ? "" : "&continue=" + Escape(cont));
        auto resp = transport->Send(r).get();
        if (resp.status != 200) {
          throw std::runtime_error("floor list: HTTP " + std::to_string(resp.status));
        }
        Json page = Json::parse(resp.body);
        bytes += resp.body.size();
        items += page["items"].size();
        cont = page["metadata"].value("continue", "");
        if (keep) {
          std::lock_guard lock(keep_mu);
          keep->push_back(std::move(page));
        }
      } while (!cont.empty());
    }));
  }
  for (auto& f : kinds) f.get();
  return {Ms(t0), bytes, items};
}

int FleetFloor(const std::string& kubeconfig) {
  ClientConfig cfg = Config(kubeconfig);
  Client c(cfg);
  auto lists = FleetLists(c);
  FloorResult r = FloorFleetLists(cfg, lists);
  std::cout << Json{{"ms", r.ms}, {"bytes", r.bytes}, {"items", r.items}}.dump() << "\n";
  return 0;
}

// p50 / p99 / max of samples in microseconds.
Json Percentiles(std::vector<double> us) {
  if (us.empty()) return Json::object();
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<std::size_t>(q * us.size()))];
  };
  return {{"p50_us", at(0.5)}, {"p99_us", at(0.99)}, {"max_us", us.back()}, {"n", us.size()}};
}

// Live heap bytes once they stop moving (the informers' queued list events drained).
long long SettledHeap() {
  long long last = g_live_heap.load();
  for (int i = 0; i < 40; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    long long now = g_live_heap.load();
    if (std::llabs(now - last) < std::max<long long>(64 * 1024, last / 200)) return now;
    last = now;
  }
  return last;
}

// One Fleet over every namespace: the first full sync (construction until WaitForSync), the
// heap it keeps, the latency of its queries, and of `changes` owner-label patches until the
// OnChange callback sees them.
int FleetRun(const std::string& kubeconfig, int changes) {
  ClientConfig cfg = Config(kubeconfig);
  Client c(cfg);
  c.ServerVersion();                                          // connected
  c.ResolvePreferred("batch", "CronJob", {"v1", "v1beta1"});  // discovery cached, as the floor
  long long heap0 = SettledHeap();
  long rss0 = RssKb();
  auto t0 = Clock::now();
  auto fleet = std::make_unique<Fleet>(c);
  if (!fleet->WaitForSync(std::chrono::minutes(10))) throw std::runtime_error("no sync");
  double sync_ms = Ms(t0);
  // The whole process's peak resident set at the sync (bench/run.py scenario 7 sets it beside
  // `tfk8s controller run`'s).
  long hwm_at_sync = StatusKb("VmHWM");
  long long heap1 = SettledHeap();
  long rss1 = RssKb();
  std::vector<FleetEntry> all = fleet->Entries();

  // Queries: each over the full fleet, from many threads' point of view one call at a time.
  auto time_us = [](auto&& fn) {
    auto s = Clock::now();
    fn();
    return std::chrono::duration<double, std::micro>(Clock::now() - s).count();
  };
  std::vector<double> get_us, owner_us, ns_us, entries_us;
  std::size_t sink = 0;
  for (std::size_t i = 0; i < 2000 && !all.empty(); ++i) {
    const FleetEntry& e = all[(i * 7919) % all.size()];
    get_us.push_back(
        time_us([&] { sink += fleet->Get(e.kind, e.namespace_name, e.name).has_value(); }));
    if (i % 4 == 0) {
      owner_us.push_back(time_us([&] { sink += fleet->ByOwner(e.owner).size(); }));
      ns_us.push_back(time_us([&] { sink += fleet->ByNamespace(e.namespace_name).size(); }));
    }
    if (i % 20 == 0) entries_us.push_back(time_us([&] { sink += fleet->Entries().size(); }));
  }

  // Callbacks: merge-patch the owner label of one workload's root object (a DevInstance's
  // StatefulSet or a TFCluster's root ConfigMap, alternately) and wait for the callback that
  // carries the new owner. steady_clock on both sides, in this process.
  std::mutex mu;
  std::condition_variable cv;
  std::string want_owner;
  std::optional<Clock::time_point> seen;
  fleet->OnChange([&](const FleetChange& ch) {
    auto now = Clock::now();
    std::lock_guard lock(mu);
    if (!seen && ch.entry.owner == want_owner) {
      seen = now;
      cv.notify_all();
    }
  });
  std::vector<const FleetEntry*> targets[2];
  for (const auto& e : all) {
    if (e.kind == FleetKind::kDevInstance) targets[0].push_back(&e);
    if (e.kind == FleetKind::kTFCluster) targets[1].push_back(&e);
  }
  std::vector<double> from_answer_us, from_send_us;
  int missed = 0;
  for (int k = 0; k < changes; ++k) {
    auto& pool = targets[k % 2].empty() ? targets[(k + 1) % 2] : targets[k % 2];
    if (pool.empty()) break;
    const FleetEntry& e = *pool[(static_cast<std::size_t>(k) * 131) % pool.size()];
    std::string owner = "moved-" + std::to_string(getpid() % 100000) + "-" + std::to_string(k);
    {
      std::lock_guard lock(mu);
      want_owner = owner;
      seen.reset();
    }
    Json patch = {{"metadata", {{"labels", {{kOwnerLabel, owner}}}}}};
    bool dev = e.kind == FleetKind::kDevInstance;
    auto sent = Clock::now();
    c.Patch(dev ? kStatefulSets : kConfigMaps, e.namespace_name, e.name, PatchType::kMerge, patch);
    auto answered = Clock::now();
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return seen.has_value(); })) {
      ++missed;
      continue;
    }
    // The event may reach the Fleet before the client has read the PATCH's answer: then 0.
    from_answer_us.push_back(
        std::max(0.0, std::chrono::duration<double, std::micro>(*seen - answered).count()));
    from_send_us.push_back(std::chrono::duration<double, std::micro>(*seen - sent).count());
  }
  fleet->Stop();
  // The raw JSON the Fleet listed: the same LISTs once more, counted in bytes; and for
  // reference, the heap of those lists parsed into nlohmann::json once (what one plain copy
  // of every object costs).
  long long heap2 = g_live_heap.load();
  std::vector<Json> parsed;
  FloorResult raw = FloorFleetLists(cfg, FleetLists(c), &parsed);
  long long parsed_heap = g_live_heap.load() - heap2;
  std::cout << Json{{"ms", sync_ms},
                    {"entries", all.size()},
                    {"heap_bytes", heap1 - heap0},
                    {"rss_kb", rss1 - rss0},
                    {"rss_kb_settled", rss1},
                    {"hwm_kb_at_sync", hwm_at_sync},
                    {"raw_json_bytes", raw.bytes},
                    {"parsed_heap_bytes", parsed_heap},
                    {"raw_items", raw.items},
                    {"queries",
                     {{"Get", Percentiles(get_us)},
                      {"ByOwner", Percentiles(owner_us)},
                      {"ByNamespace", Percentiles(ns_us)},
                      {"Entries", Percentiles(entries_us)}}},
                    {"callback_from_answer", Percentiles(from_answer_us)},
                    {"callback_from_send", Percentiles(from_send_us)},
                    {"callback_missed", missed},
                    {"callback_from_answer_us", from_answer_us},
                    {"sink", sink}}
                   .dump()
            << "\n";
  return missed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if (a.size() == 2 && a[0] == "render") return Render(a[1]);
    if (a.size() == 2 && a[0] == "render-yaml") return RenderYaml(a[1]);
    if (a.size() == 3 && a[0] == "apply") return Apply(a[1], a[2]);
    if (a.size() == 3 && a[0] == "floor-apply") return FloorApply(a[1], a[2]);
    if (a.size() == 3 && a[0] == "wait-running") return WaitRunning(a[1], a[2]);
    if ((a.size() == 6 || a.size() == 7) && a[0] == "sts-running") {
      return StsRunning(a[1], a[2], a[3], std::stoi(a[4]), a[5], a.size() == 7 ? a[6] : "");
    }
    if (a.size() == 4 && a[0] == "create-pods") return CreatePods(a[1], a[2], std::stoi(a[3]));
    if (a.size() == 3 && a[0] == "list") return List(a[1], a[2]);
    if (a.size() == 3 && a[0] == "floor-list") return FloorList(a[1], a[2]);
    if (a.size() == 5 && a[0] == "watch")
      return Watch(a[1], a[2], std::stoi(a[3]), std::stoi(a[4]));
    if (a.size() == 4 && a[0] == "changes") return Changes(a[1], a[2], std::stoi(a[3]));
    if (a.size() == 5 && a[0] == "watch-replay")
      return WatchReplay(a[1], a[2], a[3], std::stoi(a[4]));
    if (a.size() == 3 && a[0] == "delete-ns") return DeleteNamespace(a[1], a[2]);
    if ((a.size() == 6 || a.size() == 7) && a[0] == "fleet-fixture") {
      return FleetFixture(a[1], a[2], std::stoi(a[3]), std::stoi(a[4]), std::stoi(a[5]),
                          a.size() == 7 ? std::stoi(a[6]) : 900);
    }
    if (a.size() == 4 && a[0] == "fleet-cleanup") return FleetCleanup(a[1], a[2], std::stoi(a[3]));
    if (a.size() == 2 && a[0] == "fleet-floor") return FleetFloor(a[1]);
    if (a.size() == 3 && a[0] == "fleet") return FleetRun(a[1], std::stoi(a[2]));
  } catch (const std::exception& e) {
    std::cerr << "tfk8s_bench: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: see the comment at the top of bench/tfk8s_bench.cpp\n";
  return 2;
}
