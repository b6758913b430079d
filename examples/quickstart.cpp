// The quickstart (tools/quickstart.sh runs it): launch a distributed training cluster — 2
// parameter servers, 2 workers and a chief —, wait for it (watch driven, with progress), print
// its status table and merged logs, then delete it.
//
//   quickstart [--kubeconfig PATH] [--context NAME] [--namespace NAME]
//              [--trainer-image IMAGE [--nodetype LABEL] [--pull-policy POLICY]]
//
// With --trainer-image every replica really runs the reference trainer
// (examples/trainer/ps_sgd.py, which the image has at /opt/tfk8s/examples/trainer) through the
// tfk8s launcher, on nodes labelled nodetype=LABEL, and the cluster is waited for until the
// chief has finished: tools/quickstart.sh does this on the local cluster's real node. Without
// it the cluster is the seed's shape (GPU workers, TensorBoard, a shared volume) and is waited
// for until ready; against the local cluster's simulated nodes what each replica prints comes
// from the node simulator (the pod annotation below).
//
// Without --kubeconfig it uses the usual resolution (KUBECONFIG, ~/.kube/config, in-cluster).

#include <tfk8s/tfcluster.hpp>

#include <chrono>
#include <cstring>
#include <iostream>

int main(int argc, char** argv) {
  tfk8s::KubeconfigOptions options;
  std::string ns = "tfk8s-quickstart";
  std::string trainer_image;
  std::string nodetype = "tensorflow";
  std::string pull_policy;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 < argc && !std::strcmp(argv[i], "--kubeconfig")) {
      options.path = argv[i + 1];
    } else if (i + 1 < argc && !std::strcmp(argv[i], "--context")) {
      options.context = argv[i + 1];
    } else if (i + 1 < argc && !std::strcmp(argv[i], "--namespace")) {
      ns = argv[i + 1];
    } else if (i + 1 < argc && !std::strcmp(argv[i], "--trainer-image")) {
      trainer_image = argv[i + 1];
    } else if (i + 1 < argc && !std::strcmp(argv[i], "--nodetype")) {
      nodetype = argv[i + 1];
    } else if (i + 1 < argc && !std::strcmp(argv[i], "--pull-policy")) {
      pull_policy = argv[i + 1];
    } else {
      std::cerr << "usage: quickstart [--kubeconfig PATH] [--context NAME] [--namespace NAME]\n"
                   "                  [--trainer-image IMAGE [--nodetype LABEL] "
                   "[--pull-policy POLICY]]\n";
      return 2;
    }
  }
  const bool real = !trainer_image.empty();

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
    spec.worker.replicas = 2;
    spec.chief.replicas = 1;
    if (real) {
      // Every replica runs the reference trainer: parameter-server SGD over TCP.
      const tfk8s::Resources small{"100m", "256Mi", "", "", 0};
      for (tfk8s::TFRoleSpec* role : {&spec.ps, &spec.worker, &spec.chief}) {
        role->resources = small;
        role->command = {"python3", "/opt/tfk8s/examples/trainer/ps_sgd.py"};
      }
      spec.cpu_image = trainer_image;
      spec.pod.image_pull_policy = pull_policy;
      spec.placement.nodetype = nodetype;
      spec.placement.pool = "";  // any pool: the real node has no pooltype label
    } else {
      spec.ps.resources = {"1", "2Gi", "", "", 0};
      spec.worker.resources = {"2", "4Gi", "", "", 1};  // one GPU each: GPU image, GPU nodes
      spec.worker.script = "python /data/mnist.py --epochs 3";
      spec.worker.pod_annotations = {
          {"sim.tfk8s.io/log-lines",
           "epoch 1/3 loss=0.41\nepoch 2/3 loss=0.18\nepoch 3/3 loss=0.09"}};
      spec.tensorboard = tfk8s::TFTensorBoardSpec{};
      spec.storage = tfk8s::TFStorageSpec{};
      spec.storage->size = "5Gi";
      spec.storage->access_modes = {"ReadWriteOnce"};
      spec.placement.nodetype = nodetype;
      spec.placement.cputype = "xeon-gold";
      spec.placement.gputype = "v100";
    }

    tfk8s::TFCluster cluster(client, spec);  // validated here; nothing sent yet
    cluster.Apply();                         // quota + placement pre-flight, concurrent apply
    std::cout << "applied TFCluster " << ns << "/mnist; waiting for its replicas\n";
    // Real training: until the chief has finished; simulated: until every replica runs.
    auto status =
        cluster.Wait({.until = real ? tfk8s::WaitUntil::kFinished : tfk8s::WaitUntil::kReady,
                      .timeout = std::chrono::minutes(real ? 10 : 3),
                      .on_progress = [](const tfk8s::TFClusterStatus& s) {
                        std::cout << "  " << s.message << "\n";
                      }});
    std::cout << status.Table();

    std::cout << "merged logs:\n";
    cluster.Logs({}, [](const tfk8s::WorkloadLogLine& line) {
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
