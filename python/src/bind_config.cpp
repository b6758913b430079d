// Configuration: ClientConfig (plain data; repr redacts secrets), ExecConfig, RetryPolicy,
// RateLimit, and the loaders (kubeconfig, in-cluster, the automatic choice).

#include <map>
#include <string>

#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "tfk8s/config.hpp"
#include "tfk8s/retry.hpp"

namespace tfk8s::python {

namespace {

KubeconfigOptions MakeKubeconfigOptions(std::string path, std::string context,
                                        std::string namespace_override) {
  KubeconfigOptions options;
  options.path = std::move(path);
  options.context = std::move(context);
  options.namespace_override = std::move(namespace_override);
  return options;
}

// A timedelta, or a number of seconds (int or float), as a duration.
template <typename Duration>
Duration ToDuration(const py::handle& value) {
  if (PyLong_Check(value.ptr()) || PyFloat_Check(value.ptr())) {
    double seconds = value.cast<double>();
    if (seconds < 0) throw py::value_error("a duration cannot be negative");
    return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
  }
  return value.cast<Duration>();
}

// A read/write duration field: reads give a timedelta; writes take a timedelta or seconds.
template <typename T, typename Duration>
void DurationField(py::class_<T>& cls, const char* name, Duration T::*field, const char* doc) {
  cls.def_property(
      name, [field](const T& self) { return self.*field; },
      [field](T& self, const py::handle& value) { self.*field = ToDuration<Duration>(value); },
      doc);
}

template <typename T>
void AddCopy(py::class_<T>& cls) {
  cls.def("__copy__", [](const T& self) { return T(self); })
      .def(
          "__deepcopy__", [](const T& self, const py::dict& /*memo*/) { return T(self); },
          py::arg("memo"));
}

}  // namespace

void BindConfig(py::module_& m) {
  // ---- retry and rate limit ---------------------------------------------------------------
  py::class_<RetryPolicy> retry(
      m, "RetryPolicy",
      "When and how long to wait before repeating a request (client-go's rules). Defaults: 11 "
      "attempts; 429/5xx resent, for any verb, only when the server sends Retry-After (waited "
      "exactly, bounded by the call's request_timeout); a lost connection resent only for reads, "
      "after initial_backoff doubling to max_backoff with jitter; writes never sent twice.");
  py::class_<RetryPolicy::Attempt>(retry, "Attempt", "What happened on one attempt.")
      .def(py::init<>())
      .def_readwrite("number", &RetryPolicy::Attempt::number, "1 for the first attempt.")
      .def_readwrite("idempotent", &RetryPolicy::Attempt::idempotent, "GET, list, watch or log.")
      .def_readwrite("http_code", &RetryPolicy::Attempt::http_code,
                     "0 when no response was received.")
      .def_readwrite("request_may_have_been_sent",
                     &RetryPolicy::Attempt::request_may_have_been_sent,
                     "For transport errors: whether the server may have seen the request.")
      .def_readwrite("retry_after_seconds", &RetryPolicy::Attempt::retry_after_seconds,
                     "The server's Retry-After, or None.");
  retry.def(py::init<>())
      .def_readwrite("max_attempts", &RetryPolicy::max_attempts,
                     "Total attempts including the first; 1 disables retries.")
      .def_readwrite("jitter", &RetryPolicy::jitter,
                     "Relative jitter in [0, 1): waits vary by +/- this fraction.")
      .def("decide", &RetryPolicy::Decide, py::arg("attempt"), py::arg("random01"),
           "The wait before the next attempt, or None to give up. `random01` in [0, 1) drives "
           "the jitter.")
      .def("__repr__", [](const RetryPolicy& r) {
        return "RetryPolicy(max_attempts=" + std::to_string(r.max_attempts) +
               ", initial_backoff_ms=" + std::to_string(r.initial_backoff.count()) +
               ", max_backoff_ms=" + std::to_string(r.max_backoff.count()) +
               ", jitter=" + py::repr(py::float_(r.jitter)).cast<std::string>() + ")";
      });
  DurationField(retry, "initial_backoff", &RetryPolicy::initial_backoff,
                "First backoff when the server gave no Retry-After (timedelta; seconds when "
                "set from a number).");
  DurationField(retry, "max_backoff", &RetryPolicy::max_backoff,
                "Upper bound of any single wait (timedelta, or seconds).");
  AddCopy(retry);

  py::class_<RateLimit> rate(m, "RateLimit",
                             "Client-side token bucket (default 50 QPS, burst 100; "
                             "qps <= 0 disables it).");
  rate.def(py::init([](double qps, int burst) {
             return RateLimit{qps, burst};
           }),
           py::arg("qps") = 5.0, py::arg("burst") = 10)
      .def_readwrite("qps", &RateLimit::qps, "Sustained requests per second.")
      .def_readwrite("burst", &RateLimit::burst, "Requests that may go at once.")
      .def("__repr__", [](const RateLimit& r) {
        return "RateLimit(qps=" + py::repr(py::float_(r.qps)).cast<std::string>() +
               ", burst=" + std::to_string(r.burst) + ")";
      });
  AddCopy(rate);

  // ---- exec plugin and client config ------------------------------------------------------
  py::class_<ExecConfig> exec(m, "ExecConfig",
                              "A client.authentication.k8s.io exec credential plugin. Lists are "
                              "copied when read: assign a whole new list to change one.");
  exec.def(py::init<>())
      .def_readwrite("api_version", &ExecConfig::api_version)
      .def_readwrite("command", &ExecConfig::command)
      .def_readwrite("args", &ExecConfig::args)
      .def_readwrite("env", &ExecConfig::env, "(name, value) pairs added to the environment.")
      .def_readwrite("install_hint", &ExecConfig::install_hint)
      .def_readwrite("interactive_mode", &ExecConfig::interactive_mode,
                     "'Never', 'IfAvailable' or 'Always'.")
      .def_readwrite("provide_cluster_info", &ExecConfig::provide_cluster_info)
      .def("__repr__", [](const ExecConfig& e) {
        // Arguments and environment values may hold secrets: only their shape is shown.
        std::string env;
        for (const auto& [name, unused] : e.env) env += (env.empty() ? "" : ", ") + name;
        return "ExecConfig(api_version=" + py::repr(py::str(e.api_version)).cast<std::string>() +
               ", command=" + py::repr(py::str(e.command)).cast<std::string>() + ", args=<" +
               std::to_string(e.args.size()) + " REDACTED>, env=<" + env + ": REDACTED>)";
      });
  AddCopy(exec);

  py::class_<ClientConfig> config(
      m, "ClientConfig",
      "Everything a Client needs to reach and authenticate to one API server: plain data, "
      "usually from load_default_config() / load_kubeconfig(), editable before creating a "
      "Client. repr() and str() show secrets as REDACTED. Nested retry and rate_limit are "
      "edited in place; exec is copied when read.");
  config.def(py::init<>())
      .def_readwrite("server", &ClientConfig::server, "e.g. 'https://127.0.0.1:6443'.")
      .def_readwrite("ca_pem", &ClientConfig::ca_pem, "Trusted CA bundle (PEM).")
      .def_readwrite("ca_file", &ClientConfig::ca_file, "Where ca_pem came from (for messages).")
      .def_readwrite("insecure_skip_tls_verify", &ClientConfig::insecure_skip_tls_verify)
      .def_readwrite("tls_server_name", &ClientConfig::tls_server_name)
      .def_readwrite("proxy_url", &ClientConfig::proxy_url)
      .def_readwrite("disable_compression", &ClientConfig::disable_compression)
      .def_readwrite("token", &ClientConfig::token, "Bearer token (secret).")
      .def_readwrite("token_file", &ClientConfig::token_file,
                     "Bearer token file, re-read periodically and after a 401.")
      .def_readwrite("allow_token_over_http", &ClientConfig::allow_token_over_http,
                     "Send a bearer token or basic-auth credentials to an http:// server in clear "
                     "text (off: refused).")
      .def_readwrite("client_cert_pem", &ClientConfig::client_cert_pem)
      .def_readwrite("client_key_pem", &ClientConfig::client_key_pem, "Client key (secret).")
      .def_readwrite("username", &ClientConfig::username)
      .def_readwrite("password", &ClientConfig::password, "Basic auth password (secret).")
      .def_readwrite("exec", &ClientConfig::exec, "Exec credential plugin, or None.")
      .def_readwrite("default_namespace", &ClientConfig::default_namespace)
      .def_readwrite("context", &ClientConfig::context, "The kubeconfig context used.")
      .def_readwrite("source", &ClientConfig::source, "Where this configuration came from.")
      .def_readwrite("retry", &ClientConfig::retry, "RetryPolicy of every request.")
      .def_readwrite("rate_limit", &ClientConfig::rate_limit, "Client-side RateLimit.")
      .def_readwrite("user_agent", &ClientConfig::user_agent)
      .def_readwrite("max_response_bytes", &ClientConfig::max_response_bytes,
                     "Largest response body read into memory (default 256 MiB).")
      .def_readwrite("max_stream_line_bytes", &ClientConfig::max_stream_line_bytes,
                     "Largest single watch event or log line (default 16 MiB).")
      .def("validate", &ClientConfig::Validate,
           "Checks consistency; raises ConfigError naming the field.")
      .def("to_string", &ClientConfig::ToString, "A readable dump with secrets REDACTED.")
      .def("__str__", &ClientConfig::ToString)
      .def("__repr__", &ClientConfig::ToString);
  DurationField(config, "connect_timeout", &ClientConfig::connect_timeout,
                "TCP connect bound (timedelta; seconds when set from a number).");
  DurationField(config, "request_timeout", &ClientConfig::request_timeout,
                "Per-call bound, retries included, not for streams (timedelta, or seconds).");
  DurationField(config, "tls_handshake_timeout", &ClientConfig::tls_handshake_timeout,
                "TLS handshake bound, after TCP connect (timedelta, or seconds; default 10 s).");
  DurationField(config, "watch_idle_timeout", &ClientConfig::watch_idle_timeout,
                "A watch silent this long ends with a Timeout (default 15 min; 0 disables).");
  DurationField(config, "log_idle_timeout", &ClientConfig::log_idle_timeout,
                "A followed log silent this long ends with a Timeout (default 0: never).");
  DurationField(config, "token_file_refresh", &ClientConfig::token_file_refresh,
                "Re-read period of token_file (timedelta, or seconds).");
  AddCopy(config);

  // ---- loaders ----------------------------------------------------------------------------
  m.def(
      "load_kubeconfig",
      [](std::string path, std::string context, std::string namespace_override) {
        return LoadKubeconfig(MakeKubeconfigOptions(std::move(path), std::move(context),
                                                    std::move(namespace_override)));
      },
      py::arg("path") = "", py::arg("context") = "", py::arg("namespace") = "",
      py::call_guard<py::gil_scoped_release>(),
      "Loads a kubeconfig: `path`, else the KUBECONFIG list (merged), else ~/.kube/config. "
      "`context` defaults to current-context; `namespace` overrides the context's. Raises "
      "ConfigError naming the file and field.");
  m.def(
      "load_kubeconfig_from_string",
      [](const std::string& yaml, const std::string& origin, std::string context,
         std::string namespace_override) {
        return LoadKubeconfigFromString(
            yaml, origin,
            MakeKubeconfigOptions("", std::move(context), std::move(namespace_override)));
      },
      py::arg("yaml"), py::arg("origin") = "<string>", py::arg("context") = "",
      py::arg("namespace") = "", py::call_guard<py::gil_scoped_release>(),
      "Loads a kubeconfig from YAML text; `origin` names it in errors and is the base of relative "
      "paths when it is a file path.");
  m.def(
      "load_in_cluster_config",
      [](std::optional<std::string> service_account_dir,
         std::optional<std::map<std::string, std::string>> env) {
        InClusterOptions options;
        if (service_account_dir) options.service_account_dir = *service_account_dir;
        if (env) {
          options.env_override = *env;
          options.use_env_override = true;
        }
        return LoadInClusterConfig(options);
      },
      py::arg("service_account_dir") = py::none(), py::arg("env") = py::none(),
      py::call_guard<py::gil_scoped_release>(),
      "In-cluster configuration: KUBERNETES_SERVICE_HOST/_PORT (from `env` instead of the "
      "process environment when given) and the service account files (token re-read as it "
      "rotates, CA, namespace).");
  m.def(
      "load_default_config",
      [](std::string path, std::string context, std::string namespace_override) {
        return LoadDefaultConfig(MakeKubeconfigOptions(std::move(path), std::move(context),
                                                       std::move(namespace_override)));
      },
      py::arg("path") = "", py::arg("context") = "", py::arg("namespace") = "",
      py::call_guard<py::gil_scoped_release>(),
      "The automatic choice: a kubeconfig (path, KUBECONFIG, ~/.kube/config), else in-cluster. "
      "Raises ConfigError listing everything that was tried.");
}

}  // namespace tfk8s::python
