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

#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <future>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "http/transport.hpp"
#include "tfk8s/client.hpp"
#include "tfk8s/tfcluster.hpp"
#include "tfk8s/yaml.hpp"

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

long RssKb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

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
        {"ConfigMap", "configmaps"},   {"Service", "services"},
        {"Job", "jobs"},               {"StatefulSet", "statefulsets"},
        {"Deployment", "deployments"}, {"ReplicaSet", "replicasets"},
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
  auto st = cluster.Wait(TFWaitFor::kReady, std::chrono::minutes(10));
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
  Json sts = {{"apiVersion", "apps/v1"},
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
                                                 {"resources",
                                                  {{"requests", {{"cpu", "10m"}}}}}}})}}}}}}}};
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
    for (const auto& cond : ev->object.value("status", Json::object()).value("conditions", Json::array())) {
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
           {"labels", {{"app", "bench"}, {"tfk8s.io/cluster", "bench"}, {"index", std::to_string(i)}}},
           {"annotations", {{"description", "a pod of the list benchmark with a typical size"}}}}},
         {"spec",
          {{"schedulerName", "tfk8s-bench-none"},
           {"containers",
            Json::array({{{"name", "tensorflow"},
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
  for (const auto& p : list["items"]) names += p["metadata"]["name"].get_ref<const std::string&>().size() > 0;
  std::cout << Json{{"ms", Ms(t0)}, {"items", names}}.dump() << "\n";
  return 0;
}

int FloorList(const std::string& kubeconfig, const std::string& ns) {
  ClientConfig cfg = Config(kubeconfig);
  auto transport = internal::MakeCurlTransport();
  auto tls = std::make_shared<internal::TlsSettings>();
  tls->ca_pem = cfg.ca_pem;
  internal::HttpRequest r;
  r.headers = {"Authorization: Bearer " + cfg.token, "Accept: application/json"};
  r.tls = tls;
  r.accept_compressed = !cfg.disable_compression;  // the same bytes as the client asks for
  r.timeout = std::chrono::minutes(5);
  r.url = cfg.server + "/version";
  transport->Send(r).get();
  r.url = cfg.server + "/api/v1/namespaces/" + ns + "/pods";
  auto t0 = Clock::now();
  auto resp = transport->Send(r).get();
  Json list = Json::parse(resp.body);
  std::cout << Json{{"ms", Ms(t0)}, {"items", list["items"].size()}, {"bytes", resp.body.size()}}.dump()
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
      objects.push_back({{"apiVersion", "v1"},
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
    if (a.size() == 5 && a[0] == "watch") return Watch(a[1], a[2], std::stoi(a[3]), std::stoi(a[4]));
    if (a.size() == 4 && a[0] == "changes") return Changes(a[1], a[2], std::stoi(a[3]));
    if (a.size() == 5 && a[0] == "watch-replay") return WatchReplay(a[1], a[2], a[3], std::stoi(a[4]));
    if (a.size() == 3 && a[0] == "delete-ns") return DeleteNamespace(a[1], a[2]);
  } catch (const std::exception& e) {
    std::cerr << "tfk8s_bench: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: see the comment at the top of bench/tfk8s_bench.cpp\n";
  return 2;
}
