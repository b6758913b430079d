// In-cluster configuration from a fake service account directory and fake service variables.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "auth/credentials.hpp"
#include "config_test_util.hpp"
#include "tfk8s/config.hpp"
#include "tfk8s/error.hpp"

using namespace tfk8s;
namespace fs = std::filesystem;
using tfk8s::testing::CatchConfigError;
using tfk8s::testing::ScopedEnv;
using tfk8s::testing::TempDir;

#define CHECK_CONTAINS(haystack, needle)                                 \
  CHECK_MESSAGE(std::string(haystack).find(needle) != std::string::npos, \
                "\"" << (haystack) << "\" does not contain \"" << (needle) << "\"")

namespace {

/// A fake service account mount: token, ca.crt and namespace.
class ServiceAccountDir : public TempDir {
 public:
  ServiceAccountDir() {
    Write("token", "sa-token-SECRET\n");
    Write("ca.crt", "-----BEGIN CERTIFICATE-----\nIN-CLUSTER-CA\n-----END CERTIFICATE-----\n");
    Write("namespace", "team-a\n");
  }
};

InClusterOptions Options(const ServiceAccountDir& dir, const std::string& host,
                         const std::string& port = "443") {
  InClusterOptions options;
  options.service_account_dir = dir.path();
  options.use_env_override = true;
  if (!host.empty()) {
    options.env_override["KUBERNETES_SERVICE_HOST"] = host;
  }
  if (!port.empty()) {
    options.env_override["KUBERNETES_SERVICE_PORT"] = port;
  }
  return options;
}

}  // namespace

TEST_SUITE("in_cluster") {
  TEST_CASE("IPv4 service address, token file, CA and namespace") {
    ServiceAccountDir dir;
    const ClientConfig c = LoadInClusterConfig(Options(dir, "10.96.0.1"));
    CHECK(c.server == "https://10.96.0.1:443");
    CHECK(c.token_file == dir.path() + "/token");
    CHECK(c.token.empty());  // Read through the provider, so rotation is picked up.
    CHECK(c.ca_file == dir.path() + "/ca.crt");
    CHECK_CONTAINS(c.ca_pem, "IN-CLUSTER-CA");
    CHECK(c.default_namespace == "team-a");
    CHECK_CONTAINS(c.source, "in-cluster");
    CHECK_NOTHROW(c.Validate());
    CHECK(c.ToString().find("SECRET") == std::string::npos);
  }

  TEST_CASE("IPv6 service address is bracketed") {
    ServiceAccountDir dir;
    CHECK(LoadInClusterConfig(Options(dir, "fd00::1")).server == "https://[fd00::1]:443");
    CHECK(LoadInClusterConfig(Options(dir, "fd00:10:96::1", "6443")).server ==
          "https://[fd00:10:96::1]:6443");
  }

  TEST_CASE("the real environment is used without an override") {
    ServiceAccountDir dir;
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "192.168.1.10");
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "8443");
    InClusterOptions options;
    options.service_account_dir = dir.path();
    CHECK(LoadInClusterConfig(options).server == "https://192.168.1.10:8443");
  }

  TEST_CASE("missing or bad service variables") {
    ServiceAccountDir dir;
    auto e = CatchConfigError([&] { (void)LoadInClusterConfig(Options(dir, "")); });
    REQUIRE(e);
    CHECK(e->field() == "KUBERNETES_SERVICE_HOST");
    e = CatchConfigError([&] { (void)LoadInClusterConfig(Options(dir, "10.0.0.1", "")); });
    REQUIRE(e);
    CHECK(e->field() == "KUBERNETES_SERVICE_PORT");
    e = CatchConfigError([&] { (void)LoadInClusterConfig(Options(dir, "10.0.0.1", "https")); });
    REQUIRE(e);
    CHECK(e->field() == "KUBERNETES_SERVICE_PORT");
    e = CatchConfigError([&] { (void)LoadInClusterConfig(Options(dir, "10.0.0.1", "70000")); });
    REQUIRE(e);
  }

  TEST_CASE("a missing or empty token fails clearly, naming the file") {
    ServiceAccountDir dir;
    dir.Remove("token");
    auto e = CatchConfigError([&] { (void)LoadInClusterConfig(Options(dir, "10.0.0.1")); });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), dir.path() + "/token");
    CHECK_CONTAINS(e->what(), "No such file");
    dir.Write("token", " \n");
    e = CatchConfigError([&] { (void)LoadInClusterConfig(Options(dir, "10.0.0.1")); });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), "empty");
  }

  TEST_CASE("a missing CA fails, naming the file") {
    ServiceAccountDir dir;
    dir.Remove("ca.crt");
    auto e = CatchConfigError([&] { (void)LoadInClusterConfig(Options(dir, "10.0.0.1")); });
    REQUIRE(e);
    CHECK_CONTAINS(e->what(), dir.path() + "/ca.crt");
  }

  TEST_CASE("without a namespace file the namespace is default") {
    ServiceAccountDir dir;
    dir.Remove("namespace");
    CHECK(LoadInClusterConfig(Options(dir, "10.0.0.1")).default_namespace == "default");
  }

  TEST_CASE("the service account token is re-read after a 401 (rotation)") {
    ServiceAccountDir dir;
    const ClientConfig c = LoadInClusterConfig(Options(dir, "10.0.0.1"));
    auto provider = internal::MakeCredentialProvider(c);
    const internal::Credentials first = provider->Get();
    CHECK(first.bearer_token == "sa-token-SECRET");
    dir.Write("token", "rotated-token\n");
    provider->OnUnauthorized(first);
    CHECK(provider->Get().bearer_token == "rotated-token");
  }
}
