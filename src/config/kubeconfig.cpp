// Kubeconfig loading: finding the files, merging them (first value of every key wins, like
// client-go's precedence list), choosing a context and turning it into a ClientConfig.
//
// Every YAML access goes through FieldReader, so a wrong type or missing field becomes a
// ConfigError naming the file and the field (e.g. `users[admin].client-key-data`); yaml-cpp
// exceptions never escape this file. Secret values are never put into messages.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "auth/file_util.hpp"
#include "tfk8s/config.hpp"
#include "tfk8s/error.hpp"
#include "util/base64.hpp"

namespace tfk8s {
namespace {

namespace fs = std::filesystem;
using internal::Base64Decode;
using internal::PathExists;
using internal::ReadWholeFile;
using internal::TrimWhitespace;

constexpr std::string_view kExecV1 = "client.authentication.k8s.io/v1";
constexpr std::string_view kExecV1beta1 = "client.authentication.k8s.io/v1beta1";

/// One named cluster, user or context, and the file it came from.
struct Entry {
  YAML::Node body;     // The `cluster:` / `user:` / `context:` mapping (may be null).
  std::string origin;  // File (or origin name) for messages.
  fs::path base_dir;   // Folder relative paths in this entry are resolved against.
};

/// The merged view of one or more kubeconfig files.
struct Merged {
  std::map<std::string, Entry> clusters;
  std::map<std::string, Entry> users;
  std::map<std::string, Entry> contexts;
  std::string current_context;
  std::string current_context_origin;
  std::vector<std::string> origins;
};

std::string Join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) {
      out += separator;
    }
    out += item;
  }
  return out;
}

template <typename Map>
std::string Names(const Map& map) {
  std::vector<std::string> names;
  names.reserve(map.size());
  for (const auto& [name, unused] : map) {
    names.push_back(name);
  }
  return names.empty() ? std::string("none") : Join(names, ", ");
}

fs::path BaseDirOf(const std::string& origin) {
  try {
    if (origin.empty()) {
      return fs::current_path();
    }
    return fs::absolute(origin).parent_path();
  } catch (const fs::filesystem_error&) {
    return {};  // No usable working directory: relative paths stay relative.
  }
}

std::string DescribeYamlError(const YAML::Exception& e) {
  if (e.mark.is_null()) {
    return e.msg;
  }
  return fmt::format("line {}, column {}: {}", e.mark.line + 1, e.mark.column + 1, e.msg);
}

/// Typed access to one mapping of a kubeconfig, naming `origin` and `prefix.key` on errors.
class FieldReader {
 public:
  FieldReader(const YAML::Node& body, std::string origin, fs::path base_dir, std::string prefix)
      : body_(body),
        origin_(std::move(origin)),
        base_dir_(std::move(base_dir)),
        prefix_(std::move(prefix)) {}

  [[nodiscard]] std::string Field(std::string_view key) const {
    return fmt::format("{}.{}", prefix_, key);
  }

  [[noreturn]] void Fail(std::string_view key, std::string why) const {
    throw ConfigError(origin_, Field(key), std::move(why));
  }

  /// The node of `key`, or an undefined node when absent or when the body is not a mapping.
  [[nodiscard]] YAML::Node Get(std::string_view key) const {
    // IsDefined() first: yaml-cpp throws from IsMap() on a missing ("zombie") node.
    if (!body_.IsDefined() || !body_.IsMap()) {
      return YAML::Node(YAML::NodeType::Undefined);
    }
    const YAML::Node& body = body_;
    return body[std::string(key)];
  }

  [[nodiscard]] bool Present(std::string_view key) const {
    const YAML::Node node = Get(key);
    return node.IsDefined() && !node.IsNull();
  }

  /// A string field; empty when absent or null.
  [[nodiscard]] std::string String(std::string_view key) const {
    const YAML::Node node = Get(key);
    if (!node.IsDefined() || node.IsNull()) {
      return {};
    }
    if (!node.IsScalar()) {
      Fail(key, "must be a string");
    }
    return node.Scalar();
  }

