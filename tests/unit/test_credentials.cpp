// CredentialProvider: static credentials, token file rotation, exec credential plugins (real
// shell scripts in a temp dir), plus the ExecCredential parser and RFC 3339 times.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <latch>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "auth/credentials.hpp"
#include "auth/exec_plugin.hpp"
#include "config_test_util.hpp"
#include "tfk8s/config.hpp"
#include "tfk8s/error.hpp"

using namespace tfk8s;
using namespace tfk8s::internal;
using namespace std::chrono_literals;
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

constexpr const char* kV1 = "client.authentication.k8s.io/v1";
constexpr const char* kV1beta1 = "client.authentication.k8s.io/v1beta1";

/// A settable clock shared with the provider under test.
class FakeClock {
 public:
  explicit FakeClock(std::chrono::system_clock::time_point start) : now_(start) {}
  Clock AsClock() {
    return [this] {
      std::lock_guard<std::mutex> lock(mutex_);
      return now_;
    };
  }
  void Advance(std::chrono::system_clock::duration d) {
    std::lock_guard<std::mutex> lock(mutex_);
    now_ += d;
  }

 private:
  std::mutex mutex_;
  std::chrono::system_clock::time_point now_;
};

const auto kT0 = std::chrono::sys_days(std::chrono::year(2030) / 1 / 1);

/// A config whose exec plugin is `command`; the plugin gets RUNS=<dir>/runs and DIR=<dir>.
ClientConfig ExecConfigFor(const TempDir& dir, const std::string& command,
                           const std::string& api_version = kV1) {
  ClientConfig c;
  c.server = "https://k.example.com:6443";
  c.exec = ExecConfig{};
  c.exec->api_version = api_version;
  c.exec->command = command;
  c.exec->interactive_mode = "Never";
  c.exec->env = {{"RUNS", dir.File("runs")}, {"DIR", dir.path()}};
  return c;
}

ExecPluginOptions TestExecOptions() {
  ExecPluginOptions o;
  o.timeout = 10s;
  o.stdin_is_terminal = false;
  return o;
}

/// Body of a plugin that counts its runs and returns token "tok-<run>" (plus `extra` JSON).
std::string CountingPlugin(const std::string& api_version, const std::string& extra = "") {
  return "echo run >> \"$RUNS\"\n"
         "n=$(wc -l < \"$RUNS\" | tr -d ' ')\n"
         "cat <<EOF\n"
         "{\"apiVersion\":\"" +
         api_version +
         "\",\"kind\":\"ExecCredential\","
         "\"status\":{\"token\":\"tok-$n\"" +
         extra +
         "}}\n"
         "EOF\n";
}

}  // namespace

