// The real curl transport and client retry loop against a scripted loopback server: 429 with
// Retry-After, 5xx, dropped connections, non-JSON bodies, timeouts and the proxy setting.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "scripted_server.hpp"
#include "tfk8s/client.hpp"

using namespace tfk8s;
using tfk8s::testing::ScriptedServer;

namespace {

ClientConfig ConfigFor(const std::string& server) {
  ClientConfig c = tfk8s::testing::LoopbackConfig(server);
  c.retry.initial_backoff = std::chrono::milliseconds(10);
  c.retry.max_backoff = std::chrono::milliseconds(2000);
  return c;
}

const ResourceType kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};
const Json kObject = {{"metadata", {{"name", "x"}}}};

}  // namespace

TEST_SUITE("transport_faults") {
  TEST_CASE("429 with Retry-After: the write waits and is sent again") {
    ScriptedServer server([](const ScriptedServer::Request&, int n) {
      if (n <= 2)
        return ScriptedServer::Response(429, R"({"kind":"Status","code":429})",
                                        "Retry-After: 1\r\n");
      return ScriptedServer::Response(201, R"({"metadata":{"name":"x"}})");
    });
    Client c(ConfigFor(server.url()));
    auto t0 = std::chrono::steady_clock::now();
    auto out = c.Create(kConfigMaps, "ns", kObject);
    CHECK(out["metadata"]["name"] == "x");
    CHECK(server.requests() == 3);
    // Two waits of at least one second each (a lower bound: a slow machine only adds to it).
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(1900));
    auto seen = server.seen();
    CHECK(seen[0].body == seen[2].body);  // the same body each time
    CHECK(seen[0].head.find("Authorization: Bearer t0ken") != std::string::npos);
  }

  TEST_CASE("compression is asked for unless disable_compression is set") {
    ScriptedServer server([](const ScriptedServer::Request&, int) {
      return ScriptedServer::Response(200, R"({"items":[]})");
    });
    ClientConfig cfg = ConfigFor(server.url());
    Client(cfg).List(kConfigMaps, "ns");
    cfg.disable_compression = true;
    Client(cfg).List(kConfigMaps, "ns");
    auto seen = server.seen();
    REQUIRE(seen.size() == 2);
    CHECK(seen[0].head.find("Accept-Encoding: ") != std::string::npos);
    CHECK(seen[0].head.find("gzip") != std::string::npos);
    CHECK(seen[1].head.find("Accept-Encoding") == std::string::npos);
  }

  TEST_CASE("500: repeated only with Retry-After, then for reads and writes alike") {
    ScriptedServer server([](const ScriptedServer::Request& r, int) {
      std::string extra = r.target.find("again") != std::string::npos ? "Retry-After: 0\r\n" : "";
      return ScriptedServer::Response(500, R"({"kind":"Status","message":"boom","code":500})",
                                      extra);
    });
    ClientConfig cfg = ConfigFor(server.url());
    cfg.retry.max_attempts = 3;
    Client c(cfg);
    CHECK_THROWS_AS(c.Get(kConfigMaps, "ns", "x"), ServerError);
    CHECK(server.requests() == 1);
    CHECK_THROWS_AS(c.Create(kConfigMaps, "ns", kObject), ServerError);
    CHECK(server.requests() == 2);
    try {
      c.Get(kConfigMaps, "ns", "again");
      FAIL("expected ServerError");
    } catch (const ServerError& e) {
      CHECK(e.attempts() == 3);
      CHECK(e.server_message() == "boom");
      CHECK(std::string(e.what()).find("(after 3 attempts)") != std::string::npos);
    }
    CHECK(server.requests() == 5);
  }

  TEST_CASE("a dropped connection: reads retried, a write that reached the server is not") {
    ScriptedServer server([](const ScriptedServer::Request& r, int n) -> std::string {
      if (r.method == "GET" && n >= 3)
        return ScriptedServer::Response(200, R"({"metadata":{"name":"x"}})");
      return "";  // read the request, then hang up without answering
    });
    Client c(ConfigFor(server.url()));
    CHECK(c.Get(kConfigMaps, "ns", "x")["metadata"]["name"] == "x");
    CHECK(server.requests() == 3);
    try {
      c.Create(kConfigMaps, "ns", kObject);
      FAIL("expected a TransportError");
    } catch (const TransportError& e) {
      CHECK(e.sent_request());
    }
    CHECK(server.requests() == 4);  // exactly once
  }

  TEST_CASE("non-JSON error bodies and timeouts") {
    ScriptedServer server([](const ScriptedServer::Request& r, int) -> std::string {
      if (r.target.find("slow") != std::string::npos) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        return ScriptedServer::Response(200, "{}");
      }
      return "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: 19\r\n"
             "Connection: close\r\n\r\n<h1>bad gateway</h1>";
    });
    ClientConfig cfg = ConfigFor(server.url());
    cfg.retry.max_attempts = 1;
    cfg.request_timeout = std::chrono::milliseconds(300);
    Client c(cfg);
    try {
      c.Create(kConfigMaps, "ns", kObject);
      FAIL("expected ServerError");
    } catch (const ServerError& e) {
      CHECK(e.http_code() == 502);
      CHECK(e.server_message().find("bad gateway") != std::string::npos);
    }
    try {
      c.Get(kConfigMaps, "ns", "slow");
      FAIL("expected a timeout");
    } catch (const TransportError& e) {
      CHECK(e.kind() == ErrorKind::kTimeout);
    }
  }

  TEST_CASE("proxy-url: requests go through the configured proxy") {
    ScriptedServer proxy([](const ScriptedServer::Request&, int) {
      return ScriptedServer::Response(200, R"({"major":"1","minor":"20"})");
    });
    ClientConfig cfg = ConfigFor("http://apiserver.invalid:8080");
    cfg.proxy_url = proxy.url();
    Client c(cfg);
    CHECK(c.ServerVersion()["minor"] == "20");
    REQUIRE(proxy.requests() == 1);
    // A forward proxy receives the absolute URL of the real server.
    CHECK(proxy.seen()[0].target == "http://apiserver.invalid:8080/version");
  }
}