  /// A boolean field; false when absent or null.
  [[nodiscard]] bool Bool(std::string_view key) const {
    const YAML::Node node = Get(key);
    if (!node.IsDefined() || node.IsNull()) {
      return false;
    }
    try {
      if (node.IsScalar()) {
        return node.as<bool>();
      }
    } catch (const YAML::Exception&) {
    }
    Fail(key, "must be true or false");
  }

  /// A list of strings; empty when absent or null.
  [[nodiscard]] std::vector<std::string> StringList(std::string_view key) const {
    const YAML::Node node = Get(key);
    std::vector<std::string> out;
    if (!node.IsDefined() || node.IsNull()) {
      return out;
    }
    if (!node.IsSequence()) {
      Fail(key, "must be a list of strings");
    }
    for (std::size_t i = 0; i < node.size(); ++i) {
      if (!node[i].IsScalar()) {
        Fail(fmt::format("{}[{}]", key, i), "must be a string");
      }
      out.push_back(node[i].Scalar());
    }
    return out;
  }

  /// A file path field, resolved against the folder of the file that defined it.
  [[nodiscard]] std::string Path(std::string_view key) const { return Resolve(String(key)); }

  [[nodiscard]] std::string Resolve(const std::string& path) const {
    if (path.empty() || fs::path(path).is_absolute() || base_dir_.empty()) {
      return path;
    }
    return (base_dir_ / path).lexically_normal().string();
  }

  /// Reads the file named by a path field (already resolved). Errors name the field and path.
  [[nodiscard]] std::string ReadFileField(std::string_view key, const std::string& path) const {
    std::string why;
    auto data = ReadWholeFile(path, &why);
    if (!data) {
      Fail(key, fmt::format("cannot read \"{}\": {}", path, why));
    }
    return std::move(*data);
  }

  /// Decodes a base64 `*-data` field (never quoting it: it may be a private key).
  [[nodiscard]] std::string DecodeDataField(std::string_view key, const std::string& text) const {
    std::string why;
    auto data = Base64Decode(text, &why);
    if (!data) {
      Fail(key, fmt::format("invalid base64: {}", why));
    }
    return std::move(*data);
  }

  /// Rejects keys we recognise but deliberately do not support.
  void RejectUnsupported(std::string_view key, std::string why) const {
    if (Present(key)) {
      Fail(key, std::move(why));
    }
  }

  [[nodiscard]] const std::string& origin() const { return origin_; }

 private:
  YAML::Node body_;
  std::string origin_;
  fs::path base_dir_;
  std::string prefix_;
};

FieldReader ReaderFor(const Entry& entry, std::string_view section, const std::string& name) {
  return FieldReader(entry.body, entry.origin, entry.base_dir,
                     fmt::format("{}[{}]", section, name));
}

/// Adds the named entries of one section (`clusters`, `users`, `contexts`) of one document;
/// names already present (from an earlier file) win.
void MergeSection(const YAML::Node& root, const std::string& section, const std::string& inner,
                  const std::string& origin, const fs::path& base_dir,
                  std::map<std::string, Entry>* merged) {
  const YAML::Node list = root[section];
  if (!list.IsDefined() || list.IsNull()) {
    return;
  }
  if (!list.IsSequence()) {
    throw ConfigError(origin, section, "must be a list");
  }
  std::set<std::string> seen_in_this_file;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    if (!item.IsMap()) {
      throw ConfigError(origin, fmt::format("{}[{}]", section, i),
                        fmt::format("must be a mapping with `name` and `{}`", inner));
    }
    const YAML::Node name_node = item["name"];
    if (!name_node.IsDefined() || !name_node.IsScalar() || name_node.Scalar().empty()) {
      throw ConfigError(origin, fmt::format("{}[{}].name", section, i), "is missing or empty");
    }
    const std::string& name = name_node.Scalar();
    if (!seen_in_this_file.insert(name).second) {
      throw ConfigError(origin, fmt::format("{}[{}]", section, name),
                        "is defined more than once in this file");
    }
    const YAML::Node body = item[inner];
    if (body.IsDefined() && !body.IsNull() && !body.IsMap()) {
      throw ConfigError(origin, fmt::format("{}[{}].{}", section, name, inner),
                        "must be a mapping");
    }
    merged->emplace(name, Entry{body, origin, base_dir});
  }
}