TEST_SUITE("credentials") {
  TEST_CASE("static token, client certificate and basic auth are returned as they are") {
    ClientConfig c;
    c.server = "https://k";
    c.token = "static-token";
    c.client_cert_pem = "cert";
    c.client_key_pem = "key";
    auto provider = MakeCredentialProvider(c);
    Credentials creds = provider->Get();
    CHECK(creds.bearer_token == "static-token");
    CHECK(creds.client_cert_pem == "cert");
    CHECK(creds.client_key_pem == "key");
    const auto generation = creds.generation;
    provider->OnUnauthorized(creds);
    CHECK(provider->Get().generation == generation);

    ClientConfig basic;
    basic.username = "alice";
    basic.password = "pw";
    creds = MakeCredentialProvider(basic)->Get();
    CHECK(creds.username == "alice");
    CHECK(creds.password == "pw");
    CHECK(creds.bearer_token.empty());
  }

  TEST_CASE("token file: trimmed, re-read after the refresh period, generation follows") {
    TempDir dir;
    const std::string file = dir.Write("token", "  tok1 \n\t");
    FakeClock clock(kT0);
    ClientConfig c;
    c.token_file = file;
    c.token_file_refresh = 60s;
    c.client_cert_pem = "cert";
    c.client_key_pem = "key";
    auto provider = MakeCredentialProvider(c, clock.AsClock());
    Credentials first = provider->Get();
    CHECK(first.bearer_token == "tok1");
    CHECK(first.client_cert_pem == "cert");

    dir.Write("token", "tok2\n");
    clock.Advance(59s);
    CHECK(provider->Get().bearer_token == "tok1");  // Not re-read yet.
    clock.Advance(1s);
    const Credentials second = provider->Get();
    CHECK(second.bearer_token == "tok2");
    CHECK(second.generation > first.generation);

    // Same content re-read: same generation.
    clock.Advance(60s);
    CHECK(provider->Get().generation == second.generation);
  }

  TEST_CASE("token file: re-read right after a 401 for the current token only") {
    TempDir dir;
    const std::string file = dir.Write("token", "tok1");
    FakeClock clock(kT0);
    ClientConfig c;
    c.token_file = file;
    auto provider = MakeCredentialProvider(c, clock.AsClock());
    const Credentials first = provider->Get();
    dir.Write("token", "tok2");
    provider->OnUnauthorized(first);
    const Credentials second = provider->Get();
    CHECK(second.bearer_token == "tok2");

    dir.Write("token", "tok3");
    provider->OnUnauthorized(first);  // Stale: that token was already replaced.
    CHECK(provider->Get().bearer_token == "tok2");
    provider->OnUnauthorized(second);
    CHECK(provider->Get().bearer_token == "tok3");
  }

  TEST_CASE("token file: a failed re-read keeps the last good token") {
    TempDir dir;
    const std::string file = dir.Write("token", "good-token");
    FakeClock clock(kT0);
    ClientConfig c;
    c.token_file = file;
    auto provider = MakeCredentialProvider(c, clock.AsClock());
    CHECK(provider->Get().bearer_token == "good-token");

    fs::remove(file);
    clock.Advance(61s);
    Credentials kept;
    CHECK_NOTHROW(kept = provider->Get());
    CHECK(kept.bearer_token == "good-token");
    provider->OnUnauthorized(kept);
    CHECK(provider->Get().bearer_token == "good-token");

    dir.Write("token", "   ");  // Empty counts as a failed read too.
    CHECK(provider->Get().bearer_token == "good-token");

    dir.Write("token", "new-token");  // Recovered: the next Get() reads it.
    CHECK(provider->Get().bearer_token == "new-token");
  }

  TEST_CASE("token file: an error naming the file when there never was a good token") {
    TempDir dir;
    ClientConfig c;
    c.token_file = dir.File("missing-token");
    auto provider = MakeCredentialProvider(c);
    auto e = CatchConfigError([&] { (void)provider->Get(); });
    REQUIRE(e);
    CHECK(e->source() == c.token_file);
    CHECK_CONTAINS(e->what(), c.token_file);
    CHECK_CONTAINS(e->what(), "No such file");

    dir.Write("empty", "\n");
    c.token_file = dir.File("empty");
    e = CatchConfigError([&] { (void)MakeCredentialProvider(c)->Get(); });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), "empty");
  }

  TEST_CASE("token file: a static token is the fallback until the file is readable") {
    TempDir dir;
    ClientConfig c;
    c.token = "static";
    c.token_file = dir.File("token");
    auto provider = MakeCredentialProvider(c);
    CHECK(provider->Get().bearer_token == "static");
    dir.Write("token", "from-file");
    CHECK(provider->Get().bearer_token == "from-file");
  }

  TEST_CASE("exec v1: token, arguments, environment and stdin") {
    TempDir dir;
    ScopedEnv inherited("TFK8S_TEST_INHERITED", "inherited");
    ScopedEnv overridden("TFK8S_TEST_OVERRIDDEN", "parent");
    const std::string plugin = dir.Script(
        "plugin",
        "wc -c > \"$DIR/stdin-bytes\"\n"
        "echo 'plugin diagnostics go to stderr' >&2\n"
        "cat <<EOF\n"
        "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
        "\"status\":{\"token\":\"$1|$2|$TFK8S_TEST_INHERITED|$TFK8S_TEST_OVERRIDDEN|$EXTRA\"}}\n"
        "EOF\n");
    ClientConfig c = ExecConfigFor(dir, plugin);
    c.exec->args = {"first arg", "--second"};
    c.exec->env.emplace_back("EXTRA", "extra value");
    c.exec->env.emplace_back("TFK8S_TEST_OVERRIDDEN", "child");
    c.exec->interactive_mode = "IfAvailable";  // No terminal: stdin is /dev/null.
    auto provider = MakeCredentialProvider(c, {}, TestExecOptions());
    const Credentials creds = provider->Get();
    CHECK(creds.bearer_token == "first arg|--second|inherited|child|extra value");
    CHECK(creds.generation >= 1);
    CHECK(dir.Read("stdin-bytes").find('0') != std::string::npos);
  }

  TEST_CASE("exec v1beta1 and a client certificate reply") {
    TempDir dir;
    const std::string plugin = dir.Script(
        "plugin",
        "cat <<'EOF'\n"
        "{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\","
        "\"status\":{\"clientCertificateData\":\"-----BEGIN CERTIFICATE-----\\nC\\n\","
        "\"clientKeyData\":\"-----BEGIN PRIVATE KEY-----\\nK\\n\"}}\n"
        "EOF\n");
    ClientConfig c = ExecConfigFor(dir, plugin, kV1beta1);
    c.client_cert_pem = "config-cert";
    c.client_key_pem = "config-key";
    const Credentials creds = MakeCredentialProvider(c, {}, TestExecOptions())->Get();
    CHECK(creds.bearer_token.empty());
    CHECK(creds.client_cert_pem == "-----BEGIN CERTIFICATE-----\nC\n");
    CHECK(creds.client_key_pem == "-----BEGIN PRIVATE KEY-----\nK\n");
  }

  TEST_CASE("exec: a token-only reply keeps the config's client certificate") {
    TempDir dir;
    ClientConfig c = ExecConfigFor(dir, dir.Script("plugin", CountingPlugin(kV1beta1)), kV1beta1);
    c.client_cert_pem = "config-cert";
    c.client_key_pem = "config-key";
    const Credentials creds = MakeCredentialProvider(c, {}, TestExecOptions())->Get();
    CHECK(creds.bearer_token == "tok-1");
    CHECK(creds.client_cert_pem == "config-cert");
    CHECK(creds.client_key_pem == "config-key");
  }

  TEST_CASE("exec: cached until shortly before expirationTimestamp, then re-run") {
    TempDir dir;
    const std::string plugin = dir.Script(
        "plugin", CountingPlugin(kV1, ",\"expirationTimestamp\":\"2030-01-01T01:00:00Z\""));
    FakeClock clock(kT0);
    auto provider =
        MakeCredentialProvider(ExecConfigFor(dir, plugin), clock.AsClock(), TestExecOptions());
    const Credentials first = provider->Get();
    CHECK(first.bearer_token == "tok-1");
    clock.Advance(30min);
    CHECK(provider->Get().bearer_token == "tok-1");
    clock.Advance(29min + 45s);  // 00:59:45: still more than the margin before expiry.
    CHECK(provider->Get().bearer_token == "tok-1");
    CHECK(dir.Lines("runs") == 1);
    clock.Advance(10s);  // 00:59:55: inside the refresh margin.
    const Credentials second = provider->Get();
    CHECK(second.bearer_token == "tok-2");
    CHECK(second.generation > first.generation);
    clock.Advance(1h);  // Long expired.
    CHECK(provider->Get().bearer_token == "tok-3");
    CHECK(dir.Lines("runs") == 3);
  }

  TEST_CASE("exec: without an expiration the credential is cached until a 401") {
    TempDir dir;
    FakeClock clock(kT0);
    auto provider =
        MakeCredentialProvider(ExecConfigFor(dir, dir.Script("plugin", CountingPlugin(kV1))),
                               clock.AsClock(), TestExecOptions());
    const Credentials first = provider->Get();
    clock.Advance(24h * 365);
    CHECK(provider->Get().bearer_token == "tok-1");
    provider->OnUnauthorized(first);
    const Credentials second = provider->Get();
    CHECK(second.bearer_token == "tok-2");
    provider->OnUnauthorized(first);  // Stale generation: no re-run.
    CHECK(provider->Get().bearer_token == "tok-2");
    CHECK(dir.Lines("runs") == 2);
  }

  TEST_CASE("exec: 8 concurrent 401s for the same credentials re-run the plugin once") {
    TempDir dir;
    // The sleep keeps the plugin busy while the other threads arrive.
    const std::string plugin = dir.Script("plugin", "sleep 0.2\n" + CountingPlugin(kV1));
    auto provider = MakeCredentialProvider(ExecConfigFor(dir, plugin), {}, TestExecOptions());
    const Credentials failed = provider->Get();
    REQUIRE(dir.Lines("runs") == 1);

    constexpr int kThreads = 8;
    std::latch start(kThreads);
    std::vector<Credentials> results(kThreads);
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        try {
          provider->OnUnauthorized(failed);
          results[i] = provider->Get();
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    }
    for (auto& t : threads) {
      t.join();
    }
    for (int i = 0; i < kThreads; ++i) {
      CHECK(errors[i].empty());
      CHECK(results[i].bearer_token == "tok-2");
      CHECK(results[i].generation == results[0].generation);
    }
    CHECK(dir.Lines("runs") == 2);
  }

  TEST_CASE("exec: a missing command reports the installHint") {
    TempDir dir;
    ClientConfig c = ExecConfigFor(dir, "tfk8s-no-such-credential-plugin");
    c.exec->install_hint = "Install it with: apt-get install tfk8s-helper";
    auto e =
        CatchConfigError([&] { (void)MakeCredentialProvider(c, {}, TestExecOptions())->Get(); });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), "tfk8s-no-such-credential-plugin");
    CHECK_CONTAINS(e->what(), "not found in PATH");
    CHECK_CONTAINS(e->what(), "Install it with: apt-get install tfk8s-helper");

    c.exec->command = dir.File("missing/plugin");
    e = CatchConfigError([&] { (void)MakeCredentialProvider(c, {}, TestExecOptions())->Get(); });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), dir.File("missing/plugin"));
    CHECK_CONTAINS(e->what(), "apt-get install tfk8s-helper");
  }

  TEST_CASE("exec: a bare command is found in PATH") {
    TempDir dir;
    dir.Script("tfk8s-test-plugin", CountingPlugin(kV1));
    const char* old_path = ::getenv("PATH");  // NOLINT(concurrency-mt-unsafe)
    ScopedEnv path("PATH", dir.path() + ":" + (old_path != nullptr ? old_path : "/usr/bin:/bin"));
    const auto creds =
        MakeCredentialProvider(ExecConfigFor(dir, "tfk8s-test-plugin"), {}, TestExecOptions())
            ->Get();
    CHECK(creds.bearer_token == "tok-1");
  }

  TEST_CASE("exec: a non-zero exit reports the code, never the output") {
    TempDir dir;
    const std::string plugin = dir.Script("plugin",
                                          "echo '{\"status\":{\"token\":\"leaked-SECRET\"}}'\n"
                                          "echo 'plugin: login required' >&2\n"
                                          "exit 3\n");
    auto e = CatchConfigError([&] {
      (void)MakeCredentialProvider(ExecConfigFor(dir, plugin), {}, TestExecOptions())->Get();
    });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), "exited with code 3");
    CHECK_CONTAINS(e->what(), plugin);
    CHECK_NOT_CONTAINS(e->what(), "SECRET");
  }

  TEST_CASE("exec: killed by a signal, and killed after the timeout") {
    TempDir dir;
    auto e = CatchConfigError([&] {
      (void)MakeCredentialProvider(ExecConfigFor(dir, dir.Script("plugin", "kill -9 $$\n")), {},
                                   TestExecOptions())
          ->Get();
    });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), "signal 9");

    ExecPluginOptions options = TestExecOptions();
    options.timeout = 300ms;
    const auto started = std::chrono::steady_clock::now();
    e = CatchConfigError([&] {
      (void)MakeCredentialProvider(ExecConfigFor(dir, dir.Script("slow", "sleep 30\n")), {},
                                   options)
          ->Get();
    });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), "did not finish within 300 ms");
    CHECK(std::chrono::steady_clock::now() - started < 5s);
  }

  TEST_CASE("exec: invalid replies") {
    TempDir dir;
    const auto error_for = [&](const std::string& reply, const char* api = kV1) {
      const std::string plugin = dir.Script("plugin", "cat <<'EOF'\n" + reply + "\nEOF\n");
      auto e = CatchConfigError([&] {
        (void)MakeCredentialProvider(ExecConfigFor(dir, plugin, api), {}, TestExecOptions())->Get();
      });
      return e ? std::string(e->what()) : std::string("<no error>");
    };
    std::string what = error_for(R"({"apiVersion": "x", "status": {"token": "bad-json-SECRET")");
    CHECK_CONTAINS(what, "not valid JSON");
    CHECK_NOT_CONTAINS(what, "SECRET");

    what =
        error_for(R"({"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",)"
                  R"("status":{"token":"t-SECRET"}})");
    CHECK_CONTAINS(what, "client.authentication.k8s.io/v1beta1");
    CHECK_CONTAINS(what, "asks for \"client.authentication.k8s.io/v1\"");
    CHECK_NOT_CONTAINS(what, "SECRET");

    what = error_for(R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"})");
    CHECK_CONTAINS(what, "status");

    what = error_for(R"({"apiVersion":"client.authentication.k8s.io/v1","status":{}})");
    CHECK_CONTAINS(what, "neither a token nor a client certificate");

    what = error_for(R"({"apiVersion":"client.authentication.k8s.io/v1",)"
                     R"("status":{"clientCertificateData":"c"}})");
    CHECK_CONTAINS(what, "not both");

    what = error_for(R"({"apiVersion":"client.authentication.k8s.io/v1","status":{"token":7}})");
    CHECK_CONTAINS(what, "status.token");

    what = error_for(
        R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Pod","status":{"token":"t"}})");
    CHECK_CONTAINS(what, "ExecCredential");

    what = error_for(R"({"apiVersion":"client.authentication.k8s.io/v1",)"
                     R"("status":{"token":"t-SECRET","expirationTimestamp":"tomorrow"}})");
    CHECK_CONTAINS(what, "status.expirationTimestamp");
    CHECK_CONTAINS(what, "RFC 3339");
    CHECK_NOT_CONTAINS(what, "SECRET");

    what = error_for("[1, 2]");
    CHECK_CONTAINS(what, "not an ExecCredential");
  }

  TEST_CASE("exec: KUBERNETES_EXEC_INFO with and without provideClusterInfo") {
    TempDir dir;
    const std::string plugin =
        dir.Script("plugin", "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$DIR/info.json\"\n" +
                                 CountingPlugin(kV1));
    ClientConfig c = ExecConfigFor(dir, plugin);
    c.ca_pem = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
    c.tls_server_name = "kubernetes.internal";
    c.exec->provide_cluster_info = true;
    (void)MakeCredentialProvider(c, {}, TestExecOptions())->Get();
    nlohmann::json info = nlohmann::json::parse(dir.Read("info.json"));
    CHECK(info["apiVersion"] == kV1);
    CHECK(info["kind"] == "ExecCredential");
    CHECK(info["spec"]["interactive"] == false);
    CHECK(info["spec"]["cluster"]["server"] == "https://k.example.com:6443");
    CHECK(info["spec"]["cluster"]["tls-server-name"] == "kubernetes.internal");
    CHECK(info["spec"]["cluster"]["certificate-authority-data"] ==
          "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K");
    CHECK_FALSE(info["spec"]["cluster"].contains("insecure-skip-tls-verify"));

    c.ca_pem.clear();
    c.insecure_skip_tls_verify = true;
    (void)MakeCredentialProvider(c, {}, TestExecOptions())->Get();
    info = nlohmann::json::parse(dir.Read("info.json"));
    CHECK(info["spec"]["cluster"]["insecure-skip-tls-verify"] == true);
    CHECK_FALSE(info["spec"]["cluster"].contains("certificate-authority-data"));

    c.exec->provide_cluster_info = false;
    c.exec->api_version = kV1beta1;
    c.exec->interactive_mode = "IfAvailable";
    const std::string beta =
        dir.Script("beta", "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$DIR/info.json\"\n" +
                               CountingPlugin(kV1beta1));
    c.exec->command = beta;
    ExecPluginOptions terminal = TestExecOptions();
    terminal.stdin_is_terminal = true;
    (void)MakeCredentialProvider(c, {}, terminal)->Get();
    info = nlohmann::json::parse(dir.Read("info.json"));
    CHECK(info["apiVersion"] == kV1beta1);
    CHECK(info["spec"]["interactive"] == true);
    CHECK_FALSE(info["spec"].contains("cluster"));
  }

  TEST_CASE("exec: interactiveMode Always without a terminal fails before running") {
    TempDir dir;
    ClientConfig c = ExecConfigFor(dir, dir.Script("plugin", CountingPlugin(kV1)));
    c.exec->interactive_mode = "Always";
    auto e =
        CatchConfigError([&] { (void)MakeCredentialProvider(c, {}, TestExecOptions())->Get(); });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), "not a terminal");
    CHECK(dir.Lines("runs") == 0);

    // Never: not interactive even with a terminal.
    c.exec->interactive_mode = "Never";
    const std::string plugin =
        dir.Script("never", "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$DIR/info.json\"\n" +
                                CountingPlugin(kV1));
    c.exec->command = plugin;
    ExecPluginOptions terminal = TestExecOptions();
    terminal.stdin_is_terminal = true;
    (void)MakeCredentialProvider(c, {}, terminal)->Get();
    CHECK(nlohmann::json::parse(dir.Read("info.json"))["spec"]["interactive"] == false);
  }

  TEST_CASE("exec: a failed refresh is reported and retried on the next Get") {
    TempDir dir;
    // Succeeds on the first run only while the "ok" file exists.
    const std::string plugin =
        dir.Script("plugin", "[ -f \"$DIR/ok\" ] || exit 5\n" + CountingPlugin(kV1));
    dir.Write("ok", "");
    auto provider = MakeCredentialProvider(ExecConfigFor(dir, plugin), {}, TestExecOptions());
    const Credentials first = provider->Get();
    fs::remove(dir.File("ok"));
    provider->OnUnauthorized(first);
    auto e = CatchConfigError([&] { (void)provider->Get(); });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), "code 5");
    dir.Write("ok", "");
    CHECK(provider->Get().bearer_token == "tok-2");
  }

  TEST_CASE("ParseRfc3339") {
    using std::chrono::system_clock;
    CHECK(ParseRfc3339("2030-01-01T00:00:00Z") == system_clock::time_point(kT0));
    CHECK(ParseRfc3339("2030-01-01t00:00:00z") == system_clock::time_point(kT0));
    CHECK(ParseRfc3339("2030-01-01T00:00:00.5Z") == system_clock::time_point(kT0) + 500ms);
    CHECK(ParseRfc3339("2030-01-01T02:00:00+02:00") == system_clock::time_point(kT0));
    CHECK(ParseRfc3339("2029-12-31T23:30:00-00:30") == system_clock::time_point(kT0));
    CHECK(ParseRfc3339("2024-02-29T12:00:00.123456789Z").has_value());
    CHECK_FALSE(ParseRfc3339("2030-13-01T00:00:00Z"));
    CHECK_FALSE(ParseRfc3339("2030-02-30T00:00:00Z"));
    CHECK_FALSE(ParseRfc3339("2030-01-01 00:00:00Z"));
    CHECK_FALSE(ParseRfc3339("2030-01-01T00:00:00"));
    CHECK_FALSE(ParseRfc3339("2030-01-01T00:00:00+0200"));
    CHECK_FALSE(ParseRfc3339("2030-01-01T24:00:00Z"));
    CHECK_FALSE(ParseRfc3339("2030-01-01T00:00:00.Z"));
    CHECK_FALSE(ParseRfc3339("2030-01-01T00:00:00Zjunk"));
    CHECK_FALSE(ParseRfc3339(""));
  }
}
