// The Informer's answers to what a watch can say besides events (issue #17): a 410 ERROR event
// inside the stream (relist, report the differences, never watch the expired version again),
// other ERROR events (a 5xx backs off and resumes without a relist, a 403 is a typed error for
// the caller), and a watch refused with 429 (backs off, resumes from the same version, no
// relist). test_informer_backoff.cpp covers short watches, test_retry_semantics.cpp a 410
// status on the watch request with a failing relist and a silent watch.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "fake_transport.hpp"
#include "tfk8s/client.hpp"

using namespace tfk8s;
using tfk8s::testing::FakeTransport;
using tfk8s::testing::Respond;

namespace {

const ResourceType kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};

ClientConfig Config() { return tfk8s::testing::FakeClientConfig(); }

bool IsWatch(const std::string& url) { return tfk8s::testing::IsWatchUrl(url); }

std::string Object(const std::string& name, const std::string& rv) {
  return R"({"metadata":{"name":")" + name + R"(","namespace":"ns","resourceVersion":")" + rv +
         R"("}})";
}
std::string Event(const std::string& type, const std::string& name, const std::string& rv) {
  return R"({"type":")" + type + R"(","object":)" + Object(name, rv) + "}\n";
}
std::string ErrorEvent(int code, const std::string& reason) {
  return R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",)"
         R"("message":"from the test","reason":")" +
         reason + R"(","code":)" + std::to_string(code) + "}}\n";
}
std::string List(const std::string& rv, const std::vector<std::string>& items) {
  std::string out =
      R"({"kind":"ConfigMapList","metadata":{"resourceVersion":")" + rv + R"("},"items":[)";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out + "]}";
}

// "TYPE name@rv" of an event.
std::string Describe(const WatchEvent& ev) {
  return std::string(ToString(ev.type)) + " " + ev.object["metadata"]["name"].get<std::string>() +
         "@" + ev.object["metadata"]["resourceVersion"].get<std::string>();
}

// The next `n` events (each within 5 s), described.
std::vector<std::string> Take(Informer& informer, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    auto ev = informer.Next(std::chrono::seconds(5));
    if (!ev) break;
    out.push_back(Describe(*ev));
  }
  return out;
}

// The resourceVersion= parameter of each watch request, in order.
std::vector<std::string> WatchVersions(const FakeTransport& fake) {
  std::vector<std::string> out;
  for (const auto& r : fake.requests()) {
    if (!IsWatch(r.url)) continue;
    auto at = r.url.find("resourceVersion=");
    if (at == std::string::npos) {
      out.emplace_back();
      continue;
    }
    at += 16;
    out.push_back(r.url.substr(at, r.url.find('&', at) - at));
  }
  return out;
}

}  // namespace

TEST_SUITE("informer") {
  TEST_CASE(
      "a 410 ERROR event in the stream relists, reports the differences, never reuses the "
      "version") {
    std::atomic<int> lists{0};
    std::atomic<int> watches{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (IsWatch(r.url)) {
        if (++watches == 1) {
          return Respond(200, Event("MODIFIED", "a", "8") + ErrorEvent(410, "Expired"));
        }
        return Respond(200, "");  // later watches end at once, without events
      }
      if (++lists == 1) return Respond(200, List("7", {Object("a", "7"), Object("b", "7")}));
      // After the expiry: a changed, b gone, c new.
      return Respond(200, List("12", {Object("a", "11"), Object("c", "12")}));
    });
    Informer informer(internal::ClientOver(Config(), fake), kConfigMaps, "ns");
    CHECK(Take(informer, 3) == std::vector<std::string>{"ADDED a@7", "ADDED b@7", "MODIFIED a@8"});
    // The relist's differences against what was delivered, in the store's order.
    CHECK(Take(informer, 3) ==
          std::vector<std::string>{"MODIFIED a@11", "ADDED c@12", "DELETED b@7"});
    CHECK(informer.relist_count() == 1);
    CHECK(lists == 2);
    CHECK(informer.resource_version() == "12");
    // Let the informer open at least one watch after the relist.
    CHECK_FALSE(informer.Next(std::chrono::milliseconds(1500)).has_value());
    const auto versions = WatchVersions(*fake);
    REQUIRE(versions.size() >= 2);
    CHECK(versions[0] == "7");
    for (std::size_t i = 1; i < versions.size(); ++i) {
      CHECK_MESSAGE(versions[i] == "12", "watch " << i << " from " << versions[i]);
    }
  }

  TEST_CASE("a 5xx ERROR event backs off and resumes from the last version, without a relist") {
    std::atomic<int> lists{0};
    std::atomic<int> watches{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (!IsWatch(r.url)) {
        ++lists;
        return Respond(200, List("7", {}));
      }
      int n = ++watches;
      if (n == 1) return Respond(200, Event("ADDED", "a", "8") + ErrorEvent(500, "InternalError"));
      if (n == 2) return Respond(200, Event("ADDED", "b", "9"));
      return Respond(200, "");
    });
    Informer informer(internal::ClientOver(Config(), fake), kConfigMaps, "ns");
    auto t0 = std::chrono::steady_clock::now();
    CHECK(Take(informer, 2) == std::vector<std::string>{"ADDED a@8", "ADDED b@9"});
    // client-go's first backoff is 0.8 s with jitter in [0.5, 1.5): at least 0.4 s.
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(400));
    CHECK(lists == 1);
    CHECK(informer.relist_count() == 0);
    const auto versions = WatchVersions(*fake);
    REQUIRE(versions.size() >= 2);
    CHECK(versions[0] == "7");
    CHECK(versions[1] == "8");  // resumed after the last delivered event
  }

  TEST_CASE("a 403 ERROR event ends Next with a typed Forbidden") {
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (!IsWatch(r.url)) return Respond(200, List("7", {}));
      return Respond(200, ErrorEvent(403, "Forbidden"));
    });
    Informer informer(internal::ClientOver(Config(), fake), kConfigMaps, "ns");
    CHECK_THROWS_AS(informer.Next(std::chrono::seconds(5)), Forbidden);
  }

  TEST_CASE(
      "a watch refused with 429 backs off and resumes from the same version, without a relist") {
    std::atomic<int> lists{0};
    std::atomic<int> watches{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (!IsWatch(r.url)) {
        ++lists;
        return Respond(200, List("7", {Object("a", "7")}));
      }
      int n = ++watches;
      if (n == 1) {
        // No Retry-After: the connection does not repeat it, the informer backs off.
        return Respond(429, R"({"kind":"Status","reason":"TooManyRequests","code":429})");
      }
      if (n == 2) return Respond(200, Event("MODIFIED", "a", "9"));
      return Respond(200, "");
    });
    Informer informer(internal::ClientOver(Config(), fake), kConfigMaps, "ns");
    CHECK(Take(informer, 1) == std::vector<std::string>{"ADDED a@7"});
    auto t0 = std::chrono::steady_clock::now();
    CHECK(Take(informer, 1) == std::vector<std::string>{"MODIFIED a@9"});
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(400));
    CHECK(lists == 1);
    CHECK(informer.relist_count() == 0);
    const auto versions = WatchVersions(*fake);
    REQUIRE(versions.size() >= 2);
    CHECK(versions[0] == "7");
    CHECK(versions[1] == "7");
  }
}