/// Parses one kubeconfig document and merges it into `merged`.
void MergeDocument(const std::string& yaml, const std::string& origin, Merged* merged) {
  YAML::Node parsed;
  try {
    parsed = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin, "", fmt::format("not valid YAML: {}", DescribeYamlError(e)));
  }
  // Read-only from here on: yaml-cpp's non-const operator[] would insert missing keys.
  const YAML::Node& root = parsed;
  merged->origins.push_back(origin);
  if (!root.IsDefined() || root.IsNull()) {
    return;  // An empty file is an empty config.
  }
  if (!root.IsMap()) {
    throw ConfigError(origin, "", "the top level must be a mapping");
  }
  const fs::path base_dir = BaseDirOf(origin);
  try {
    MergeSection(root, "clusters", "cluster", origin, base_dir, &merged->clusters);
    MergeSection(root, "users", "user", origin, base_dir, &merged->users);
    MergeSection(root, "contexts", "context", origin, base_dir, &merged->contexts);
    const YAML::Node current = root["current-context"];
    if (current.IsDefined() && !current.IsNull()) {
      if (!current.IsScalar()) {
        throw ConfigError(origin, "current-context", "must be a string");
      }
      if (merged->current_context.empty() && !current.Scalar().empty()) {
        merged->current_context = current.Scalar();
        merged->current_context_origin = origin;
      }
    }
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin, "", fmt::format("unexpected structure: {}", DescribeYamlError(e)));
  }
}

void ApplyCluster(const FieldReader& r, ClientConfig* config) {
  config->server = r.String("server");
  if (config->server.empty()) {
    r.Fail("server", "is missing");
  }
  // client-go guesses a scheme for "host:port"; an explicit one avoids sending a token over
  // plain HTTP by accident.
  if (config->server.rfind("https://", 0) != 0 && config->server.rfind("http://", 0) != 0) {
    r.Fail("server", "must start with https:// or http://");
  }
  const std::string ca_data = r.String("certificate-authority-data");
  const std::string ca_file = r.Path("certificate-authority");
  // Data beats file (client-go): the file is not even read when data is present.
  if (!ca_data.empty()) {
    config->ca_pem = r.DecodeDataField("certificate-authority-data", ca_data);
  } else if (!ca_file.empty()) {
    config->ca_pem = r.ReadFileField("certificate-authority", ca_file);
    config->ca_file = ca_file;
  }
  config->insecure_skip_tls_verify = r.Bool("insecure-skip-tls-verify");
  if (config->insecure_skip_tls_verify && (!ca_data.empty() || !ca_file.empty())) {
    r.Fail("insecure-skip-tls-verify",
           "cannot be combined with certificate-authority or certificate-authority-data");
  }
  config->tls_server_name = r.String("tls-server-name");
  config->proxy_url = r.String("proxy-url");
  config->disable_compression = r.Bool("disable-compression");
}

