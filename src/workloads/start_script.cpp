// The pod parts of tfk8s's interactive start script, shared by DevInstance and the TFCluster
// session (the script itself: src/workloads/scripts/dev_start.sh, embedded as DevStartScript).

#include "workloads/start_script.hpp"

#include <fmt/format.h>

#include "http/crypto.hpp"
#include "util/base64.hpp"
#include "workloads/devinstance_internal.hpp"
#include "workloads/pod.hpp"

namespace tfk8s::internal {

std::vector<DevPort> ToolPorts(const DevTools& t) {
  std::vector<DevPort> out;
  if (t.jupyter) out.push_back({"jupyter", t.jupyter_port});
  if (t.ssh) out.push_back({"ssh", t.ssh_port});
  if (t.code_server) out.push_back({"code-server", t.code_server_port});
  if (t.tensorboard) out.push_back({"tensorboard", t.tensorboard_port});
  for (const auto& p : t.custom_ports) out.push_back(p);
  return out;
}

std::vector<DevPort> ServedToolPorts(const DevTools& t) {
  std::vector<DevPort> out = ToolPorts(t);
  out.resize(out.size() - t.custom_ports.size());
  return out;
}

Json StartScriptEnv(const StartScriptTools& s) {
  const DevTools& t = *s.tools;
  Json env = Json::array();
  auto add = [&](const char* name, const std::string& value) {
    env.push_back({{"name", name}, {"value", value}});
  };
  add("TFK8S_HOME", s.home);
  add("TFK8S_CREDENTIALS_DIR", kCredentialsDir);
  if (t.jupyter) add("TFK8S_JUPYTER_PORT", std::to_string(t.jupyter_port));
  if (t.ssh) {
    add("TFK8S_SSH_PORT", std::to_string(t.ssh_port));
    add("TFK8S_SSH_PASSWORD_LOGIN", s.ssh_password_login ? "yes" : "no");
  }
  if (t.code_server) add("TFK8S_CODE_SERVER_PORT", std::to_string(t.code_server_port));
  if (t.tensorboard) {
    add("TFK8S_TENSORBOARD_PORT", std::to_string(t.tensorboard_port));
    add("TFK8S_TENSORBOARD_LOGDIR", t.tensorboard_log_dir);
  }
  return env;
}

Json StartScriptCommand() {
  // tfk8s's own script is always passed verbatim (it uses $((…)) and ${…}).
  return KubeletArgv({"/bin/sh", "-c", DevStartScript()});
}

Json CustomScriptPasswordEnv(const std::string& secret_name, bool password_env) {
  Json env = Json::array({{{"name", "TFK8S_PASSWORD_FILE"},
                           {"value", std::string(kCredentialsDir) + "/" + kPasswordKey}}});
  if (password_env) {
    env.push_back(
        {{"name", "PASSWORD"},
         {"valueFrom", {{"secretKeyRef", {{"name", secret_name}, {"key", kPasswordKey}}}}}});
  }
  return env;
}

Json CredentialsVolume(const std::string& secret_name, bool with_password,
                       bool with_authorized_keys) {
  Json items = Json::array({{{"key", kJupyterHashKey}, {"path", kJupyterHashKey}},
                            {{"key", kJupyterFallbackHashKey}, {"path", kJupyterFallbackHashKey}},
                            {{"key", kSshHashKey}, {"path", kSshHashKey}}});
  if (with_password) items.push_back({{"key", kPasswordKey}, {"path", kPasswordKey}});
  if (with_authorized_keys) {
    items.push_back({{"key", kAuthorizedKeysKey}, {"path", kAuthorizedKeysKey}});
  }
  return {{"name", "credentials"},
          {"secret", {{"secretName", secret_name}, {"defaultMode", 0400}, {"items", items}}}};
}

Json CredentialsMount() {
  return {{"name", "credentials"}, {"mountPath", kCredentialsDir}, {"readOnly", true}};
}

Json ToolsReadinessProbe(const DevTools& tools) {
  const std::vector<DevPort> served = ServedToolPorts(tools);
  if (served.empty()) return nullptr;
  // "name:port:HEX" words: /proc/net/tcp shows ports as four upper-case hex digits and state
  // 0A for LISTEN. No command substitution and no external program: only sh builtins.
  std::string words;
  for (const auto& p : served) {
    words += fmt::format("{}{}:{}:{:04X}", words.empty() ? "" : " ", p.name, p.port, p.port);
  }
  std::string script = fmt::format(
      "for t in {}; do h=${{t##*:}}; nt=${{t%:*}}; ok=; "
      "for f in /proc/net/tcp /proc/net/tcp6; do [ -r \"$f\" ] || continue; "
      "while read -r _ l _ s _; do case $l in *:$h) [ \"$s\" = 0A ] && ok=1;; esac; "
      "done < \"$f\"; done; "
      "[ -n \"$ok\" ] || {{ echo \"tfk8s: ${{nt%:*}} (port ${{nt#*:}}) does not accept "
      "connections yet\"; exit 1; }}; done",
      words);
  return {{"exec", {{"command", KubeletArgv({"/bin/sh", "-c", script})}}},
          {"initialDelaySeconds", 2},
          {"periodSeconds", 5},
          {"timeoutSeconds", 5}};
}

Json CredentialsSecretData(const DevCredentials& credentials,
                           const std::vector<std::string>& authorized_keys) {
  Json data = {{kPasswordKey, Base64Encode(credentials.password)},
               {kJupyterHashKey, Base64Encode(credentials.jupyter_hash)},
               {kJupyterFallbackHashKey, Base64Encode(credentials.jupyter_fallback_hash)},
               {kSshHashKey, Base64Encode(credentials.ssh_hash)}};
  if (!authorized_keys.empty()) {
    std::string keys;
    for (const auto& k : authorized_keys) keys += k + "\n";
    data[kAuthorizedKeysKey] = Base64Encode(keys);
  }
  return data;
}

std::optional<DevCredentials> DecodeCredentialsSecret(const Json& secret) {
  // Json::value throws on anything but an object: a reply of another shape holds no credentials.
  if (!secret.is_object()) return std::nullopt;
  const Json& data = secret.value("data", Json::object());
  auto field = [&](const char* key) -> std::optional<std::string> {
    auto it = data.find(key);
    if (it == data.end() || !it->is_string()) return std::nullopt;
    return Base64Decode(it->get<std::string>());
  };
  auto password = field(kPasswordKey);
  auto jupyter = field(kJupyterHashKey);
  auto ssh = field(kSshHashKey);
  if (!password || !jupyter || !ssh) return std::nullopt;
  DevCredentials c{*password, *jupyter, "", *ssh};
  auto fallback = field(kJupyterFallbackHashKey);
  if (fallback) c.jupyter_fallback_hash = *fallback;
  return c;
}

std::optional<DevCredentials> CredentialsFromSecret(const Json& secret) {
  auto c = DecodeCredentialsSecret(secret);
  if (!c) return std::nullopt;
  // A Secret written before tfk8s used argon2 holds only the SHA-512 hash: both hashes are made
  // from the kept password, so the re-rendered Secret has every file the pod mounts.
  if (c->jupyter_hash.rfind("argon2:", 0) != 0) {
    c->jupyter_hash = NewJupyterPasswordHash(c->password);
  }
  if (c->jupyter_fallback_hash.empty()) {
    c->jupyter_fallback_hash = NewJupyterSha512Hash(c->password);
  }
  return c;
}

void FillConnect(DevAccess* a) {
  for (auto& e : a->endpoints) {
    std::string address = e.external_address.empty() ? e.cluster_address : e.external_address;
    if (e.tool == "ssh") {
      auto colon = address.rfind(':');
      e.connect = fmt::format("ssh -p {} {}@{}", address.substr(colon + 1), a->user,
                              address.substr(0, colon));
    } else {
      e.connect = "http://" + address + "/";
    }
  }
}

}  // namespace tfk8s::internal
