#pragma once
// Shared helpers of the integration tests: they run against the local cluster that the CTest
// fixture brings up (tools/tfk8s-local), found through TFK8S_TEST_KUBECONFIG.

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "tfk8s/client.hpp"

namespace tfk8s::itest {

inline std::string Env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) {
    throw std::runtime_error(std::string(name) +
                             " is not set: run the integration tests through ctest (which brings "
                             "up the local cluster) or export it");
  }
  return v;
}

inline std::string Kubeconfig() { return Env("TFK8S_TEST_KUBECONFIG"); }
inline std::string ClusterDir() { return Env("TFK8S_TEST_CLUSTER_DIR"); }

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A config for one of the local cluster's contexts, with test-friendly limits.
inline ClientConfig ConfigFor(const std::string& context = "tfk8s-local") {
  KubeconfigOptions o;
  o.path = Kubeconfig();
  o.context = context;
  ClientConfig c = LoadKubeconfig(o);
  c.rate_limit.qps = 200;
  c.rate_limit.burst = 400;
  return c;
}

inline Client AdminClient() { return Client(ConfigFor()); }

inline std::string UniqueName(const std::string& prefix) {
  static std::atomic<int> counter{0};
  static const auto seed = std::random_device{}() % 100000;
  return prefix + "-" + std::to_string(seed) + "-" + std::to_string(counter++);
}

inline const ResourceType kNamespaces{"", "v1", "Namespace", "namespaces", false};
inline const ResourceType kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};
inline const ResourceType kPods{"", "v1", "Pod", "pods", true};
inline const ResourceType kDeployments{"apps", "v1", "Deployment", "deployments", true};

/// A namespace created for one test and deleted afterwards.
class TestNamespace {
 public:
  explicit TestNamespace(Client client, const std::string& prefix = "it")
      : client_(std::move(client)), name_(UniqueName(prefix)) {
    client_.Create(kNamespaces, "", {{"metadata", {{"name", name_}}}});
    // The ServiceAccount admission plugin refuses pods until the default account exists and
    // has its token secret.
    WaitFor(
        [&] {
          try {
            auto sa = client_.Get({"", "v1", "ServiceAccount", "serviceaccounts", true}, name_,
                                  "default");
            return sa.contains("secrets") && !sa["secrets"].empty();
          } catch (const NotFound&) {
            return false;
          }
        },
        std::chrono::seconds(30));
  }
  ~TestNamespace() {
    try {
      client_.Delete(kNamespaces, "", name_);
    } catch (...) {
    }
  }
  const std::string& name() const { return name_; }

  static bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (condition()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return condition();
  }

 private:
  Client client_;
  std::string name_;
};

inline Json ConfigMap(const std::string& name, const Json& data = Json::object(),
                      const Json& labels = Json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"data", data}};
}

}  // namespace tfk8s::itest