ExecConfig DecodeExec(const FieldReader& user) {
  const YAML::Node node = user.Get("exec");
  if (!node.IsMap()) {
    user.Fail("exec", "must be a mapping");
  }
  FieldReader r(node, user.origin(), {}, user.Field("exec"));
  ExecConfig exec;
  exec.api_version = r.String("apiVersion");
  if (exec.api_version.empty()) {
    r.Fail("apiVersion", fmt::format("is missing (use {} or {})", kExecV1, kExecV1beta1));
  }
  if (exec.api_version != kExecV1 && exec.api_version != kExecV1beta1) {
    r.Fail("apiVersion", fmt::format("\"{}\" is not supported (use {} or {})", exec.api_version,
                                     kExecV1, kExecV1beta1));
  }
  exec.command = r.String("command");
  if (exec.command.empty()) {
    r.Fail("command", "is missing");
  }
  // A bare name is looked up in PATH when the plugin runs; anything with a '/' is a path and,
  // when relative, belongs to the kubeconfig's folder (client-go's ResolvePaths does the same).
  if (exec.command.find('/') != std::string::npos) {
    exec.command = user.Resolve(exec.command);
  }
  exec.args = r.StringList("args");
  const YAML::Node env = r.Get("env");
  if (env.IsDefined() && !env.IsNull()) {
    if (!env.IsSequence()) {
      r.Fail("env", "must be a list of {name, value}");
    }
    for (std::size_t i = 0; i < env.size(); ++i) {
      FieldReader item(env[i], user.origin(), {}, r.Field(fmt::format("env[{}]", i)));
      if (!env[i].IsMap()) {
        r.Fail(fmt::format("env[{}]", i), "must be a mapping {name, value}");
      }
      std::string name = item.String("name");
      if (name.empty()) {
        item.Fail("name", "is missing");
      }
      exec.env.emplace_back(std::move(name), item.String("value"));
    }
  }
  exec.install_hint = r.String("installHint");
  const std::string mode = r.String("interactiveMode");
  if (mode.empty()) {
    // client-go: v1 must say it, v1beta1 defaults to IfAvailable.
    if (exec.api_version == kExecV1) {
      r.Fail("interactiveMode",
             "must be set to Never, IfAvailable or Always for " + std::string(kExecV1));
    }
    exec.interactive_mode = "IfAvailable";
  } else if (mode == "Never" || mode == "IfAvailable" || mode == "Always") {
    exec.interactive_mode = mode;
  } else {
    r.Fail("interactiveMode", fmt::format("\"{}\" is not one of Never, IfAvailable, Always", mode));
  }
  exec.provide_cluster_info = r.Bool("provideClusterInfo");
  return exec;
}

void ApplyUser(const FieldReader& r, ClientConfig* config) {
  r.RejectUnsupported("auth-provider",
                      "auth providers are not supported; use an exec credential plugin");
  // Silently ignoring impersonation would run requests as the real (often more powerful) user.
  for (const char* key : {"as", "as-uid", "as-groups", "as-user-extra"}) {
    r.RejectUnsupported(key, "impersonation is not supported");
  }

  config->token = r.String("token");
  config->token_file = r.Path("tokenFile");
  if (!config->token_file.empty()) {
    // Checked now so a typo fails at load time; the provider re-reads it on every refresh.
    const std::string content = r.ReadFileField("tokenFile", config->token_file);
    if (TrimWhitespace(content).empty()) {
      r.Fail("tokenFile", fmt::format("\"{}\" is empty", config->token_file));
    }
  }

  const std::string cert_data = r.String("client-certificate-data");
  const std::string cert_file = r.Path("client-certificate");
  const std::string key_data = r.String("client-key-data");
  const std::string key_file = r.Path("client-key");
  // Data beats file; files are read into memory so key material is never copied to disk.
  if (!cert_data.empty()) {
    config->client_cert_pem = r.DecodeDataField("client-certificate-data", cert_data);
  } else if (!cert_file.empty()) {
    config->client_cert_pem = r.ReadFileField("client-certificate", cert_file);
  }
  if (!key_data.empty()) {
    config->client_key_pem = r.DecodeDataField("client-key-data", key_data);
  } else if (!key_file.empty()) {
    config->client_key_pem = r.ReadFileField("client-key", key_file);
  }
  if (!config->client_cert_pem.empty() && config->client_key_pem.empty()) {
    r.Fail("client-key", "client-certificate is set but neither client-key nor client-key-data is");
  }
  if (config->client_cert_pem.empty() && !config->client_key_pem.empty()) {
    r.Fail("client-certificate",
           "client-key is set but neither client-certificate nor client-certificate-data is");
  }

  config->username = r.String("username");
  config->password = r.String("password");
  if ((!config->username.empty() || !config->password.empty()) &&
      (!config->token.empty() || !config->token_file.empty())) {
    r.Fail("username", "basic auth (username/password) cannot be combined with a token");
  }

  if (r.Present("exec")) {
    config->exec = DecodeExec(r);
  }
}

