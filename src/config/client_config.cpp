// ClientConfig consistency checks and its redacted printable form.

#include <string>
#include <string_view>

#include <fmt/format.h>

#include "tfk8s/config.hpp"
#include "tfk8s/error.hpp"

namespace tfk8s {
namespace {

constexpr std::string_view kRedacted = "REDACTED";

/// A URL with any `user:password@` part replaced, so proxy or server credentials never print.
std::string RedactUrl(std::string_view url) {
  const auto scheme_end = url.find("://");
  const std::size_t authority_start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const auto authority_end = url.find_first_of("/?#", authority_start);
  const std::string_view authority = url.substr(
      authority_start, authority_end == std::string_view::npos ? std::string_view::npos
                                                               : authority_end - authority_start);
  const auto at = authority.rfind('@');
  if (at == std::string_view::npos) {
    return std::string(url);
  }
  return fmt::format("{}{}@{}", url.substr(0, authority_start), kRedacted,
                     url.substr(authority_start + at + 1));
}

std::string_view Secret(const std::string& value) {
  return value.empty() ? std::string_view("<none>") : kRedacted;
}

std::string OrNone(const std::string& value) { return value.empty() ? "<none>" : value; }

std::string_view AfterScheme(std::string_view server) {
  for (std::string_view scheme : {"https://", "http://"}) {
    if (server.substr(0, scheme.size()) == scheme) {
      return server.substr(scheme.size());
    }
  }
  return {};
}

}  // namespace

void ClientConfig::Validate() const {
  const std::string where = source.empty() ? std::string("ClientConfig") : source;
  if (server.empty()) {
    throw ConfigError(where, "server", "is empty");
  }
  const std::string_view rest = AfterScheme(server);
  if (rest.empty() || rest.front() == '/' || rest.front() == '?' || rest.front() == '#') {
    throw ConfigError(
        where, "server",
        fmt::format("\"{}\" must be an https:// or http:// URL with a host", RedactUrl(server)));
  }
  const bool has_token = !token.empty() || !token_file.empty() || exec.has_value();
  if (server.rfind("http://", 0) == 0 && has_token && !allow_token_over_http) {
    throw ConfigError(where, "server",
                      fmt::format("\"{}\" is http://: the bearer token would travel in clear text; "
                                  "use https://, or set allow_token_over_http to send it anyway",
                                  RedactUrl(server)));
  }
  // Basic auth is no less a credential than a token: the same rule and the same opt-in. User
  // info in the URL (RedactUrl changes it) is basic auth too.
  const bool has_basic_auth = !username.empty() || !password.empty() || RedactUrl(server) != server;
  if (server.rfind("http://", 0) == 0 && has_basic_auth && !allow_token_over_http) {
    throw ConfigError(where, "server",
                      fmt::format("\"{}\" is http://: the basic-auth password would travel in "
                                  "clear text; use https://, or set allow_token_over_http to "
                                  "send it anyway",
                                  RedactUrl(server)));
  }
  if (insecure_skip_tls_verify && (!ca_pem.empty() || !ca_file.empty())) {
    throw ConfigError(where, "insecure_skip_tls_verify",
                      "cannot be combined with a certificate authority (ca_pem/ca_file)");
  }
  if (!client_cert_pem.empty() && client_key_pem.empty()) {
    throw ConfigError(where, "client_key_pem", "a client certificate needs its private key");
  }
  if (client_cert_pem.empty() && !client_key_pem.empty()) {
    throw ConfigError(where, "client_cert_pem", "a client private key needs its certificate");
  }
  if ((!username.empty() || !password.empty()) && (!token.empty() || !token_file.empty())) {
    throw ConfigError(where, "username",
                      "basic auth (username/password) cannot be combined with a token");
  }
  if (exec) {
    if (exec->command.empty()) {
      throw ConfigError(where, "exec.command", "is empty");
    }
    if (exec->api_version != "client.authentication.k8s.io/v1" &&
        exec->api_version != "client.authentication.k8s.io/v1beta1") {
      throw ConfigError(where, "exec.api_version",
                        fmt::format("\"{}\" is not supported (use client.authentication.k8s.io/v1 "
                                    "or /v1beta1)",
                                    exec->api_version));
    }
    if (exec->interactive_mode != "Never" && exec->interactive_mode != "IfAvailable" &&
        exec->interactive_mode != "Always") {
      throw ConfigError(
          where, "exec.interactive_mode",
          fmt::format("\"{}\" is not one of Never, IfAvailable, Always", exec->interactive_mode));
    }
    for (const auto& [name, unused] : exec->env) {
      if (name.empty() || name.find('=') != std::string::npos) {
        throw ConfigError(where, "exec.env", "variable names must be non-empty and without '='");
      }
    }
  }
  if (connect_timeout.count() < 0) {
    throw ConfigError(where, "connect_timeout", "is negative");
  }
  if (request_timeout.count() < 0) {
    throw ConfigError(where, "request_timeout", "is negative");
  }
  if (token_file_refresh.count() < 0) {
    throw ConfigError(where, "token_file_refresh", "is negative");
  }
}

std::string ClientConfig::ToString() const {
  std::string ca;
  if (ca_pem.empty() && ca_file.empty()) {
    ca = "<system roots>";
  } else if (ca_file.empty()) {
    ca = fmt::format("<data, {} bytes>", ca_pem.size());
  } else {
    ca = fmt::format("{} ({} bytes)", ca_file, ca_pem.size());
  }
  // A certificate is public, but its size is all anyone debugging needs.
  const std::string cert =
      client_cert_pem.empty() ? "<none>" : fmt::format("<{} bytes>", client_cert_pem.size());

  std::string out = "ClientConfig{\n";
  out += fmt::format("  source: {}\n", OrNone(source));
  out += fmt::format("  context: {}\n", OrNone(context));
  out += fmt::format("  server: {}\n", OrNone(RedactUrl(server)));
  out += fmt::format("  namespace: {}\n", default_namespace);
  out += fmt::format("  certificate-authority: {}\n", ca);
  out += fmt::format("  insecure-skip-tls-verify: {}\n", insecure_skip_tls_verify);
  out += fmt::format("  tls-server-name: {}\n", OrNone(tls_server_name));
  out += fmt::format("  proxy-url: {}\n", OrNone(RedactUrl(proxy_url)));
  out += fmt::format("  disable-compression: {}\n", disable_compression);
  out += fmt::format("  token: {}\n", Secret(token));
  out += fmt::format("  token-file: {}\n", OrNone(token_file));
  out += fmt::format("  client-certificate: {}\n", cert);
  out += fmt::format("  client-key: {}\n", Secret(client_key_pem));
  out += fmt::format("  username: {}\n", OrNone(username));
  out += fmt::format("  password: {}\n", Secret(password));
  if (exec) {
    // Arguments are redacted too (client-go does the same): plugins are often given secrets
    // such as `--token=…` on the command line.
    std::string env;
    for (const auto& [name, unused] : exec->env) {
      env += fmt::format("{}{}={}", env.empty() ? "" : ", ", name, kRedacted);
    }
    out += fmt::format(
        "  exec: {{apiVersion: {}, command: {}, args: {}, env: [{}], interactiveMode: {}, "
        "provideClusterInfo: {}}}\n",
        exec->api_version, exec->command,
        exec->args.empty() ? std::string("[]")
                           : fmt::format("[{} x {}]", kRedacted, exec->args.size()),
        env, exec->interactive_mode, exec->provide_cluster_info);
  } else {
    out += "  exec: <none>\n";
  }
  out += fmt::format("  connect-timeout: {}ms\n", connect_timeout.count());
  out += fmt::format("  request-timeout: {}ms\n", request_timeout.count());
  out += fmt::format("  token-file-refresh: {}s\n", token_file_refresh.count());
  out +=
      fmt::format("  retry: max-attempts {}, backoff {}ms..{}ms, jitter {}\n", retry.max_attempts,
                  retry.initial_backoff.count(), retry.max_backoff.count(), retry.jitter);
  out += fmt::format("  rate-limit: {} qps, burst {}\n", rate_limit.qps, rate_limit.burst);
  out += fmt::format("  user-agent: {}\n", user_agent);
  out += "}";
  return out;
}

}  // namespace tfk8s
