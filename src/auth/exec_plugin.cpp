#include "auth/exec_plugin.hpp"

#include <unistd.h>

#include <set>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "auth/subprocess.hpp"
#include "tfk8s/error.hpp"
#include "util/base64.hpp"
#include "util/json_parse.hpp"

extern char** environ;  // NOLINT: POSIX, not declared by any header in C++ mode.

namespace tfk8s::internal {
namespace {

using Json = nlohmann::json;
using SystemClock = std::chrono::system_clock;

constexpr const char* kExecInfoVariable = "KUBERNETES_EXEC_INFO";

std::string SourceOf(const ExecConfig& exec) { return fmt::format("exec plugin {}", exec.command); }

[[noreturn]] void Fail(const ExecConfig& exec, std::string field, std::string why) {
  throw ConfigError(SourceOf(exec), std::move(field), std::move(why));
}

/// A string member of `object`, "" when absent or null; any other type is an error naming it.
std::string StringMember(const Json& object, const char* key, const ExecConfig& exec,
                         const char* field) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    return {};
  }
  if (!it->is_string()) {
    Fail(exec, field, "must be a string");
  }
  return it->get<std::string>();
}

/// Our environment, minus the names the plugin config overrides, plus those and the exec info.
std::vector<std::string> PluginEnvironment(const ExecConfig& exec, const std::string& exec_info) {
  std::set<std::string> overridden{kExecInfoVariable};
  for (const auto& [name, unused] : exec.env) {
    overridden.insert(name);
  }
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string name(text.substr(0, text.find('=')));
    if (overridden.count(name) == 0) {
      env.emplace_back(text);
    }
  }
  for (const auto& [name, value] : exec.env) {
    env.push_back(fmt::format("{}={}", name, value));
  }
  env.push_back(fmt::format("{}={}", kExecInfoVariable, exec_info));
  return env;
}

bool ParseDigits(std::string_view text, std::size_t pos, std::size_t count, int* out) {
  if (pos + count > text.size()) {
    return false;
  }
  int value = 0;
  for (std::size_t i = pos; i < pos + count; ++i) {
    if (text[i] < '0' || text[i] > '9') {
      return false;
    }
    value = value * 10 + (text[i] - '0');
  }
  *out = value;
  return true;
}

}  // namespace