/// Builds the ClientConfig for one context of a merged kubeconfig.
ClientConfig Build(const Merged& merged, const KubeconfigOptions& options) {
  const std::string all_origins = Join(merged.origins, ":");
  std::string context_name = options.context;
  if (context_name.empty()) {
    if (merged.current_context.empty()) {
      throw ConfigError(all_origins, "current-context",
                        fmt::format("is not set and no context was requested (contexts: {})",
                                    Names(merged.contexts)));
    }
    context_name = merged.current_context;
  }
  const auto context_it = merged.contexts.find(context_name);
  if (context_it == merged.contexts.end()) {
    // Name the file that pointed at the context: the one with current-context, or all of them
    // when the caller asked for it by name.
    const bool from_current = options.context.empty();
    throw ConfigError(from_current ? merged.current_context_origin : all_origins,
                      from_current ? "current-context" : fmt::format("contexts[{}]", context_name),
                      fmt::format("context \"{}\" not found (contexts: {})", context_name,
                                  Names(merged.contexts)));
  }
  const Entry& context = context_it->second;
  const FieldReader ctx = ReaderFor(context, "contexts", context_name);

  ClientConfig config;
  config.context = context_name;
  config.source = fmt::format("kubeconfig {} (context {})", all_origins, context_name);

  const std::string cluster_name = ctx.String("cluster");
  if (cluster_name.empty()) {
    ctx.Fail("cluster", "is missing");
  }
  const auto cluster_it = merged.clusters.find(cluster_name);
  if (cluster_it == merged.clusters.end()) {
    ctx.Fail("cluster", fmt::format("cluster \"{}\" not found (clusters: {})", cluster_name,
                                    Names(merged.clusters)));
  }
  ApplyCluster(ReaderFor(cluster_it->second, "clusters", cluster_name), &config);

  // No user is legal: anonymous access (or a server that authenticates by other means).
  const std::string user_name = ctx.String("user");
  if (!user_name.empty()) {
    const auto user_it = merged.users.find(user_name);
    if (user_it == merged.users.end()) {
      ctx.Fail("user",
               fmt::format("user \"{}\" not found (users: {})", user_name, Names(merged.users)));
    }
    ApplyUser(ReaderFor(user_it->second, "users", user_name), &config);
  }

  const std::string ns = ctx.String("namespace");
  config.default_namespace = !options.namespace_override.empty() ? options.namespace_override
                             : !ns.empty()                       ? ns
                                                                 : "default";
  config.Validate();  // Everything above names kubeconfig fields; this is the safety net.
  return config;
}

ClientConfig BuildChecked(const Merged& merged, const KubeconfigOptions& options) {
  try {
    return Build(merged, options);
  } catch (const YAML::Exception& e) {
    // FieldReader handles the expected cases; this is the boundary for anything else.
    throw ConfigError(Join(merged.origins, ":"), "",
                      fmt::format("unexpected structure: {}", DescribeYamlError(e)));
  }
}

std::vector<std::string> SplitKubeconfigList(const std::string& value) {
  std::vector<std::string> files;
  std::size_t start = 0;
  while (start <= value.size()) {
    const std::size_t end = std::min(value.find(':', start), value.size());
    std::string item = value.substr(start, end - start);
    if (!item.empty() && std::find(files.begin(), files.end(), item) == files.end()) {
      files.push_back(std::move(item));
    }
    start = end + 1;
  }
  return files;
}

