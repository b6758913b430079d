#pragma once
// `tfk8s controller run` and `tfk8s controller manifests` (docs/controller.md): the flags and
// what they run. main.cpp adds the subcommands; the controller itself is the library's
// (tfk8s/controller.hpp).

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "tfk8s/config.hpp"

namespace tfk8s::cli {

/// The flags of `tfk8s controller run`, as given (parsed and checked by RunController).
struct ControllerRunFlags {
  std::string watch_namespaces;  ///< "a,b"; "" = every namespace.
  std::string listen = ":8080";
  std::string lease_namespace;
  std::string lease_name = "tfk8s-controller";
  std::string identity;
  std::string lease_duration = "15s";
  std::string renew_deadline = "10s";
  std::string retry_period = "2s";
  std::string webhook_url;
  std::string webhook_ca_file;
  bool webhook_allow_insecure_headers = false;
  bool no_alerts = false;
  bool no_cleanup = false;
  bool no_history = false;
  bool no_cull = false;
  std::string cull_interval = "5m";
  std::string idle_after = "2h";
  bool policy_only = false;
  std::string missed_schedule_grace = "60s";
};

/// The flags of `tfk8s controller manifests` (the controller's namespace is the global -n).
struct ControllerManifestFlags {
  std::string watch_namespaces;
  std::string image;
  std::string image_pull_policy;
  int replicas = 2;
  int port = 8080;
  int metrics_node_port = 0;
  bool priority_classes = false;
  std::vector<std::string> node_selector;
  std::string memory_request = "128Mi";
  std::string memory_limit = "1Gi";
  std::string webhook_url;
  std::string webhook_secret;
  std::vector<std::string> controller_args;
};

/// Adds the flags of `controller manifests` to `cmd`.
void AddControllerManifestFlags(CLI::App* cmd, ControllerManifestFlags& flags);

/// The manifests (YAML documents, or a JSON List with `json`) on stdout; ValidationError for
/// bad flags, before anything is printed.
/// `selector`: the global -l, passed on to `controller run` in the Deployment.
void PrintControllerManifests(const ControllerManifestFlags& flags, const std::string& ns,
                              const std::string& output, const std::string& selector);

/// Adds the flags of `controller run` to `cmd`.
void AddControllerRunFlags(CLI::App* cmd, ControllerRunFlags& flags);

/// Runs the controller until SIGTERM or SIGINT; the exit code. Logs are JSON lines on stderr.
/// Bad flags are a ValidationError (thrown before anything is sent).
/// `selector`: the global -l (only workloads with those labels; "" = all).
int RunController(const ControllerRunFlags& flags, const KubeconfigOptions& kubeconfig,
                  const std::string& selector);

}  // namespace tfk8s::cli
