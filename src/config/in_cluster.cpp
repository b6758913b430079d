// In-cluster configuration (client-go's rest.InClusterConfig): the API server address from the
// service environment variables and the service account files mounted into every pod.

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "auth/file_util.hpp"
#include "tfk8s/config.hpp"
#include "tfk8s/error.hpp"

namespace tfk8s {
namespace {

using internal::ReadWholeFile;
using internal::TrimWhitespace;

constexpr const char* kSource = "in-cluster";

std::string Lookup(const InClusterOptions& options, const std::string& name) {
  if (options.use_env_override) {
    const auto it = options.env_override.find(name);
    return it == options.env_override.end() ? std::string() : it->second;
  }
  const char* value = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe): only read
  return value == nullptr ? std::string() : std::string(value);
}

bool IsPort(const std::string& text) {
  if (text.empty() || text.size() > 5) {
    return false;
  }
  for (char c : text) {
    if (c < '0' || c > '9') {
      return false;
    }
  }
  const long port = std::strtol(text.c_str(), nullptr, 10);
  return port >= 1 && port <= 65535;
}

std::string JoinPath(const std::string& dir, const char* name) {
  if (!dir.empty() && dir.back() == '/') {
    return dir + name;
  }
  return fmt::format("{}/{}", dir, name);
}

}  // namespace

ClientConfig LoadInClusterConfig(const InClusterOptions& options) {
  const std::string host = Lookup(options, "KUBERNETES_SERVICE_HOST");
  const std::string port = Lookup(options, "KUBERNETES_SERVICE_PORT");
  if (host.empty()) {
    throw ConfigError(kSource, "KUBERNETES_SERVICE_HOST",
                      "is not set (not running inside a Kubernetes pod?)");
  }
  if (port.empty()) {
    throw ConfigError(kSource, "KUBERNETES_SERVICE_PORT",
                      "is not set (not running inside a Kubernetes pod?)");
  }
  if (!IsPort(port)) {
    throw ConfigError(kSource, "KUBERNETES_SERVICE_PORT",
                      fmt::format("\"{}\" is not a port number", port));
  }

  ClientConfig config;
  // net.JoinHostPort: an IPv6 literal needs brackets in a URL.
  const bool needs_brackets = host.find(':') != std::string::npos && host.front() != '[';
  config.server = needs_brackets ? fmt::format("https://[{}]:{}", host, port)
                                 : fmt::format("https://{}:{}", host, port);

  const std::string& dir = options.service_account_dir;
  const std::string token_file = JoinPath(dir, "token");
  std::string why;
  // Only checked here; the credential provider re-reads it (bound tokens rotate hourly).
  const auto token = ReadWholeFile(token_file, &why);
  if (!token) {
    throw ConfigError(kSource, "token",
                      fmt::format("cannot read the service account token {}: {}", token_file, why));
  }
  if (TrimWhitespace(*token).empty()) {
    throw ConfigError(kSource, "token",
                      fmt::format("the service account token {} is empty", token_file));
  }
  config.token_file = token_file;

  // client-go only logs a missing CA and falls back to the system roots, which then fails with
  // an obscure TLS error against the cluster's private CA; failing here is clearer.
  const std::string ca_file = JoinPath(dir, "ca.crt");
  auto ca = ReadWholeFile(ca_file, &why);
  if (!ca) {
    throw ConfigError(kSource, "ca.crt",
                      fmt::format("cannot read the service account CA {}: {}", ca_file, why));
  }
  config.ca_pem = std::move(*ca);
  config.ca_file = ca_file;

  // The namespace file is optional (it exists in every pod, but not in hand-made test setups).
  if (const auto ns = ReadWholeFile(JoinPath(dir, "namespace"))) {
    const std::string_view trimmed = TrimWhitespace(*ns);
    if (!trimmed.empty()) {
      config.default_namespace = std::string(trimmed);
    }
  }
  config.source = fmt::format("in-cluster (service account {})", dir);
  config.Validate();
  return config;
}

}  // namespace tfk8s
