// Every authentication method and TLS check against the real local cluster.
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cluster.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

int CountLines(const std::string& path) {
  std::string text = ReadFile(path);
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_SUITE("auth") {
  TEST_CASE("static token, client certificate, token file and exec plugin all work") {
    for (const char* context :
         {"tfk8s-local", "tfk8s-local-cert", "tfk8s-local-tokenfile", "tfk8s-local-exec"}) {
      CAPTURE(context);
      Client c(ConfigFor(context));
      auto list = c.List(kNamespaces, "", {});
      CHECK(list["items"].size() >= 3);
    }
  }

  TEST_CASE("the client certificate is the identity the server sees") {
    Client c(ConfigFor("tfk8s-local-cert"));
    // SelfSubjectAccessReview answers for whoever is authenticated.
    Json review = {{"apiVersion", "authorization.k8s.io/v1"},
                   {"kind", "SelfSubjectAccessReview"},
                   {"spec", {{"resourceAttributes", {{"verb", "create"}, {"resource", "pods"}}}}}};
    auto out = c.Create({"authorization.k8s.io", "v1", "SelfSubjectAccessReview",
                         "selfsubjectaccessreviews", false},
                        "", review);
    CHECK(out["status"]["allowed"] == true);
    CHECK(ConfigFor("tfk8s-local-cert").client_key_pem.find("PRIVATE KEY") != std::string::npos);
  }

  TEST_CASE("exec plugin: cached across many concurrent requests") {
    std::string count_file = ClusterDir() + "/exec-count-" + UniqueName("t");
    setenv("TFK8S_EXEC_COUNT_FILE", count_file.c_str(), 1);
    {
      Client c(ConfigFor("tfk8s-local-exec"));
      std::vector<std::thread> threads;
      std::atomic<int> ok{0};
      for (int i = 0; i < 16; ++i) {
        threads.emplace_back([&] {
          c.List(kNamespaces, "", {});
          ++ok;
        });
      }
      for (auto& t : threads) t.join();
      CHECK(ok == 16);
    }
    unsetenv("TFK8S_EXEC_COUNT_FILE");
    CHECK(CountLines(count_file) == 1);
    std::filesystem::remove(count_file);
  }

  TEST_CASE("a wrong CA fails with a TLS error") {
    ClientConfig cfg = ConfigFor();
    cfg.ca_pem = ReadFile(ClusterDir() + "/pki/other-ca.crt");
    REQUIRE(cfg.ca_pem.find("BEGIN CERTIFICATE") != std::string::npos);
    Client c(cfg);
    CHECK_THROWS_AS(c.ServerVersion(), TlsError);
  }

  TEST_CASE("tls-server-name: the certificate is checked against the override") {
    ClientConfig good = ConfigFor();
    good.tls_server_name = "kubernetes.default.svc";  // a SAN of the serving certificate
    CHECK(Client(good).ServerVersion()["major"] == "1");
    ClientConfig bad = ConfigFor();
    bad.tls_server_name = "not-a-san.example";
    CHECK_THROWS_AS(Client(bad).ServerVersion(), TlsError);
  }

  TEST_CASE("insecure-skip-tls-verify talks to the server without a CA") {
    ClientConfig cfg = ConfigFor();
    cfg.ca_pem.clear();
    cfg.ca_file.clear();
    cfg.insecure_skip_tls_verify = true;
    CHECK(Client(cfg).ServerVersion()["major"] == "1");
  }

  TEST_CASE("a bad token is Unauthorized; a user without rights gets Forbidden") {
    ClientConfig cfg = ConfigFor();
    cfg.token = "definitely-not-valid";
    CHECK_THROWS_AS(Client(cfg).List(kNamespaces, "", {}), Unauthorized);

    Client limited(ConfigFor("tfk8s-local-limited"));
    CHECK(limited.List(kPods, "default", {})["kind"] == "PodList");
    try {
      limited.Create(kConfigMaps, "default", ConfigMap(UniqueName("nope")));
      FAIL("expected Forbidden");
    } catch (const QuotaExceeded&) {
      FAIL("an RBAC refusal is not a quota error");
    } catch (const Forbidden& e) {
      CHECK(e.kind() == ErrorKind::kForbidden);
      CHECK(e.http_code() == 403);
      CHECK(std::string(e.what()).find("limited") != std::string::npos);
    }
  }

  TEST_CASE("token file: a rotated token is picked up after a 401") {
    // Copy the kubeconfig's token file setup: write our own file with a bad token first.
    namespace fs = std::filesystem;
    fs::path dir = fs::path(ClusterDir()) / ("rotate-" + UniqueName("t"));
    fs::create_directories(dir);
    fs::path token_path = dir / "token";
    std::string good = ConfigFor().token;
    { std::ofstream(token_path) << "stale-token\n"; }
    ClientConfig cfg = ConfigFor();
    cfg.token.clear();
    cfg.token_file = token_path.string();
    cfg.token_file_refresh = std::chrono::seconds(3600);  // only a 401 makes it re-read
    Client c(cfg);
    CHECK_THROWS_AS(c.List(kNamespaces, "", {}), Unauthorized);
    { std::ofstream(token_path) << good << "\n"; }
    CHECK(c.List(kNamespaces, "", {})["kind"] == "NamespaceList");
    fs::remove_all(dir);
  }

  TEST_CASE("connection refused is a TransportError that names the server") {
    ClientConfig cfg = ConfigFor();
    cfg.server = "https://127.0.0.1:1";
    cfg.retry.max_attempts = 2;
    cfg.retry.initial_backoff = std::chrono::milliseconds(10);
    try {
      Client(cfg).ServerVersion();
      FAIL("expected TransportError");
    } catch (const TlsError&) {
      FAIL("not a TLS error");
    } catch (const TransportError& e) {
      CHECK(std::string(e.what()).find("127.0.0.1:1") != std::string::npos);
      CHECK_FALSE(e.sent_request());
    }
  }

  TEST_CASE("secrets never appear in printed configs or errors") {
    ClientConfig cfg = ConfigFor();
    REQUIRE_FALSE(cfg.token.empty());
    CHECK(cfg.ToString().find(cfg.token) == std::string::npos);
    CHECK(cfg.ToString().find("REDACTED") != std::string::npos);
    ClientConfig cert = ConfigFor("tfk8s-local-cert");
    CHECK(cert.ToString().find("PRIVATE KEY") == std::string::npos);
    ClientConfig bad = ConfigFor();
    bad.token = "super-secret-value-123";
    try {
      Client(bad).List(kNamespaces, "", {});
    } catch (const std::exception& e) {
      CHECK(std::string(e.what()).find("super-secret-value-123") == std::string::npos);
    }
  }
}
