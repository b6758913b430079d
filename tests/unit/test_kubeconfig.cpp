// Kubeconfig loading, merging, ClientConfig validation/redaction, LoadDefaultConfig, base64.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "config_test_util.hpp"
#include "tfk8s/config.hpp"
#include "tfk8s/error.hpp"
#include "util/base64.hpp"

using namespace tfk8s;
namespace fs = std::filesystem;
using tfk8s::testing::CatchConfigError;
using tfk8s::testing::ScopedEnv;
using tfk8s::testing::TempDir;

#define CHECK_CONTAINS(haystack, needle)                                 \
  CHECK_MESSAGE(std::string(haystack).find(needle) != std::string::npos, \
                "\"" << (haystack) << "\" does not contain \"" << (needle) << "\"")
#define CHECK_NOT_CONTAINS(haystack, needle)                             \
  CHECK_MESSAGE(std::string(haystack).find(needle) == std::string::npos, \
                "\"" << (haystack) << "\" contains \"" << (needle) << "\"")

namespace {

std::string DataDir() { return std::string(TFK8S_TEST_DATA_DIR) + "/kubeconfig"; }

std::string Fixture(const std::string& name) { return DataDir() + "/" + name; }

ClientConfig LoadFull(const std::string& context) {
  KubeconfigOptions options;
  options.path = Fixture("full.yaml");
  options.context = context;
  return LoadKubeconfig(options);
}

/// A one-cluster, one-user, one-context kubeconfig with `user_yaml` as the user body.
std::string WithUser(const std::string& user_yaml) {
  return "current-context: c\n"
         "clusters:\n- name: k\n  cluster: {server: 'https://k.example.com'}\n"
         "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
         "users:\n- name: u\n  user:\n" +
         user_yaml;
}

ClientConfig LoadString(const std::string& yaml, const std::string& origin = "/cfg/kubeconfig") {
  return LoadKubeconfigFromString(yaml, origin);
}

}  // namespace