std::optional<SystemClock::time_point> ParseRfc3339(std::string_view text) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!ParseDigits(text, 0, 4, &year) || text.size() < 20 || text[4] != '-' ||
      !ParseDigits(text, 5, 2, &month) || text[7] != '-' || !ParseDigits(text, 8, 2, &day) ||
      (text[10] != 'T' && text[10] != 't') || !ParseDigits(text, 11, 2, &hour) || text[13] != ':' ||
      !ParseDigits(text, 14, 2, &minute) || text[16] != ':' || !ParseDigits(text, 17, 2, &second)) {
    return std::nullopt;
  }
  const std::chrono::year_month_day date{std::chrono::year(year),
                                         std::chrono::month(static_cast<unsigned>(month)),
                                         std::chrono::day(static_cast<unsigned>(day))};
  if (!date.ok() || hour > 23 || minute > 59 || second > 59) {
    return std::nullopt;
  }
  std::size_t pos = 19;
  std::chrono::nanoseconds fraction{0};
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    long long nanos = 0;
    int digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (digits < 9) {
        nanos = nanos * 10 + (text[pos] - '0');
        ++digits;
      }
      ++pos;
    }
    if (digits == 0) {
      return std::nullopt;
    }
    for (int i = digits; i < 9; ++i) {
      nanos *= 10;
    }
    fraction = std::chrono::nanoseconds(nanos);
  }
  if (pos >= text.size()) {
    return std::nullopt;
  }
  int offset_minutes = 0;
  if (text[pos] == 'Z' || text[pos] == 'z') {
    ++pos;
  } else if (text[pos] == '+' || text[pos] == '-') {
    int offset_hours = 0, offset_mins = 0;
    if (!ParseDigits(text, pos + 1, 2, &offset_hours) || pos + 3 >= text.size() ||
        text[pos + 3] != ':' || !ParseDigits(text, pos + 4, 2, &offset_mins) || offset_hours > 23 ||
        offset_mins > 59) {
      return std::nullopt;
    }
    offset_minutes = (offset_hours * 60 + offset_mins) * (text[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != text.size()) {
    return std::nullopt;
  }
  // In whole seconds first: RFC 3339's years 0000-9999 fit, system_clock's nanoseconds hold
  // only about 1678-2261, and converting a time outside that would overflow (UB).
  const std::chrono::seconds whole = std::chrono::sys_days(date).time_since_epoch() +
                                     std::chrono::hours(hour) + std::chrono::minutes(minute) +
                                     std::chrono::seconds(second) -
                                     std::chrono::minutes(offset_minutes);
  constexpr auto kLimit =
      std::chrono::duration_cast<std::chrono::seconds>(SystemClock::duration::max()) -
      std::chrono::seconds(1);
  if (whole > kLimit || whole < -kLimit) {
    return std::nullopt;
  }
  return SystemClock::time_point(std::chrono::duration_cast<SystemClock::duration>(whole) +
                                 std::chrono::duration_cast<SystemClock::duration>(fraction));
}

std::string BuildExecInfo(const ExecConfig& exec, const ClientConfig& cluster, bool interactive) {
  Json spec = {{"interactive", interactive}};
  if (exec.provide_cluster_info) {
    // Go's omitempty: unset fields are left out rather than sent empty.
    Json info = {{"server", cluster.server}};
    if (!cluster.tls_server_name.empty()) {
      info["tls-server-name"] = cluster.tls_server_name;
    }
    if (cluster.insecure_skip_tls_verify) {
      info["insecure-skip-tls-verify"] = true;
    }
    if (!cluster.ca_pem.empty()) {
      info["certificate-authority-data"] = Base64Encode(cluster.ca_pem);
    }
    if (!cluster.proxy_url.empty()) {
      info["proxy-url"] = cluster.proxy_url;
    }
    if (cluster.disable_compression) {
      info["disable-compression"] = true;
    }
    spec["cluster"] = std::move(info);
  }
  const Json credential = {
      {"apiVersion", exec.api_version}, {"kind", "ExecCredential"}, {"spec", std::move(spec)}};
  return credential.dump();
}

ExecCredential ParseExecCredential(std::string_view output, const ExecConfig& exec) {
  // Too deep: DecodeError naming the plugin (the message never quotes the output).
  const Json reply = ParseJson(output, SourceOf(exec));
  if (reply.is_discarded()) {
    // Not quoted either: the output holds credentials.
    Fail(exec, "", "returned output that is not valid JSON (not shown: it may hold credentials)");
  }
  if (!reply.is_object()) {
    Fail(exec, "", "returned JSON that is not an ExecCredential object");
  }
  const std::string api_version = StringMember(reply, "apiVersion", exec, "apiVersion");
  if (api_version != exec.api_version) {
    Fail(exec, "apiVersion",
         fmt::format("the plugin returned apiVersion \"{}\" but the kubeconfig asks for \"{}\"",
                     api_version, exec.api_version));
  }
  const std::string kind = StringMember(reply, "kind", exec, "kind");
  if (!kind.empty() && kind != "ExecCredential") {
    Fail(exec, "kind", fmt::format("is \"{}\", expected ExecCredential", kind));
  }
  const auto status = reply.find("status");
  if (status == reply.end() || !status->is_object()) {
    Fail(exec, "status", "is missing from the plugin's reply");
  }
  ExecCredential credential;
  credential.token = StringMember(*status, "token", exec, "status.token");
  credential.client_cert_pem =
      StringMember(*status, "clientCertificateData", exec, "status.clientCertificateData");
  credential.client_key_pem = StringMember(*status, "clientKeyData", exec, "status.clientKeyData");
  if (credential.client_cert_pem.empty() != credential.client_key_pem.empty()) {
    Fail(exec, "status", "the plugin returned only a client certificate or only a key, not both");
  }
  if (credential.token.empty() && credential.client_cert_pem.empty()) {
    Fail(exec, "status", "the plugin returned neither a token nor a client certificate");
  }
  const std::string expiration =
      StringMember(*status, "expirationTimestamp", exec, "status.expirationTimestamp");
  if (!expiration.empty()) {
    credential.expiration = ParseRfc3339(expiration);
    if (!credential.expiration) {
      Fail(exec, "status.expirationTimestamp",
           fmt::format("\"{}\" is not an RFC 3339 time", expiration));
    }
  }
  return credential;
}

ExecCredential RunExecPlugin(const ClientConfig& config, const ExecPluginOptions& options) {
  const ExecConfig& exec = config.exec.value();
  const bool terminal = options.stdin_is_terminal.value_or(::isatty(STDIN_FILENO) == 1);
  bool interactive = false;
  if (exec.interactive_mode == "Always") {
    if (!terminal) {
      Fail(exec, "interactiveMode", "is Always but standard input is not a terminal");
    }
    interactive = true;
  } else if (exec.interactive_mode == "IfAvailable") {
    interactive = terminal;
  }

  const std::string hint =
      exec.install_hint.empty() ? std::string() : fmt::format(". {}", exec.install_hint);
  SubprocessOptions run;
  run.executable = FindExecutable(exec.command);
  if (run.executable.empty()) {
    Fail(exec, "command",
         fmt::format("executable \"{}\" was not found{}{}", exec.command,
                     exec.command.find('/') == std::string::npos ? " in PATH" : "", hint));
  }
  run.argv.push_back(exec.command);
  run.argv.insert(run.argv.end(), exec.args.begin(), exec.args.end());
  run.env = PluginEnvironment(exec, BuildExecInfo(exec, config, interactive));
  run.inherit_stdin = interactive;
  run.timeout = options.timeout;

  SubprocessResult result;
  try {
    result = RunSubprocess(run);
  } catch (const std::system_error& e) {
    Fail(exec, "command",
         fmt::format("cannot run \"{}\": {}{}", run.executable, e.code().message(),
                     e.code() == std::errc::no_such_file_or_directory ? hint : std::string()));
  }
  switch (result.outcome) {
    case SubprocessResult::Outcome::kTimedOut:
      Fail(exec, "",
           fmt::format("did not finish within {} ms and was killed", options.timeout.count()));
    case SubprocessResult::Outcome::kOutputTooLarge:
      Fail(exec, "", fmt::format("wrote more than {} bytes and was killed", run.max_stdout_bytes));
    case SubprocessResult::Outcome::kSignaled:
      Fail(exec, "", fmt::format("was killed by signal {}", result.signal));
    case SubprocessResult::Outcome::kExited:
      break;
  }
  if (result.exit_code != 0) {
    // Its stdout is not shown (it may hold credentials); its stderr already went to ours.
    Fail(exec, "",
         fmt::format("exited with code {} (see its messages on stderr)", result.exit_code));
  }
  return ParseExecCredential(result.stdout_data, exec);
}

}  // namespace tfk8s::internal
