// A team's queue from start to finish: create it (namespace + ResourceQuota + LimitRange,
// over-committed 2×), pre-flight a 4-worker GPU job before creating anything, let the server
// judge a pod that does not fit, show the usage, and delete the queue.
//
//   quota_team [--kubeconfig PATH] [--context NAME] [--team NAME] [--keep]

#include <tfk8s/placement.hpp>
#include <tfk8s/quota.hpp>

#include <cstring>
#include <iostream>

namespace {

const tfk8s::ResourceType kPods{"", "v1", "Pod", "pods", true};

// What a workload would render: four GPU workers, each 2 GPUs, 8 cpu, 32Gi.
tfk8s::Json Workers(int replicas) {
  using tfk8s::Json;
  Json pod_spec{{"nodeSelector", {{"nodetype", "tensorflow"}, {"gputype", "v100"}}},
                {"tolerations",
                 {{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}}},
                {"containers",
                 {{{"name", "tensorflow"},
                   {"image", "tensorflow/tensorflow:2.4.0-gpu"},
                   {"resources",
                    {{"requests", {{"cpu", "8"}, {"memory", "32Gi"}}},
                     {"limits", {{"cpu", "8"}, {"memory", "32Gi"}, {"nvidia.com/gpu", 2}}}}}}}}};
  return {{"apiVersion", "apps/v1"},
          {"kind", "StatefulSet"},
          {"metadata", {{"name", "mnist-worker"}}},
          {"spec",
           {{"replicas", replicas},
            {"serviceName", "mnist-worker"},
            {"podManagementPolicy", "Parallel"},
            {"selector", {{"matchLabels", {{"app", "mnist-worker"}}}}},
            {"template",
             {{"metadata", {{"labels", {{"app", "mnist-worker"}}}}}, {"spec", pod_spec}}}}}};
}

}  // namespace

int main(int argc, char** argv) {
  tfk8s::KubeconfigOptions options;
  std::string team = "team-vision";
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--keep"))
      keep = true;
    else if (i + 1 < argc && !std::strcmp(argv[i], "--kubeconfig"))
      options.path = argv[++i];
    else if (i + 1 < argc && !std::strcmp(argv[i], "--context"))
      options.context = argv[++i];
    else if (i + 1 < argc && !std::strcmp(argv[i], "--team"))
      team = argv[++i];
    else {
      std::cerr
          << "usage: quota_team [--kubeconfig PATH] [--context NAME] [--team NAME] [--keep]\n";
      return 2;
    }
  }
  try {
    tfk8s::Client client = tfk8s::Client::FromDefault(options);

    // [queue]
    tfk8s::QuotaSpec spec;
    spec.name = team;
    spec.labels = {{"team", "vision"}};
    spec.annotations = {{"tfk8s.io/owner", "alice"}};
    spec.hard = {{"requests.cpu", "32"},
                 {"requests.memory", "128Gi"},
                 {"requests.nvidia.com/gpu", "4"},
                 {"requests.storage", "500Gi"},
                 {"pods", "20"},
                 {"persistentvolumeclaims", "10"},
                 {"services", "10"}};
    // Pods that state nothing still get admitted: 500m / 1Gi by default.
    spec.limit_range = tfk8s::LimitRangeSpec{{{"cpu", "500m"}, {"memory", "1Gi"}}, {}, {}, {}};
    // limits.cpu / limits.memory (and the default limits) = requests × 2.
    spec = tfk8s::OverCommitted(spec, 2.0);
    tfk8s::QuotaUsage usage = tfk8s::ApplyQuota(client, spec);  // waits until usage is known
    // [queue]
    std::cout << tfk8s::FormatUsageTable({usage}) << "\n";

    // [preflight]
    std::vector<tfk8s::Json> objects{Workers(4)};
    tfk8s::FitResult fit = tfk8s::CheckQuota(client, team, objects);
    fit.Merge(tfk8s::CheckPlacement(client, objects));
    if (!fit.fits) {
      std::cout << "4 workers do not fit:\n" << fit.Message() << "\n";
      for (const auto& s : fit.shortfalls) {
        std::cout << "  short of " << s.resource << " by " << (s.requested - s.remaining).ToString()
                  << "\n";
      }
    }
    objects = {Workers(2)};
    std::cout << "2 workers fit: " << std::boolalpha
              << tfk8s::CheckQuota(client, team, objects).fits << "\n";
    // [preflight]

    // [judge]
    tfk8s::Json pod{{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"metadata", {{"name", "greedy"}}},
                    {"spec",
                     {{"containers",
                       {{{"name", "main"},
                         {"image", "busybox"},
                         {"resources", {{"limits", {{"nvidia.com/gpu", 8}}}}}}}}}}};
    try {
      client.Create(kPods, team, pod);
    } catch (const tfk8s::QuotaExceeded& e) {
      for (const auto& r : e.resources()) std::cout << "the server refused: " << r << "\n";
    }
    // [judge]

    if (!keep) tfk8s::DeleteQuota(client, team, /*delete_namespace=*/true);
    return 0;
  } catch (const tfk8s::Error& e) {
    std::cerr << tfk8s::ToString(e.kind()) << ": " << e.what() << "\n";
    return 1;
  }
}