TEST_SUITE("kubeconfig") {
  TEST_CASE("current-context with data fields") {
    const ClientConfig c = LoadFull("");
    CHECK(c.context == "prod-admin");
    CHECK(c.server == "https://prod.example.com:6443");
    CHECK_CONTAINS(c.ca_pem, "-----BEGIN CERTIFICATE-----\nRklYVFVSRS1DQQ==");
    CHECK(c.ca_file.empty());  // certificate-authority-data wins; the file was not read.
    CHECK(c.tls_server_name == "kubernetes.internal");
    CHECK(c.proxy_url == "http://proxy.example.com:3128");
    CHECK_FALSE(c.disable_compression);
    CHECK_FALSE(c.insecure_skip_tls_verify);
    CHECK(c.client_cert_pem == "data-cert");
    CHECK(c.client_key_pem == "data-key-SECRET");
    CHECK(c.default_namespace == "ml-team");
    CHECK(c.token.empty());
    CHECK_FALSE(c.exec.has_value());
    CHECK_CONTAINS(c.source, Fixture("full.yaml"));
    CHECK_CONTAINS(c.source, "prod-admin");
    CHECK_NOTHROW(c.Validate());
  }

  TEST_CASE("relative file paths are resolved against the kubeconfig folder") {
    const ClientConfig c = LoadFull("staging-files");
    CHECK(c.server == "https://10.1.2.3:6443");
    CHECK(c.ca_file == Fixture("certs/ca.crt"));
    CHECK_CONTAINS(c.ca_pem, "RklYVFVSRS1DQQ==");
    // Files are read into memory: the transport never sees a path for key material.
    CHECK_CONTAINS(c.client_cert_pem, "RklYVFVSRS1DTElFTlQ=");
    CHECK_CONTAINS(c.client_key_pem, "fixture-client-key-SECRET");
    CHECK(c.default_namespace == "default");
    CHECK_NOTHROW(c.Validate());
  }

  TEST_CASE("relative paths from a kubeconfig given by a relative path are made absolute") {
    const fs::path old_cwd = fs::current_path();
    fs::current_path(DataDir());
    KubeconfigOptions options;
    options.path = "full.yaml";
    options.context = "staging-token-file";
    std::optional<ClientConfig> c;
    CHECK_NOTHROW(c = LoadKubeconfig(options));
    fs::current_path(old_cwd);
    REQUIRE(c);
    CHECK(fs::path(c->token_file).is_absolute());
    CHECK(fs::equivalent(c->token_file, Fixture("tokens/token")));
  }

  TEST_CASE("static token, namespace and namespace_override") {
    ClientConfig c = LoadFull("staging-token");
    CHECK(c.token == "static-token-SECRET");
    CHECK(c.default_namespace == "ns1");
    KubeconfigOptions options;
    options.path = Fixture("full.yaml");
    options.context = "staging-token";
    options.namespace_override = "override";
    c = LoadKubeconfig(options);
    CHECK(c.default_namespace == "override");
  }

  TEST_CASE("tokenFile is kept as a path (re-read later), not copied into token") {
    const ClientConfig c = LoadFull("staging-token-file");
    CHECK(c.token_file == Fixture("tokens/token"));
    CHECK(c.token.empty());
  }

  TEST_CASE("basic auth and insecure-skip-tls-verify") {
    const ClientConfig c =
        LoadString(WithUser("    username: alice\n"
                            "    password: basic-password-SECRET\n"));
    CHECK(c.username == "alice");
    CHECK(c.password == "basic-password-SECRET");
    CHECK_NOTHROW(c.Validate());
    // The fixture's dev cluster is plain http://: its basic-auth user is refused (issue #35).
    auto e = CatchConfigError([] { LoadFull("dev-basic"); });
    REQUIRE(e);
    CHECK(e->field() == "server");
    CHECK_CONTAINS(e->what(), "http://127.0.0.1:8080");
    CHECK_NOT_CONTAINS(e->what(), "SECRET");
    const ClientConfig anonymous = LoadFull("dev-anonymous");
    CHECK(anonymous.server == "http://127.0.0.1:8080");
    CHECK(anonymous.insecure_skip_tls_verify);
  }

  TEST_CASE("a context without a user is anonymous") {
    const ClientConfig c = LoadFull("dev-anonymous");
    CHECK(c.token.empty());
    CHECK(c.client_cert_pem.empty());
    CHECK(c.username.empty());
    CHECK_FALSE(c.exec);
  }

  TEST_CASE("exec plugin v1 with every field") {
    const ClientConfig c = LoadFull("prod-exec");
    REQUIRE(c.exec);
    const ExecConfig& e = *c.exec;
    CHECK(e.api_version == "client.authentication.k8s.io/v1");
    CHECK(e.command == Fixture("bin/get-token"));  // Contains '/': relative to the file.
    CHECK(e.args == std::vector<std::string>{"--cluster", "prod", "--secret-arg=arg-SECRET"});
    REQUIRE(e.env.size() == 2);
    CHECK(e.env[0] == std::pair<std::string, std::string>{"PLUGIN_SECRET", "env-value-SECRET"});
    CHECK(e.env[1] == std::pair<std::string, std::string>{"EMPTY", ""});
    CHECK(e.install_hint == "Install get-token from https://example.com/get-token");
    CHECK(e.interactive_mode == "Never");
    CHECK(e.provide_cluster_info);
    CHECK_NOTHROW(c.Validate());
  }

  TEST_CASE("exec plugin v1beta1: bare command stays a PATH lookup, interactiveMode defaults") {
    const ClientConfig c = LoadFull("prod-exec-beta");
    REQUIRE(c.exec);
    CHECK(c.exec->command == "aws-iam-authenticator");
    CHECK(c.exec->api_version == "client.authentication.k8s.io/v1beta1");
    CHECK(c.exec->interactive_mode == "IfAvailable");
    CHECK_FALSE(c.exec->provide_cluster_info);
    CHECK(c.exec->args.empty());
    CHECK(c.exec->env.empty());
  }

  TEST_CASE("exec plugin errors") {
    auto e = CatchConfigError([] {
      (void)LoadString(
          WithUser("    exec: {apiVersion: client.authentication.k8s.io/v1, "
                   "command: x}\n"));
    });
    REQUIRE(e);
    CHECK(e->field() == "users[u].exec.interactiveMode");
    CHECK_CONTAINS(e->what(), "/cfg/kubeconfig");

    e = CatchConfigError([] {
      (void)LoadString(
          WithUser("    exec: {apiVersion: client.authentication.k8s.io/v1alpha1, "
                   "command: x}\n"));
    });
    REQUIRE(e);
    CHECK(e->field() == "users[u].exec.apiVersion");
    CHECK_CONTAINS(e->what(), "v1alpha1");

    e = CatchConfigError([] {
      (void)LoadString(WithUser("    exec: {apiVersion: client.authentication.k8s.io/v1beta1}\n"));
    });
    REQUIRE(e);
    CHECK(e->field() == "users[u].exec.command");

    e = CatchConfigError([] {
      (void)LoadString(
          WithUser("    exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                   "command: x, interactiveMode: Sometimes}\n"));
    });
    REQUIRE(e);
    CHECK(e->field() == "users[u].exec.interactiveMode");

    e = CatchConfigError([] {
      (void)LoadString(
          WithUser("    exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                   "command: x, env: [{value: v}]}\n"));
    });
    REQUIRE(e);
    CHECK(e->field() == "users[u].exec.env[0].name");
  }

  TEST_CASE("disable-compression is read from the cluster and shown by ToString") {
    const ClientConfig c = LoadString(
        "current-context: c\n"
        "clusters:\n- name: k\n  cluster: {server: 'https://k.example.com', "
        "disable-compression: true}\n"
        "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
        "users:\n- name: u\n  user: {token: abc}\n");
    CHECK(c.disable_compression);
    CHECK(c.ToString().find("disable-compression: true") != std::string::npos);
    CHECK_FALSE(LoadString(WithUser("    token: abc\n")).disable_compression);
  }

  TEST_CASE("unsupported auth mechanisms are rejected, not ignored") {
    auto e =
        CatchConfigError([] { (void)LoadString(WithUser("    auth-provider: {name: gcp}\n")); });
    REQUIRE(e);
    CHECK(e->field() == "users[u].auth-provider");
    e = CatchConfigError([] { (void)LoadString(WithUser("    token: t\n    as: root\n")); });
    REQUIRE(e);
    CHECK(e->field() == "users[u].as");
    CHECK_CONTAINS(e->what(), "impersonation");
  }

  TEST_CASE("unknown requested context names the context and the file") {
    auto e = CatchConfigError([] { (void)LoadFull("nope"); });
    REQUIRE(e);
    CHECK(e->source() == Fixture("full.yaml"));
    CHECK(e->field() == "contexts[nope]");
    CHECK_CONTAINS(e->what(), "\"nope\"");
    CHECK_CONTAINS(e->what(), "prod-admin");  // Lists what exists.
  }

  TEST_CASE("unknown current-context names the file that set it") {
    KubeconfigOptions options;
    options.path = Fixture("bad/unknown-current-context.yaml");
    auto e = CatchConfigError([&] { (void)LoadKubeconfig(options); });
    REQUIRE(e);
    CHECK(e->source() == options.path);
    CHECK(e->field() == "current-context");
    CHECK_CONTAINS(e->what(), "\"ghost\"");
  }

  TEST_CASE("no current-context and no requested context") {
    auto e = CatchConfigError(
        [] { (void)LoadString("contexts:\n- name: a\n  context: {cluster: k}\n"); });
    REQUIRE(e);
    CHECK(e->field() == "current-context");
    CHECK_CONTAINS(e->what(), "(contexts: a)");
  }

  TEST_CASE("context pointing to a missing cluster or user") {
    KubeconfigOptions options;
    options.path = Fixture("bad/missing-cluster.yaml");
    auto e = CatchConfigError([&] { (void)LoadKubeconfig(options); });
    REQUIRE(e);
    CHECK(e->source() == options.path);
    CHECK(e->field() == "contexts[c].cluster");
    CHECK_CONTAINS(e->what(), "\"nowhere\"");

    e = CatchConfigError([] {
      (void)LoadString(
          "current-context: c\nclusters:\n- name: k\n  cluster: {server: 'https://k'}\n"
          "contexts:\n- name: c\n  context: {cluster: k, user: ghost}\n",
          "/some/where/config");
    });
    REQUIRE(e);
    CHECK(e->source() == "/some/where/config");
    CHECK(e->field() == "contexts[c].user");
    CHECK_CONTAINS(e->what(), "\"ghost\"");
  }

  TEST_CASE("missing explicit file") {
    KubeconfigOptions options;
    options.path = "/nonexistent/dir/kubeconfig";
    auto e = CatchConfigError([&] { (void)LoadKubeconfig(options); });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), "/nonexistent/dir/kubeconfig");
    CHECK_CONTAINS(e->what(), "No such file");
  }

  TEST_CASE("unparsable YAML names the file and the position") {
    KubeconfigOptions options;
    options.path = Fixture("bad/not-yaml.yaml");
    auto e = CatchConfigError([&] { (void)LoadKubeconfig(options); });
    REQUIRE(e);
    CHECK(e->source() == options.path);
    CHECK_CONTAINS(e->what(), "YAML");
    CHECK_CONTAINS(e->what(), "line");
  }

  TEST_CASE("bad base64 names file and field without quoting the data") {
    KubeconfigOptions options;
    options.path = Fixture("bad/bad-base64.yaml");
    auto e = CatchConfigError([&] { (void)LoadKubeconfig(options); });
    REQUIRE(e);
    CHECK(e->source() == options.path);
    CHECK(e->field() == "users[admin].client-key-data");
    CHECK_CONTAINS(e->what(), options.path);
    CHECK_CONTAINS(e->what(), "users[admin].client-key-data");
    CHECK_CONTAINS(e->what(), "base64");
    CHECK_NOT_CONTAINS(e->what(), "SECRET");

    e = CatchConfigError([] {
      (void)LoadString(
          "current-context: c\nclusters:\n- name: k\n  cluster: {server: 'https://k', "
          "certificate-authority-data: 'Zm9v='}\ncontexts:\n- name: c\n  context: {cluster: k}\n");
    });
    REQUIRE(e);
    CHECK(e->field() == "clusters[k].certificate-authority-data");
  }

  TEST_CASE("certificate without key and key without certificate") {
    KubeconfigOptions options;
    options.path = Fixture("bad/cert-without-key.yaml");
    auto e = CatchConfigError([&] { (void)LoadKubeconfig(options); });
    REQUIRE(e);
    CHECK(e->source() == options.path);
    CHECK(e->field() == "users[admin].client-key");

    e = CatchConfigError([] { (void)LoadString(WithUser("    client-key-data: a2V5\n")); });
    REQUIRE(e);
    CHECK(e->field() == "users[u].client-certificate");
    CHECK_CONTAINS(e->what(), "/cfg/kubeconfig");
  }

  TEST_CASE("unreadable referenced files name the field and the resolved path") {
    auto e = CatchConfigError([] {
      (void)LoadString(WithUser("    client-certificate: c.crt\n    client-key: c.key\n"),
                       "/no/such/dir/config");
    });
    REQUIRE(e);
    CHECK(e->field() == "users[u].client-certificate");
    CHECK_CONTAINS(e->what(), "/no/such/dir/c.crt");

    e = CatchConfigError([] { (void)LoadString(WithUser("    tokenFile: tok\n"), "/x/config"); });
    REQUIRE(e);
    CHECK(e->field() == "users[u].tokenFile");
    CHECK_CONTAINS(e->what(), "/x/tok");

    e = CatchConfigError([] {
      (void)LoadString(
          "current-context: c\nclusters:\n- name: k\n  cluster: {server: 'https://k', "
          "certificate-authority: ca.pem}\ncontexts:\n- name: c\n  context: {cluster: k}\n",
          "/y/config");
    });
    REQUIRE(e);
    CHECK(e->field() == "clusters[k].certificate-authority");
    CHECK_CONTAINS(e->what(), "/y/ca.pem");
  }

  TEST_CASE("an empty tokenFile is an error at load time") {
    TempDir dir;
    dir.Write("token", "  \n");
    auto e = CatchConfigError(
        [&] { (void)LoadString(WithUser("    tokenFile: token\n"), dir.path() + "/config"); });
    REQUIRE(e);
    CHECK(e->field() == "users[u].tokenFile");
    CHECK_CONTAINS(e->what(), "empty");
  }

  TEST_CASE("insecure-skip-tls-verify together with a CA is rejected") {
    auto e = CatchConfigError([] {
      (void)LoadString(
          "current-context: c\nclusters:\n- name: k\n  cluster: {server: 'https://k', "
          "insecure-skip-tls-verify: true, certificate-authority-data: 'Zm9v'}\n"
          "contexts:\n- name: c\n  context: {cluster: k}\n");
    });
    REQUIRE(e);
    CHECK(e->field() == "clusters[k].insecure-skip-tls-verify");
    CHECK_CONTAINS(e->what(), "/cfg/kubeconfig");
  }

  TEST_CASE("structural errors name the field") {
    auto e = CatchConfigError([] { (void)LoadString("clusters: {a: b}\n"); });
    REQUIRE(e);
    CHECK(e->field() == "clusters");
    e = CatchConfigError([] { (void)LoadString("- just\n- a list\n"); });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), "top level");
    e = CatchConfigError([] { (void)LoadString("users:\n- user: {token: t}\n"); });
    REQUIRE(e);
    CHECK(e->field() == "users[0].name");
    e = CatchConfigError([] {
      (void)LoadString(
          "current-context: c\nclusters:\n- name: k\n  cluster: {server: [1]}\n"
          "contexts:\n- name: c\n  context: {cluster: k}\n");
    });
    REQUIRE(e);
    CHECK(e->field() == "clusters[k].server");
    e = CatchConfigError([] {
      (void)LoadString(
          "current-context: c\nclusters:\n- name: k\n  cluster: {server: "
          "'10.0.0.1:6443'}\ncontexts:\n- name: c\n  context: {cluster: k}\n");
    });
    REQUIRE(e);
    CHECK(e->field() == "clusters[k].server");
    CHECK_CONTAINS(e->what(), "https://");
    e = CatchConfigError([] {
      (void)LoadString(
          "current-context: c\nclusters:\n- name: k\n  cluster: {server: 'https://k',"
          " insecure-skip-tls-verify: maybe}\n"
          "contexts:\n- name: c\n  context: {cluster: k}\n");
    });
    REQUIRE(e);
    CHECK(e->field() == "clusters[k].insecure-skip-tls-verify");
    e = CatchConfigError([] {
      (void)LoadString(
          "current-context: c\nclusters:\n- name: k\n  cluster: {}\n"
          "contexts:\n- name: c\n  context: {cluster: k}\n");
    });
    REQUIRE(e);
    CHECK(e->field() == "clusters[k].server");
    e = CatchConfigError([] {
      (void)LoadString(
          "clusters:\n- name: k\n  cluster: {server: 'https://a'}\n"
          "- name: k\n  cluster: {server: 'https://b'}\n");
    });
    REQUIRE(e);
    CHECK(e->field() == "clusters[k]");
    CHECK_CONTAINS(e->what(), "more than once");
  }

  TEST_CASE("entries without a body") {
    // A user without `user:` is an empty (anonymous) user.
    const ClientConfig c = LoadString(
        "current-context: c\nclusters:\n- name: k\n  cluster: {server: 'https://k'}\n"
        "contexts:\n- name: c\n  context: {cluster: k, user: u}\nusers:\n- name: u\n");
    CHECK(c.token.empty());
    CHECK(c.server == "https://k");
    // A cluster without `cluster:` has no server.
    auto e = CatchConfigError([] {
      (void)LoadString(
          "current-context: c\nclusters:\n- name: k\n"
          "contexts:\n- name: c\n  context: {cluster: k}\n");
    });
    REQUIRE(e);
    CHECK(e->field() == "clusters[k].server");
    CHECK_CONTAINS(e->what(), "is missing");
    // A context without `context:` has no cluster.
    e = CatchConfigError([] { (void)LoadString("current-context: c\ncontexts:\n- name: c\n"); });
    REQUIRE(e);
    CHECK(e->field() == "contexts[c].cluster");
  }

  TEST_CASE("token with basic auth is rejected") {
    auto e = CatchConfigError([] {
      (void)LoadString(WithUser("    token: t-SECRET\n    username: u\n    password: p\n"));
    });
    REQUIRE(e);
    CHECK(e->field() == "users[u].username");
    CHECK_NOT_CONTAINS(e->what(), "SECRET");
  }

  TEST_CASE("KUBECONFIG merges files: first value of every key wins") {
    const std::string list = Fixture("merge/first.yaml") + ":" + Fixture("merge/missing.yaml") +
                             "::" + Fixture("merge/second/second.yaml") + ":" +
                             Fixture("merge/third.yaml");
    ScopedEnv kubeconfig("KUBECONFIG", list);
    const ClientConfig c = LoadKubeconfig();
    // current-context comes from second.yaml (first.yaml sets none, third.yaml is later) …
    CHECK(c.context == "shared-ctx");
    // … but the context of that name, and cluster "shared", come from first.yaml.
    CHECK(c.default_namespace == "from-first");
    CHECK(c.server == "https://first.example.com");
    // first.yaml's relative CA path is relative to merge/, second-user's to merge/second/.
    CHECK(c.ca_file == Fixture("certs/ca.crt"));
    CHECK_CONTAINS(c.client_cert_pem, "RklYVFVSRS1DTElFTlQ=");
    CHECK_CONTAINS(c.client_key_pem, "fixture-client-key-SECRET");
    CHECK_CONTAINS(c.source, "first.yaml");
    CHECK_CONTAINS(c.source, "second.yaml");

    // A user defined in both: first.yaml's token wins.
    TempDir dir;
    const std::string ctx = dir.Write(
        "ctx.yaml",
        "current-context: mine\ncontexts:\n- name: mine\n  context: {cluster: only-second, "
        "user: shared-user}\n");
    ScopedEnv kubeconfig2("KUBECONFIG", ctx + ":" + list);
    const ClientConfig d = LoadKubeconfig();
    CHECK(d.token == "first-token-SECRET");
    CHECK(d.server == "https://only-second.example.com");
    KubeconfigOptions third;
    third.context = "third-ctx";
    CHECK(LoadKubeconfig(third).server == "https://only-second.example.com");
  }

  TEST_CASE("KUBECONFIG with only missing files is an error naming the list") {
    ScopedEnv kubeconfig("KUBECONFIG", "/nope/a:/nope/b");
    auto e = CatchConfigError([] { (void)LoadKubeconfig(); });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), "KUBECONFIG=/nope/a:/nope/b");
    CHECK_CONTAINS(e->what(), "none of the listed files");
  }

  TEST_CASE("an empty file in the KUBECONFIG list is an empty config") {
    TempDir dir;
    const std::string empty = dir.Write("empty", "");
    ScopedEnv kubeconfig("KUBECONFIG", empty + ":" + Fixture("full.yaml"));
    CHECK(LoadKubeconfig().context == "prod-admin");
  }

  TEST_CASE("an explicit path beats KUBECONFIG, which beats ~/.kube/config") {
    TempDir home;
    home.Write(".kube/config",
               "current-context: h\nclusters:\n- name: k\n  cluster: {server: 'https://home'}\n"
               "contexts:\n- name: h\n  context: {cluster: k}\n");
    ScopedEnv home_env("HOME", home.path());
    {
      ScopedEnv kubeconfig("KUBECONFIG", std::nullopt);
      const ClientConfig c = LoadKubeconfig();
      CHECK(c.server == "https://home");
      CHECK_CONTAINS(c.source, home.path() + "/.kube/config");
    }
    ScopedEnv kubeconfig("KUBECONFIG", Fixture("full.yaml"));
    CHECK(LoadKubeconfig().server == "https://prod.example.com:6443");
    KubeconfigOptions options;
    options.path = home.path() + "/.kube/config";
    CHECK(LoadKubeconfig(options).server == "https://home");
  }

  TEST_CASE("LoadKubeconfigFromString resolves relative paths against the origin's folder") {
    const ClientConfig c = LoadKubeconfigFromString(
        "current-context: c\nclusters:\n- name: k\n  cluster: {server: 'https://k', "
        "certificate-authority: certs/ca.crt}\ncontexts:\n- name: c\n  context: {cluster: k}\n",
        Fixture("virtual-config"));
    CHECK(c.ca_file == Fixture("certs/ca.crt"));
  }
}

