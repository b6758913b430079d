// The quickstart (tools/quickstart.sh runs it): launch a distributed TensorFlow cluster —
// 2 parameter servers, 2 GPU workers, a chief, TensorBoard and a shared volume — wait for it
// (watch driven, with progress), print its status table and merged logs, then delete it.
//
//   quickstart [--kubeconfig PATH] [--context NAME] [--namespace NAME]
//
// Without --kubeconfig it uses the usual resolution (KUBECONFIG, ~/.kube/config, in-cluster);
// tools/quickstart.sh starts the local cluster when you have none and passes its kubeconfig.
// Against the local cluster the "containers" are simulated: what each replica prints comes from
// the node simulator (the pod annotation below), everything else is the real control plane.

#include <tfk8s/tfcluster.hpp>

#include <chrono>
#include <cstring>
#include <iostream>

int main(int argc, char** argv) {
  tfk8s::KubeconfigOptions options;
  std::string ns = "tfk8s-quickstart";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--kubeconfig")) {
      options.path = argv[i + 1];
    } else if (!std::strcmp(argv[i], "--context")) {
      options.context = argv[i + 1];
    } else if (!std::strcmp(argv[i], "--namespace")) {
      ns = argv[i + 1];
    } else {
      std::cerr << "usage: quickstart [--kubeconfig PATH] [--context NAME] [--namespace NAME]\n";
      return 2;
    }
  }

  try {
    auto t0 = std::chrono::steady_clock::now();
    tfk8s::Client client = tfk8s::Client::FromDefault(options);
    std::cout << "connected to " << client.config().server << " (Kubernetes "
              << client.ServerVersion()["gitVersion"].get<std::string>() << ")\n";
    client.Apply({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});

    tfk8s::TFClusterSpec spec;
    spec.name = "mnist";
    spec.namespace_name = ns;
    spec.ps.replicas = 2;
    spec.ps.resources = {"1", "2Gi", "", "", 0};
    spec.worker.replicas = 2;
    spec.worker.resources = {"2", "4Gi", "", "", 1};  // one GPU each: GPU image, GPU nodes
    spec.worker.script = "python /data/mnist.py --epochs 3";
    spec.worker.pod_annotations = {
        {"sim.tfk8s.io/log-lines", "epoch 1/3 loss=0.41\nepoch 2/3 loss=0.18\nepoch 3/3 loss=0.09"}};
    spec.chief.replicas = 1;
    spec.tensorboard = tfk8s::TFTensorBoardSpec{};
    spec.storage = tfk8s::TFStorageSpec{};
    spec.storage->size = "5Gi";
    spec.storage->access_modes = {"ReadWriteOnce"};
    spec.placement.cputype = "xeon-gold";
    spec.placement.gputype = "v100";

    tfk8s::TFCluster cluster(client, spec);  // validated here; nothing sent yet
    cluster.Apply();                         // quota + placement pre-flight, concurrent apply
    std::cout << "applied TFCluster " << ns << "/mnist; waiting for its replicas\n";
    auto status = cluster.Wait(tfk8s::TFWaitFor::kReady, std::chrono::minutes(3),
                               [](const tfk8s::TFClusterStatus& s) {
                                 std::cout << "  " << s.message << "\n";
                               });
    std::cout << status.Table();

    std::cout << "merged logs:\n";
    cluster.Logs({}, [](const tfk8s::TFLogLine& line) {
      std::cout << "  " << line.Prefixed() << "\n";
      return true;
    });

    tfk8s::TFDeleteOptions del;
    del.wait = std::chrono::minutes(2);
    cluster.Delete(del);
    client.Delete({"", "v1", "Namespace", "namespaces", false}, "", ns);
    std::cout << "deleted; done in "
              << std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - t0)
                     .count()
              << " ms\n";
    return 0;
  } catch (const tfk8s::TFClusterFailed& e) {
    std::cerr << e.what() << "\n" << e.status().Table();
    return 1;
  } catch (const tfk8s::Error& e) {
    std::cerr << "tfk8s: " << tfk8s::ToString(e.kind()) << ": " << e.what() << "\n";
    return 1;
  }
}
