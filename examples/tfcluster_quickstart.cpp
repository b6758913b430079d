// Launches a small distributed TensorFlow cluster (2 ps, 2 GPU workers, a chief, TensorBoard,
// a shared volume), waits for it with a progress table, prints its merged logs and deletes it.
//   tfcluster_quickstart [--kubeconfig PATH] [--namespace NS]
#include <tfk8s/tfcluster.hpp>

#include <cstring>
#include <iostream>

int main(int argc, char** argv) {
  tfk8s::KubeconfigOptions options;
  std::string ns = "default";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--kubeconfig")) options.path = argv[i + 1];
    if (!std::strcmp(argv[i], "--namespace")) ns = argv[i + 1];
  }
  try {
    tfk8s::Client client = tfk8s::Client::FromDefault(options);

    tfk8s::TFClusterSpec spec;
    spec.name = "mnist";
    spec.namespace_name = ns;
    spec.ps.replicas = 2;
    spec.ps.resources = {"1", "2Gi", "", "", 0};
    spec.worker.replicas = 2;
    spec.worker.resources = {"2", "8Gi", "", "", 1};  // one GPU each: the GPU image is used
    spec.worker.script = "python /data/mnist.py";
    spec.chief.replicas = 1;
    spec.tensorboard = tfk8s::TFTensorBoardSpec{};
    spec.storage = tfk8s::TFStorageSpec{};
    spec.storage->size = "5Gi";
    spec.storage->access_modes = {"ReadWriteOnce"};
    spec.placement.cputype = "xeon-gold";
    spec.placement.gputype = "v100";

    tfk8s::TFCluster cluster(client, spec);  // validated here; nothing sent yet
    cluster.Apply();                         // pre-flight (quota, nodes), then concurrent apply
    auto status = cluster.Wait({.until = tfk8s::WaitUntil::kReady,
                                .timeout = std::chrono::minutes(3),
                                .on_progress = [](const tfk8s::TFClusterStatus& s) {
                                  std::cout << s.NotReady() << " replicas not ready\n";
                                }});
    std::cout << status.Table();

    cluster.Logs({.tail_lines = 5}, [](const tfk8s::WorkloadLogLine& line) {
      std::cout << line.Prefixed() << "\n";
      return true;
    });

    tfk8s::TFDeleteOptions del;
    del.wait = std::chrono::minutes(2);
    cluster.Delete(del);
    std::cout << "deleted\n";
    return 0;
  } catch (const tfk8s::TFClusterFailed& e) {
    std::cerr << e.what() << "\n" << e.status().Table();
    return 1;
  } catch (const tfk8s::Error& e) {
    std::cerr << tfk8s::ToString(e.kind()) << ": " << e.what() << "\n";
    return 1;
  }
}