std::string GetEnv(const char* name) {
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): only read
  return value == nullptr ? std::string() : std::string(value);
}

/// Where kubeconfig files would come from, without reading them.
struct Discovery {
  std::vector<std::string> files;  // Existing files to merge, in precedence order.
  std::string tried;               // What was looked at (for "nothing found" messages).
  std::string why_none;            // Why `files` is empty.
};

Discovery Discover(const KubeconfigOptions& options) {
  Discovery d;
  if (!options.path.empty()) {
    d.tried = fmt::format("kubeconfig {}", options.path);
    // An explicit file is always "found": reading it reports the precise error.
    d.files.push_back(options.path);
    return d;
  }
  const std::string list = GetEnv("KUBECONFIG");
  if (!list.empty()) {
    d.tried = fmt::format("KUBECONFIG={}", list);
    // client-go skips missing files in the list; unreadable ones are reported when read.
    for (auto& file : SplitKubeconfigList(list)) {
      if (PathExists(file)) {
        d.files.push_back(std::move(file));
      }
    }
    if (d.files.empty()) {
      d.why_none = "none of the listed files exists";
    }
    return d;
  }
  const std::string home = GetEnv("HOME");
  if (home.empty()) {
    d.tried = "~/.kube/config";
    d.why_none = "HOME is not set";
    return d;
  }
  const std::string file = (fs::path(home) / ".kube" / "config").string();
  d.tried = fmt::format("~/.kube/config ({})", file);
  if (PathExists(file)) {
    d.files.push_back(file);
  } else {
    d.why_none = "does not exist";
  }
  return d;
}

ClientConfig LoadFiles(const std::vector<std::string>& files, const KubeconfigOptions& options) {
  Merged merged;
  for (const auto& file : files) {
    std::string why;
    const auto text = ReadWholeFile(file, &why);
    if (!text) {
      throw ConfigError(file, "", fmt::format("cannot read: {}", why));
    }
    MergeDocument(*text, file, &merged);
  }
  return BuildChecked(merged, options);
}

}  // namespace

ClientConfig LoadKubeconfigFromString(const std::string& yaml, const std::string& origin,
                                      const KubeconfigOptions& options) {
  Merged merged;
  MergeDocument(yaml, origin, &merged);
  return BuildChecked(merged, options);
}

ClientConfig LoadKubeconfig(const KubeconfigOptions& options) {
  const Discovery d = Discover(options);
  if (d.files.empty()) {
    throw ConfigError(d.tried, "", d.why_none);
  }
  return LoadFiles(d.files, options);
}

ClientConfig LoadDefaultConfig(const KubeconfigOptions& options) {
  // A kubeconfig that exists but is broken is an error, not a reason to fall back: silently
  // talking to a different cluster would be worse than failing.
  const Discovery d = Discover(options);
  if (!d.files.empty()) {
    return LoadFiles(d.files, options);
  }

  std::vector<std::string> tried;
  tried.push_back(fmt::format("{}: {}", d.tried, d.why_none));
  if (!options.context.empty()) {
    tried.push_back(
        fmt::format("in-cluster: skipped because context \"{}\" was requested", options.context));
  } else {
    try {
      ClientConfig config = LoadInClusterConfig();
      if (!options.namespace_override.empty()) {
        config.default_namespace = options.namespace_override;
      }
      return config;
    } catch (const ConfigError& e) {
      tried.push_back(e.what());  // Its source already says "in-cluster".
    }
  }
  std::string why = "no configuration found; tried:";
  for (std::size_t i = 0; i < tried.size(); ++i) {
    why += fmt::format(" ({}) {};", i + 1, tried[i]);
  }
  why.pop_back();
  throw ConfigError("default config", "", why);
}

}  // namespace tfk8s
