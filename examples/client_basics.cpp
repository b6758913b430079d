// Client basics: connect, apply a small workload with server-side apply, wait for its pods
// with a watch (no polling), read their logs, and delete everything with one cascading delete.
//
//   client_basics [--kubeconfig PATH] [--context NAME] [--namespace NAME]
//
// Without --kubeconfig it uses the usual resolution (KUBECONFIG, ~/.kube/config, in-cluster);
// (tools/quickstart.sh runs examples/quickstart.cpp, the TFCluster version of this.)

#include <tfk8s/client.hpp>

#include <chrono>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>

namespace {

const tfk8s::ResourceType kNamespaces{"", "v1", "Namespace", "namespaces", false};
const tfk8s::ResourceType kPods{"", "v1", "Pod", "pods", true};

tfk8s::Json Deployment(const std::string& ns) {
  using tfk8s::Json;
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata",
           {{"name", "hello"},
            {"namespace", ns},
            {"labels", {{"app.kubernetes.io/managed-by", "tfk8s"}}}}},
          {"spec",
           {{"replicas", 3},
            {"selector", {{"matchLabels", {{"app", "hello"}}}}},
            {"template",
             {{"metadata",
               {{"labels", {{"app", "hello"}}},
                // Read by the local cluster's node simulator: what the "container" prints.
                {"annotations", {{"sim.tfk8s.io/log-lines", "hello from tfk8s\nready to train"}}}}},
              {"spec",
               {{"containers",
                 Json::array({{{"name", "main"},
                               {"image", "tensorflow/tensorflow:2.4.0"},
                               {"resources", {{"requests", {{"cpu", "100m"}, {"memory", "64Mi"}}}}},
                               {"ports", Json::array({{{"containerPort", 2222},
                                                       {"protocol", "TCP"}}})}}})}}}}}}}};
}

}  // namespace

int main(int argc, char** argv) {
  tfk8s::KubeconfigOptions options;
  std::string ns = "tfk8s-quickstart";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--kubeconfig"))
      options.path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--context"))
      options.context = argv[i + 1];
    else if (!std::strcmp(argv[i], "--namespace"))
      ns = argv[i + 1];
    else {
      std::cerr << "usage: client_basics [--kubeconfig PATH] [--context NAME] [--namespace NAME]\n";
      return 2;
    }
  }

  try {
    auto t0 = std::chrono::steady_clock::now();
    tfk8s::Client client = tfk8s::Client::FromDefault(options);
    std::cout << "connected to " << client.config().server << " (Kubernetes "
              << client.ServerVersion()["gitVersion"].get<std::string>() << ")\n";

    // 1. Apply a namespace and a deployment (server-side apply: re-running converges).
    client.Apply({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
    client.Apply(Deployment(ns));
    std::cout << "applied deployment " << ns << "/hello (3 replicas)\n";

    // 2. Wait until the three pods run, driven by watch events.
    tfk8s::ListOptions selector;
    selector.label_selector = "app=hello";
    tfk8s::Informer pods(client, kPods, ns, selector);
    std::map<std::string, tfk8s::Json> running;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (running.size() < 3 && std::chrono::steady_clock::now() < deadline) {
      auto ev = pods.Next(std::chrono::seconds(1));
      if (!ev) continue;
      std::string name = ev->object["metadata"]["name"];
      std::string phase = ev->object.value("status", tfk8s::Json::object()).value("phase", "");
      if (ev->type != tfk8s::WatchEventType::kDeleted && phase == "Running") {
        running[name] = ev->object;
      } else {
        running.erase(name);
      }
    }
    if (running.size() < 3) {
      std::cerr << "pods did not become Running in time\n";
      return 1;
    }
    std::cout << std::left << std::setw(34) << "POD" << std::setw(12) << "PHASE"
              << "NODE\n";
    for (const auto& [name, pod] : running) {
      std::cout << std::setw(34) << name << std::setw(12)
                << pod["status"]["phase"].get<std::string>()
                << pod["spec"]["nodeName"].get<std::string>() << "\n";
    }

    // 3. Logs of the first pod.
    const std::string& first = running.begin()->first;
    std::cout << "logs of " << first << ":\n" << client.ReadLogs(ns, first);

    // 4. One delete removes everything: the namespace cascades to the deployment and its pods.
    tfk8s::DeleteOptions cascade;
    cascade.propagation_policy = "Foreground";
    client.Delete(kNamespaces, "", ns, cascade);
    std::cout << "deleted namespace " << ns << "; done in "
              << std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - t0)
                     .count()
              << " ms\n";
    return 0;
  } catch (const tfk8s::Error& e) {
    std::cerr << "tfk8s: " << tfk8s::ToString(e.kind()) << ": " << e.what() << "\n";
    return 1;
  }
}
