// Harness: kubeconfig loading from text (LoadKubeconfigFromString, src/config/*) on arbitrary
// bytes, for the default context and, when the first line names one, for that context.
// Properties: only tfk8s errors (ConfigError, ValidationError, …) escape; a config that loads
// has a server URL; loading is deterministic (a second load gives the same server and
// namespace).

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "tfk8s/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tfk8s::fuzz;
  std::string text(reinterpret_cast<const char*>(data), size);
  // "fuzz" is not an existing file: relative paths resolve against the working directory.
  tfk8s::ClientConfig config;
  if (Guarded("LoadKubeconfigFromString",
              [&] { config = tfk8s::LoadKubeconfigFromString(text, "fuzz-kubeconfig"); })) {
    Check(!config.server.empty(), "a loaded config has no server", text);
    tfk8s::ClientConfig again;
    Check(Guarded("LoadKubeconfigFromString (again)",
                  [&] { again = tfk8s::LoadKubeconfigFromString(text, "fuzz-kubeconfig"); }),
          "second load threw", text);
    Check(again.server == config.server && again.default_namespace == config.default_namespace,
          "loading is not deterministic", text);
  }
  // A context named by the first line ("# <name>") exercises context selection and overrides.
  if (text.rfind("# ", 0) == 0) {
    tfk8s::KubeconfigOptions options;
    options.context = text.substr(
        2, text.find('\n') == std::string::npos ? std::string::npos : text.find('\n') - 2);
    options.namespace_override = "fuzz-ns";
    Guarded("LoadKubeconfigFromString(context)", [&] {
      auto c = tfk8s::LoadKubeconfigFromString(text, "fuzz-kubeconfig", options);
      Check(c.default_namespace == "fuzz-ns", "namespace override ignored", text);
    });
  }
  return 0;
}
