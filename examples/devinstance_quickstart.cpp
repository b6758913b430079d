// A development container for alice: Jupyter Lab, SSH, code-server and TensorBoard, her home
// volume at /root, bob's dataset volume shared read-only, ports exposed through ingress-nginx's
// tcp-services ConfigMap. Creates it, waits for it, prints where to connect (and the password,
// once), restarts it with a new password, then deletes it.
//   devinstance_quickstart [--kubeconfig PATH] [--namespace NS]
#include <tfk8s/devinstance.hpp>

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

    // bob owns a volume and shares it with alice, read-only.
    tfk8s::DevVolumeSpec datasets;
    datasets.owner = "bob";
    datasets.name = "bob-datasets";
    datasets.namespace_name = ns;
    datasets.size = "1Gi";
    try {
      tfk8s::CreateVolume(client, datasets);
    } catch (const tfk8s::AlreadyExists&) {
    }
    tfk8s::ShareVolume(client, ns, "bob-datasets", "bob", "alice", tfk8s::DevShareMode::kReadOnly);

    tfk8s::DevInstanceSpec spec;
    spec.owner = "alice";
    spec.name = "alice-notebook";
    spec.namespace_name = ns;
    spec.image = "tensorflow/tensorflow:2.4.0-jupyter";
    spec.resources = {"2", "8Gi", "", "", 0};  // requests = limits
    spec.env = {{"SPARK_HOME", "/opt/spark"}};
    spec.tools.custom_ports = {{"web", 8000}};
    spec.home.size = "5Gi";
    spec.mounts = {{"bob-datasets", "/data/bob", /*read_only=*/true, ""}};
    spec.placement.cputype = "xeon-gold";
    spec.expose.backend = tfk8s::DevExposure::kIngressTcp;
    spec.expose.configmap_namespace = ns;  // a real cluster: ingress-nginx's namespace
    spec.expose.create_configmap = true;
    spec.expose.external_host = "lab.example.com";

    tfk8s::DevInstance notebook(client, spec);  // validated here; nothing sent yet
    // Grants, quota and placement are checked first; nothing is created if they fail.
    tfk8s::DevStartResult started = notebook.Create();
    auto status = notebook.Wait(
        {.timeout = std::chrono::minutes(3), .on_progress = [](const tfk8s::DevInstanceStatus& s) {
           std::cout << tfk8s::ToString(s.phase) << ": " << s.message << "\n";
         }});
    std::cout << status.Table() << started.access.Table();
    // The password is shown to its user once; tfk8s never logs it (ToString() redacts it).
    std::cout << "password for " << started.access.user << ": " << started.password << "\n";

    tfk8s::DevStartResult restarted = notebook.Restart();  // new password, new pod
    notebook.Wait({.timeout = std::chrono::minutes(3)});
    std::cout << "after restart:\n" << restarted.ToString();

    for (const auto& s : tfk8s::DevInstance::List(client, ns)) {
      std::cout << s.namespace_name << "/" << s.name << " owner=" << s.owner
                << (s.running ? " running" : " stopped") << "\n";
    }

    // Delete releases the external ports; the home volume is kept unless asked (here we ask,
    // to leave the namespace as we found it).
    tfk8s::DevDeleteOptions del;
    del.delete_home_volume = true;
    del.wait = std::chrono::minutes(2);
    notebook.Delete(del);
    client.Delete({"", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true}, ns,
                  "bob-datasets");
    std::cout << "deleted\n";
    return 0;
  } catch (const tfk8s::DevInstanceFailed& e) {
    std::cerr << e.what() << "\n" << e.status().Table();
    return 1;
  } catch (const tfk8s::Error& e) {
    std::cerr << tfk8s::ToString(e.kind()) << ": " << e.what() << "\n";
    return 1;
  }
}