TEST_SUITE("kubeconfig") {
  TEST_CASE("Validate accepts a good config and rejects inconsistent ones") {
    ClientConfig c;
    c.server = "https://10.0.0.1:6443";
    CHECK_NOTHROW(c.Validate());
    c.server = "http://localhost:8080";
    CHECK_NOTHROW(c.Validate());
    c.server = "https://10.0.0.1:6443";  // the cases below check other fields

    auto field_of = [](const ClientConfig& config) {
      auto e = CatchConfigError([&] { config.Validate(); });
      return e ? e->field() : std::string("<no error>");
    };
    ClientConfig bad = c;
    bad.server = "";
    CHECK(field_of(bad) == "server");
    bad.server = "ftp://x";
    CHECK(field_of(bad) == "server");
    bad.server = "10.0.0.1:6443";
    CHECK(field_of(bad) == "server");
    bad.server = "https://";
    CHECK(field_of(bad) == "server");

    bad = c;
    bad.insecure_skip_tls_verify = true;
    CHECK_NOTHROW(bad.Validate());
    bad.ca_pem = "pem";
    CHECK(field_of(bad) == "insecure_skip_tls_verify");
    bad.ca_pem.clear();
    bad.ca_file = "/ca.crt";
    CHECK(field_of(bad) == "insecure_skip_tls_verify");

    bad = c;
    bad.client_cert_pem = "cert";
    CHECK(field_of(bad) == "client_key_pem");
    bad.client_cert_pem.clear();
    bad.client_key_pem = "key-SECRET";
    CHECK(field_of(bad) == "client_cert_pem");

    bad = c;
    bad.token = "t";
    bad.username = "u";
    CHECK(field_of(bad) == "username");

    bad = c;
    bad.exec = ExecConfig{};
    bad.exec->command = "x";
    bad.exec->api_version = "client.authentication.k8s.io/v1alpha1";
    CHECK(field_of(bad) == "exec.api_version");
    bad.exec->api_version = "client.authentication.k8s.io/v1";
    CHECK_NOTHROW(bad.Validate());
    bad.exec->interactive_mode = "Maybe";
    CHECK(field_of(bad) == "exec.interactive_mode");
  }

  TEST_CASE("Validate refuses a bearer token over http:// unless allowed explicitly") {
    ClientConfig c;
    c.server = "http://10.0.0.1:8080";
    CHECK_NOTHROW(c.Validate());  // no token: nothing to leak
    for (int way = 0; way < 3; ++way) {
      ClientConfig t = c;
      t.server = "http://user:pw-SECRET@10.0.0.1:8080";  // never echoed either
      if (way == 0) t.token = "bearer-SECRET";
      if (way == 1) t.token_file = "/var/run/token";
      if (way == 2) {
        t.exec = ExecConfig{};
        t.exec->command = "get-token";
        t.exec->api_version = "client.authentication.k8s.io/v1";
      }
      CAPTURE(way);
      auto e = CatchConfigError([&] { t.Validate(); });
      REQUIRE(e);
      CHECK(e->field() == "server");
      CHECK_CONTAINS(e->what(), "clear text");
      CHECK_NOT_CONTAINS(e->what(), "SECRET");
      t.allow_token_over_http = true;
      CHECK_NOTHROW(t.Validate());
      t.allow_token_over_http = false;
      t.server = "https://10.0.0.1:6443";
      CHECK_NOTHROW(t.Validate());
    }
  }

  TEST_CASE("basic auth over http:// is refused like a token") {
    // kubectl sends it; tfk8s refuses it for the same reason as a token (issue #35): the
    // password travels in clear text. The same opt-in.
    ClientConfig c;
    c.server = "http://10.0.0.1:8080";
    CHECK_NOTHROW(c.Validate());  // no credential: nothing to leak
    for (int way = 0; way < 3; ++way) {
      ClientConfig b = c;
      if (way == 0) b.username = "alice";
      if (way == 0) b.password = "pw-SECRET";
      if (way == 1) b.password = "pw-SECRET";
      if (way == 2) b.server = "http://alice:pw-SECRET@10.0.0.1:8080";  // user info is basic auth
      CAPTURE(way);
      auto e = CatchConfigError([&] { b.Validate(); });
      REQUIRE(e);
      CHECK(e->field() == "server");
      CHECK_CONTAINS(e->what(), "basic-auth password would travel in clear text");
      CHECK_CONTAINS(e->what(), "allow_token_over_http");
      CHECK_NOT_CONTAINS(e->what(), "SECRET");
      b.allow_token_over_http = true;
      CHECK_NOTHROW(b.Validate());
      b.allow_token_over_http = false;
      b.server = way == 2 ? "https://alice:pw-SECRET@10.0.0.1:6443" : "https://10.0.0.1:6443";
      CHECK_NOTHROW(b.Validate());
    }
  }

  TEST_CASE("Validate never echoes URL credentials") {
    ClientConfig c;
    c.server = "ftp://user:pw-SECRET@host";
    auto e = CatchConfigError([&] { c.Validate(); });
    REQUIRE(e);
    CHECK_NOT_CONTAINS(e->what(), "SECRET");
    CHECK_CONTAINS(e->what(), "REDACTED@host");
  }

  TEST_CASE("ToString shows what helps and redacts every secret") {
    ClientConfig c = LoadFull("prod-admin");
    c.token = "bearer-SECRET";
    c.password = "password-SECRET";
    c.username = "bob";
    c.proxy_url = "http://proxyuser:proxy-SECRET@proxy:3128";
    c.exec = LoadFull("prod-exec").exec;
    const std::string s = c.ToString();
    CHECK_CONTAINS(s, "https://prod.example.com:6443");
    CHECK_CONTAINS(s, "prod-admin");
    CHECK_CONTAINS(s, "ml-team");
    CHECK_CONTAINS(s, "kubernetes.internal");
    CHECK_CONTAINS(s, "token: REDACTED");
    CHECK_CONTAINS(s, "password: REDACTED");
    CHECK_CONTAINS(s, "client-key: REDACTED");
    CHECK_CONTAINS(s, "client-certificate: <9 bytes>");
    CHECK_CONTAINS(s, "PLUGIN_SECRET=REDACTED");
    CHECK_CONTAINS(s, "http://REDACTED@proxy:3128");
    CHECK_CONTAINS(s, "bob");
    CHECK_NOT_CONTAINS(s, "bearer-SECRET");
    CHECK_NOT_CONTAINS(s, "password-SECRET");
    CHECK_NOT_CONTAINS(s, "data-key-SECRET");
    CHECK_NOT_CONTAINS(s, "env-value-SECRET");
    CHECK_NOT_CONTAINS(s, "arg-SECRET");
    CHECK_NOT_CONTAINS(s, "proxy-SECRET");

    const ClientConfig files = LoadFull("staging-files");
    const std::string f = files.ToString();
    CHECK_CONTAINS(f, Fixture("certs/ca.crt"));
    CHECK_CONTAINS(f, "insecure-skip-tls-verify: false");
    CHECK_NOT_CONTAINS(f, "fixture-client-key-SECRET");

    const ClientConfig token_file = LoadFull("staging-token-file");
    CHECK_CONTAINS(token_file.ToString(), Fixture("tokens/token"));
    CHECK_CONTAINS(token_file.ToString(), "token: <none>");
  }

  TEST_CASE("LoadDefaultConfig uses KUBECONFIG when it exists") {
    ScopedEnv kubeconfig("KUBECONFIG", Fixture("full.yaml"));
    KubeconfigOptions options;
    options.context = "staging-token";
    CHECK(LoadDefaultConfig(options).token == "static-token-SECRET");
  }

  TEST_CASE("LoadDefaultConfig does not fall back when an existing kubeconfig is broken") {
    ScopedEnv kubeconfig("KUBECONFIG", Fixture("bad/bad-base64.yaml"));
    auto e = CatchConfigError([] { (void)LoadDefaultConfig(); });
    REQUIRE(e);
    CHECK(e->field() == "users[admin].client-key-data");
  }

  TEST_CASE("LoadDefaultConfig lists everything it tried") {
    TempDir home;
    ScopedEnv home_env("HOME", home.path());
    ScopedEnv host("KUBERNETES_SERVICE_HOST", std::nullopt);
    {
      ScopedEnv kubeconfig("KUBECONFIG", std::nullopt);
      auto e = CatchConfigError([] { (void)LoadDefaultConfig(); });
      REQUIRE(e);
      CHECK_CONTAINS(e->what(),
                     "~/.kube/config (" + home.path() + "/.kube/config): does not exist");
      CHECK_CONTAINS(e->what(), "in-cluster");
      CHECK_CONTAINS(e->what(), "KUBERNETES_SERVICE_HOST");
    }
    {
      ScopedEnv kubeconfig("KUBECONFIG", "/nope/a:/nope/b");
      auto e = CatchConfigError([] { (void)LoadDefaultConfig(); });
      REQUIRE(e);
      CHECK_CONTAINS(e->what(), "KUBECONFIG=/nope/a:/nope/b: none of the listed files exists");
      CHECK_CONTAINS(e->what(), "KUBERNETES_SERVICE_HOST");
    }
    {
      // The service variables are set, but this machine has no service account mount.
      ScopedEnv kubeconfig("KUBECONFIG", std::nullopt);
      ScopedEnv host2("KUBERNETES_SERVICE_HOST", "10.0.0.1");
      ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
      if (!fs::exists("/var/run/secrets/kubernetes.io/serviceaccount/token")) {
        auto e = CatchConfigError([] { (void)LoadDefaultConfig(); });
        REQUIRE(e);
        CHECK_CONTAINS(e->what(), "/var/run/secrets/kubernetes.io/serviceaccount/token");
      }
      KubeconfigOptions options;
      options.context = "wanted";
      auto e = CatchConfigError([&] { (void)LoadDefaultConfig(options); });
      REQUIRE(e);
      CHECK_CONTAINS(e->what(), "skipped because context \"wanted\" was requested");
    }
  }

  TEST_CASE("base64 decoding is strict and never quotes its input") {
    using internal::Base64Decode;
    using internal::Base64Encode;
    for (const std::string plain : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
      CHECK(Base64Decode(Base64Encode(plain)) == plain);
    }
    CHECK(Base64Encode("foobar") == "Zm9vYmFy");
    CHECK(Base64Encode("fo") == "Zm8=");
    CHECK(Base64Decode("Zm9v\nYmFy\r\n") == std::string("foobar"));
    CHECK(Base64Encode(std::string("\xff\x00\xfe", 3)) == "/wD+");
    CHECK(Base64Decode("/wD+") == std::string("\xff\x00\xfe", 3));
    std::string why;
    CHECK_FALSE(Base64Decode("Zm9", &why));
    CHECK_CONTAINS(why, "multiple of 4");
    CHECK_FALSE(Base64Decode("Zm9*", &why));
    CHECK_CONTAINS(why, "offset 3");
    CHECK_FALSE(Base64Decode("Z===", &why));
    CHECK_FALSE(Base64Decode("Zm=v", &why));
    CHECK_FALSE(Base64Decode("Zm8=Zm8=", &why));
    CHECK_FALSE(Base64Decode("Zm9v YmFy", &why));
    CHECK_FALSE(Base64Decode("Zm9v-_", &why));  // URL alphabet is not kubeconfig's.
  }
}
