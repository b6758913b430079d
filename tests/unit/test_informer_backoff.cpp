// The Informer's failure logic against a scripted loopback server: a watch the server ends at
// once, without an event, counts as a failure and is reopened after a growing backoff (not in a
// hot loop); a watch that delivers events does not.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>

#include "scripted_server.hpp"
#include "tfk8s/client.hpp"

using namespace tfk8s;
using tfk8s::testing::LoopbackConfig;
using tfk8s::testing::ScriptedServer;

namespace {

const ResourceType kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};
const std::string kEmptyList =
    R"({"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]})";

bool IsWatch(const ScriptedServer::Request& r) {
  return r.target.find("watch=true") != std::string::npos ||
         r.target.find("watch=1") != std::string::npos;
}

}  // namespace

TEST_SUITE("informer") {
  TEST_CASE("a watch the server ends at once is reopened after a backoff, not in a hot loop") {
    std::atomic<int> watches{0};
    ScriptedServer server([&](const ScriptedServer::Request& r, int) {
      if (!IsWatch(r)) return ScriptedServer::Response(200, kEmptyList);
      ++watches;
      return ScriptedServer::Response(200, "");  // a clean, immediate end of the stream
    });
    Informer informer(Client(LoopbackConfig(server.url())), kConfigMaps, "ns");
    auto t0 = std::chrono::steady_clock::now();
    CHECK_FALSE(informer.Next(std::chrono::milliseconds(3000)).has_value());
    auto elapsed = std::chrono::steady_clock::now() - t0;
    CHECK(elapsed >= std::chrono::milliseconds(2900));
    // Waits of 0.4-1.2 s, then 0.8-2.4 s, …: at most 4 watches fit in 3 s (a slow machine only
    // lowers the count). Without the backoff a loopback server sees hundreds.
    const int opened = watches;
    CHECK(opened >= 2);  // it does reconnect
    CHECK(opened <= 4);
    // The resumed watches start from the listed version.
    for (const auto& r : server.seen()) {
      if (IsWatch(r)) CHECK(r.target.find("resourceVersion=7") != std::string::npos);
    }
  }

  TEST_CASE("a watch that delivers events before it ends is reopened at once") {
    std::atomic<int> watches{0};
    ScriptedServer server([&](const ScriptedServer::Request& r, int) {
      if (!IsWatch(r)) return ScriptedServer::Response(200, kEmptyList);
      int n = ++watches;
      // One ADDED event per watch, then the server ends it (like a watch timeout).
      std::string event = R"({"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap",)"
                          R"("metadata":{"name":"cm-)" +
                          std::to_string(n) + R"(","namespace":"ns","resourceVersion":")" +
                          std::to_string(7 + n) + R"("}}})" + "\n";
      return ScriptedServer::Response(200, event);
    });
    Informer informer(Client(LoopbackConfig(server.url())), kConfigMaps, "ns");
    int events = 0;
    auto t0 = std::chrono::steady_clock::now();
    auto deadline = t0 + std::chrono::seconds(20);
    while (events < 5 && std::chrono::steady_clock::now() < deadline) {
      if (informer.Next(std::chrono::milliseconds(500))) ++events;
    }
    CHECK(events == 5);
    // Five watches, each healthy: no backoff between them. With backoffs the four reconnects
    // would wait at least 0.4 + 0.8 + 1.6 + 3.2 = 6 s; five loopback requests take far less.
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    CHECK(informer.Snapshot().size() == 5);
  }
}
