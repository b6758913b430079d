// The admin dashboard: every team queue with hard, used and remaining per resource (one list
// call), the node inventory by GPU type, CPU type and pool, and where a GPU worker fits now.
//
//   quota_dashboard [--kubeconfig PATH] [--context NAME] [--gpus N] [--gputype TYPE]

#include <tfk8s/placement.hpp>
#include <tfk8s/quota.hpp>

#include <cstring>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  tfk8s::KubeconfigOptions options;
  int gpus = 4;
  std::string gputype = "v100";
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && !std::strcmp(argv[i], "--kubeconfig"))
      options.path = argv[++i];
    else if (i + 1 < argc && !std::strcmp(argv[i], "--context"))
      options.context = argv[++i];
    else if (i + 1 < argc && !std::strcmp(argv[i], "--gpus"))
      gpus = std::stoi(argv[++i]);
    else if (i + 1 < argc && !std::strcmp(argv[i], "--gputype"))
      gputype = argv[++i];
    else {
      std::cerr << "usage: quota_dashboard [--kubeconfig PATH] [--context NAME] [--gpus N] "
                   "[--gputype TYPE]\n";
      return 2;
    }
  }
  try {
    tfk8s::Client client = tfk8s::Client::FromDefault(options);

    // [queues]
    std::vector<tfk8s::QuotaUsage> queues = tfk8s::ListQueues(client);
    std::cout << tfk8s::FormatUsageTable(queues);
    for (const auto& q : queues) {
      if (auto gpu = q.Find("requests.nvidia.com/gpu"); gpu && gpu->remaining.Sign() <= 0) {
        std::cout << q.ns << " has no GPU left (" << gpu->used.ToString() << " of "
                  << gpu->hard.ToString() << " in use)\n";
      }
    }
    // [queues]
    std::cout << "\n";

    // [inventory]
    tfk8s::Inventory inventory = tfk8s::GetInventory(client);
    std::cout << tfk8s::FormatInventory(inventory);
    for (const auto& group : inventory.by_gputype) {
      if (group.value.empty()) continue;
      auto free = group.free.find("nvidia.com/gpu");
      std::cout << group.value << ": " << (free == group.free.end() ? "0" : free->second.ToString())
                << " GPUs free on " << group.nodes.size() << " node(s)\n";
    }
    // [inventory]

    // [wherefits]
    tfk8s::FitQuery worker;
    worker.requests = {{"nvidia.com/gpu", tfk8s::Quantity::FromInt(gpus)},
                       {"cpu", tfk8s::Quantity::Parse("8")},
                       {"memory", tfk8s::Quantity::Parse("32Gi")}};
    worker.node_selector = {{"nodetype", "tensorflow"}, {"gputype", gputype}};
    std::vector<std::string> nodes = tfk8s::WhereFits(inventory, worker);
    // [wherefits]
    std::cout << "\na " << gpus << "-GPU " << gputype << " worker fits now on: ";
    if (nodes.empty()) std::cout << "(no node)";
    for (const auto& n : nodes) std::cout << n << " ";
    std::cout << "\n";
    return 0;
  } catch (const tfk8s::Error& e) {
    std::cerr << tfk8s::ToString(e.kind()) << ": " << e.what() << "\n";
    return 1;
  }
}
