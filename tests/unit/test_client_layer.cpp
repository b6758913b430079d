// The client layer over a fake transport: paths, queries, headers, retries, 401 refresh,
// watch framing, rate limiting. No server.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "client/connection.hpp"
#include "fake_transport.hpp"
#include "tfk8s/client.hpp"

using namespace tfk8s;
using tfk8s::testing::FakeTransport;
using tfk8s::testing::HasHeader;
using tfk8s::testing::Respond;

namespace {

ClientConfig TestConfig() {
  ClientConfig c;
  c.server = "https://127.0.0.1:6443";
  c.token = "s3cr3t-token";
  c.default_namespace = "team-a";
  c.rate_limit.qps = 0;  // unlimited: tests measure behaviour, not time
  c.retry.initial_backoff = std::chrono::milliseconds(1);
  c.retry.max_backoff = std::chrono::milliseconds(5);
  return c;
}

const ResourceType kPods{"", "v1", "Pod", "pods", true};
const ResourceType kDeployments{"apps", "v1", "Deployment", "deployments", true};
const ResourceType kNodes{"", "v1", "Node", "nodes", false};

std::string Path(const internal::HttpRequest& r) {
  return r.url.substr(std::string("https://127.0.0.1:6443").size());
}

}  // namespace

TEST_SUITE("client_layer") {
  TEST_CASE("resource paths") {
    CHECK(kPods.CollectionPath("ns") == "/api/v1/namespaces/ns/pods");
    CHECK(kPods.CollectionPath("") == "/api/v1/pods");
    CHECK(kDeployments.ObjectPath("ns", "web", "scale") ==
          "/apis/apps/v1/namespaces/ns/deployments/web/scale");
    CHECK(kNodes.ObjectPath("ignored", "n1") == "/api/v1/nodes/n1");
    CHECK(kDeployments.ApiVersion() == "apps/v1");
    CHECK(kPods.ApiVersion() == "v1");
  }

  TEST_CASE("query encoding") {
    internal::Query q;
    q.Add("labelSelector", "app=web,tier in (a,b)").Add("limit", "5");
    CHECK(q.str() == "?labelSelector=app%3Dweb%2Ctier%20in%20%28a%2Cb%29&limit=5");
  }

  TEST_CASE("get and list build the right requests, token sent as bearer") {
    auto fake = std::make_shared<FakeTransport>([](const internal::HttpRequest&) {
      return Respond(200, R"({"kind":"PodList","metadata":{"resourceVersion":"7"},"items":[]})");
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    client.Get(kPods, "", "web-0");
    ListOptions o;
    o.label_selector = "a=b";
    o.field_selector = "spec.nodeName=n1";
    o.limit = 10;
    o.resource_version = "0";
    client.List(kPods, "x", o);
    auto reqs = fake->requests();
    REQUIRE(reqs.size() == 2);
    CHECK(Path(reqs[0]) == "/api/v1/namespaces/team-a/pods/web-0");  // default namespace
    CHECK(reqs[0].method == "GET");
    CHECK(HasHeader(reqs[0], "Authorization: Bearer s3cr3t-token"));
    CHECK(Path(reqs[1]) ==
          "/api/v1/namespaces/x/pods?labelSelector=a%3Db&fieldSelector=spec.nodeName%3Dn1"
          "&limit=10&resourceVersion=0&timeout=60s");  // the client's request timeout
    // The caller's own timeoutSeconds replaces it.
    o.timeout_seconds = 5;
    client.List(kPods, "x", o);
    CHECK(Path(fake->requests().back()) ==
          "/api/v1/namespaces/x/pods?labelSelector=a%3Db&fieldSelector=spec.nodeName%3Dn1"
          "&limit=10&resourceVersion=0&timeoutSeconds=5");
  }

  TEST_CASE("ListAll follows continue tokens and keeps the first page's resourceVersion") {
    std::atomic<int> calls{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      int n = calls++;
      if (n == 0) {
        CHECK(r.url.find("continue=") == std::string::npos);
        return Respond(
            200,
            R"({"metadata":{"resourceVersion":"100","continue":"tok1"},"items":[{"metadata":{"name":"a"}}]})");
      }
      CHECK(r.url.find("continue=tok1") != std::string::npos);
      return Respond(
          200, R"({"metadata":{"resourceVersion":"101"},"items":[{"metadata":{"name":"b"}}]})");
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    auto all = client.ListAll(kPods, "ns", {}, 1);
    CHECK(all["items"].size() == 2);
    CHECK(all["metadata"]["resourceVersion"] == "100");
    CHECK_FALSE(all["metadata"].contains("continue"));
  }

  TEST_CASE("ListAll with each_item: every item of a page, before the next page is asked for") {
    std::atomic<int> calls{0};
    std::vector<std::string> log;  // requests and items, in the order they happen
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      int n = calls++;
      log.push_back("GET page " + std::to_string(n + 1));
      if (n == 0) {
        CHECK(r.url.find("continue=") == std::string::npos);
        return Respond(200, R"({"metadata":{"resourceVersion":"100","continue":"tok1"},)"
                            R"("items":[{"metadata":{"name":"a"},"big":"x"},)"
                            R"({"metadata":{"name":"b"},"big":"y"}]})");
      }
      return Respond(200, R"({"metadata":{"resourceVersion":"101"},)"
                          R"("items":[{"metadata":{"name":"c"},"big":"z"}]})");
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    Json all = client.ListAll(kPods, "ns", {}, 2, [&](Json& item) {
      log.push_back("item " + item["metadata"]["name"].get<std::string>());
      item.erase("big");  // what the caller keeps is what the list holds
    });
    CHECK(log ==
          std::vector<std::string>{"GET page 1", "item a", "item b", "GET page 2", "item c"});
    REQUIRE(all["items"].size() == 3);
    for (const auto& item : all["items"]) CHECK_FALSE(item.contains("big"));
    CHECK(all["items"][2]["metadata"]["name"] == "c");
    CHECK(all["metadata"]["resourceVersion"] == "100");
    CHECK_FALSE(all["metadata"].contains("continue"));
  }

  TEST_CASE("ListText and ListPages hand over the server's text, only page 1 has the version") {
    std::atomic<int> calls{0};
    const std::string page1 =
        R"({"metadata":{"resourceVersion":"7","continue":"t\u00e9"},"items":[ {"x":1.50} ]})";
    const std::string page2 = R"({"metadata":{},"items":[]})";
    std::vector<std::string> urls;
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      urls.push_back(r.url);
      return Respond(200, calls++ < 2 ? page1 : page2);  // ListText, then two pages
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    ListOptions o;
    o.resource_version = "5";
    o.resource_version_match = "NotOlderThan";
    CHECK(client.ListText(kPods, "ns", o) == page1);  // byte for byte, not re-serialized
    std::vector<std::string> seen;
    client.ListPages(kPods, "ns", o, 2, [&](std::string text) {
      seen.push_back(text);
      return seen.size() == 1 ? std::string("t\xc3\xa9") : std::string();
    });
    REQUIRE(seen.size() == 2);
    CHECK(seen[0] == page1);
    CHECK(seen[1] == page2);
    REQUIRE(urls.size() == 3);
    CHECK(urls[1].find("limit=2") != std::string::npos);
    CHECK(urls[1].find("resourceVersion=5") != std::string::npos);
    CHECK(urls[2].find("continue=t%C3%A9") != std::string::npos);
    CHECK(urls[2].find("resourceVersion") == std::string::npos);
    CHECK(urls[2].find("resourceVersionMatch") == std::string::npos);
  }

  TEST_CASE("ListText raises the server's error like List") {
    auto fake = std::make_shared<FakeTransport>([](const internal::HttpRequest&) {
      return Respond(
          403,
          R"({"kind":"Status","status":"Failure","reason":"Forbidden","code":403,"message":"pods is forbidden"})");
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    CHECK_THROWS_AS(client.ListText(kPods, "ns"), Forbidden);
    CHECK_THROWS_AS(client.ListPages(kPods, "ns", {}, 0, [](std::string) { return std::string(); }),
                    Forbidden);
  }

  TEST_CASE("writes: create, replace, patch types, delete options, dry run") {
    auto fake = std::make_shared<FakeTransport>(
        [](const internal::HttpRequest&) { return Respond(200, "{}"); });
    Client client = internal::ClientOver(TestConfig(), fake);
    Json cm = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata", {{"name", "c"}, {"namespace", "from-object"}}}};
    client.Create({"", "v1", "ConfigMap", "configmaps", true}, "", cm, {true, "me"});
    client.Replace({"", "v1", "ConfigMap", "configmaps", true}, "", cm);
    client.Patch(kDeployments, "ns", "web", PatchType::kStrategicMerge,
                 {{"spec", {{"replicas", 2}}}});
    client.Patch(kDeployments, "ns", "web", PatchType::kJson,
                 Json::array({{{"op", "replace"}, {"path", "/spec/replicas"}, {"value", 3}}}), {},
                 "scale");
    DeleteOptions d;
    d.propagation_policy = "Foreground";
    d.grace_period_seconds = 0;
    d.precondition_uid = "u1";
    client.Delete(kDeployments, "ns", "web", d);
    auto reqs = fake->requests();
    REQUIRE(reqs.size() == 5);
    CHECK(reqs[0].method == "POST");
    CHECK(Path(reqs[0]) == "/api/v1/namespaces/from-object/configmaps?dryRun=All&fieldManager=me");
    CHECK(reqs[1].method == "PUT");
    CHECK(Path(reqs[1]) == "/api/v1/namespaces/from-object/configmaps/c");
    CHECK(HasHeader(reqs[2], "Content-Type: application/strategic-merge-patch+json"));
    CHECK(HasHeader(reqs[3], "Content-Type: application/json-patch+json"));
    CHECK(Path(reqs[3]) == "/apis/apps/v1/namespaces/ns/deployments/web/scale");
    CHECK(reqs[4].method == "DELETE");
    auto body = Json::parse(reqs[4].body);
    CHECK(body["propagationPolicy"] == "Foreground");
    CHECK(body["gracePeriodSeconds"] == 0);
    CHECK(body["preconditions"]["uid"] == "u1");
  }

  TEST_CASE("discovery: a slow group version never holds up kinds already known") {
    std::mutex mu;
    std::condition_variable cv;
    bool release = false;
    std::atomic<int> batch_fetches{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (Path(r) == "/api/v1") {
        return Respond(200, R"({"resources":[{"name":"pods","namespaced":true,"kind":"Pod"}]})");
      }
      if (Path(r) == "/apis/batch/v1") {
        ++batch_fetches;
        std::unique_lock lock(mu);
        cv.wait_for(lock, std::chrono::seconds(10), [&] { return release; });
        return Respond(200, R"({"resources":[{"name":"jobs","namespaced":true,"kind":"Job"}]})");
      }
      return Respond(404, R"({"kind":"Status","reason":"NotFound","code":404})");
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    CHECK(client.Resolve("v1", "Pod").plural == "pods");  // cached from here on
    std::vector<std::thread> waiting;
    std::vector<std::string> plurals(3);
    for (int i = 0; i < 3; ++i) {
      waiting.emplace_back([&, i] { plurals[i] = client.Resolve("batch/v1", "Job").plural; });
    }
    while (batch_fetches == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // The batch/v1 fetch is stuck in the server; a known kind resolves meanwhile.
    CHECK(client.Resolve("v1", "Pod").plural == "pods");
    {
      std::lock_guard lock(mu);
      release = true;
    }
    cv.notify_all();
    for (auto& t : waiting) t.join();
    for (const auto& p : plurals) CHECK(p == "jobs");
    CHECK(batch_fetches == 1);  // the three callers shared one request
  }

  TEST_CASE("discovery: a failed fetch reaches every waiter and is not cached") {
    std::atomic<int> fetches{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest&) {
      return ++fetches == 1
                 ? Respond(403, R"({"kind":"Status","reason":"Forbidden","code":403})")
                 : Respond(200,
                           R"({"resources":[{"name":"jobs","namespaced":true,"kind":"Job"}]})");
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    CHECK_THROWS_AS(client.Resolve("batch/v1", "Job"), Forbidden);
    CHECK(client.Resolve("batch/v1", "Job").plural == "jobs");
    CHECK(client.Resolve("batch/v1", "Job").plural == "jobs");
    CHECK(fetches == 2);
  }

  TEST_CASE("apply resolves the kind by discovery once and sends apply-patch+yaml") {
    std::atomic<int> discovery{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (Path(r) == "/apis/apps/v1") {
        ++discovery;
        return Respond(200, R"({"kind":"APIResourceList","groupVersion":"apps/v1","resources":[
          {"name":"deployments","namespaced":true,"kind":"Deployment"},
          {"name":"deployments/status","namespaced":true,"kind":"Deployment"}]})");
      }
      return Respond(200, r.body);
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    std::vector<Json> objects;
    for (int i = 0; i < 20; ++i) {
      objects.push_back({{"apiVersion", "apps/v1"},
                         {"kind", "Deployment"},
                         {"metadata", {{"name", "d" + std::to_string(i)}}}});
    }
    ApplyOptions o;
    o.force = true;
    auto results = client.ApplyAll(objects, o, 8);
    REQUIRE(results.size() == 20);
    for (std::size_t i = 0; i < results.size(); ++i) {
      CHECK(results[i].ok());
      CHECK(results[i].object["metadata"]["name"] == "d" + std::to_string(i));
      CHECK(results[i].object["metadata"]["namespace"] == "team-a");
    }
    CHECK(discovery == 1);
    bool saw_apply = false;
    for (const auto& r : fake->requests()) {
      if (r.method != "PATCH") continue;
      saw_apply = true;
      CHECK(HasHeader(r, "Content-Type: application/apply-patch+yaml"));
      CHECK(r.url.find("fieldManager=tfk8s&force=true") != std::string::npos);
    }
    CHECK(saw_apply);
  }

  TEST_CASE("ApplyAll reports failures per object") {
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (Path(r) == "/api/v1") {
        return Respond(
            200, R"({"resources":[{"name":"configmaps","namespaced":true,"kind":"ConfigMap"}]})");
      }
      if (r.url.find("/bad") != std::string::npos) {
        return Respond(
            422,
            R"({"kind":"Status","status":"Failure","message":"bad is invalid","reason":"Invalid","code":422})");
      }
      return Respond(200, r.body);
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    std::vector<Json> objects = {
        {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "good"}}}},
        {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "bad"}}}},
        {{"apiVersion", "v1"}, {"kind", "Nope"}, {"metadata", {{"name", "x"}}}},
        {{"apiVersion", "v1"}, {"kind", "ConfigMap"}},
    };
    auto results = client.ApplyAll(objects);
    CHECK(results[0].ok());
    CHECK_THROWS_AS(std::rethrow_exception(results[1].error), Invalid);
    CHECK_THROWS_AS(std::rethrow_exception(results[2].error), NotFound);
    CHECK_THROWS_AS(std::rethrow_exception(results[3].error), ValidationError);
    CHECK(results[1].error_message().find("bad is invalid") != std::string::npos);
  }

  TEST_CASE("429 is retried for writes, honouring Retry-After") {
    std::atomic<int> calls{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest&) {
      if (calls++ < 2) return Respond(429, "{}", {{"retry-after", "0"}});
      return Respond(201, R"({"metadata":{"name":"c"}})");
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    auto out = client.Create({"", "v1", "ConfigMap", "configmaps", true}, "ns",
                             {{"metadata", {{"name", "c"}}}});
    CHECK(out["metadata"]["name"] == "c");
    CHECK(calls == 3);
  }

  TEST_CASE("5xx: resent only when the server sends Retry-After (then for any verb)") {
    std::atomic<int> calls{0};
    std::map<std::string, std::string> headers;
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest&) {
      ++calls;
      return Respond(503, "unavailable", headers);
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    CHECK_THROWS_AS(client.Get(kPods, "ns", "p"), ServerError);
    CHECK(calls == 1);  // client-go: no Retry-After, no retry
    calls = 0;
    headers = {{"retry-after", "0"}};
    CHECK_THROWS_AS(client.Get(kPods, "ns", "p"), ServerError);
    CHECK(calls == 11);  // default max_attempts
    calls = 0;
    CHECK_THROWS_AS(client.Create(kPods, "ns", {{"metadata", {{"name", "p"}}}}), ServerError);
    CHECK(calls == 11);
  }

  TEST_CASE("connection failures: reads retried, writes never, refused never") {
    std::atomic<int> calls{0};
    bool sent = true;
    auto fake = std::make_shared<FakeTransport>(
        [&](const internal::HttpRequest&) -> internal::HttpResponse {
          ++calls;
          throw TransportError("connection reset", sent);
        });
    Client client = internal::ClientOver(TestConfig(), fake);
    CHECK_THROWS_AS(client.Get(kPods, "ns", "p"), TransportError);
    CHECK(calls == 11);
    calls = 0;
    CHECK_THROWS_AS(client.Create(kPods, "ns", {{"metadata", {{"name", "p"}}}}), TransportError);
    CHECK(calls == 1);
    calls = 0;
    sent = false;  // e.g. connection refused: client-go does not retry it either
    CHECK_THROWS_AS(client.Create(kPods, "ns", {{"metadata", {{"name", "p"}}}}), TransportError);
    CHECK(calls == 1);
    calls = 0;
    CHECK_THROWS_AS(client.Get(kPods, "ns", "p"), TransportError);
    CHECK(calls == 1);
  }

  TEST_CASE("on_request sees every attempt: method, status, stream, and failures as status 0") {
    std::mutex mu;
    std::vector<std::tuple<std::string, int, bool>> seen;
    ClientConfig config = TestConfig();
    config.on_request = [&](const RequestObservation& o) {
      std::lock_guard<std::mutex> lock(mu);
      CHECK(o.latency.count() >= 0);
      seen.emplace_back(std::string(o.method), o.status, o.stream);
    };
    std::atomic<int> calls{0};
    auto fake = std::make_shared<FakeTransport>(
        [&](const internal::HttpRequest& r) -> internal::HttpResponse {
          const int n = calls++;
          if (n == 0) return Respond(429, "{}", {{"retry-after", "0"}});
          if (n == 1) return Respond(201, R"({"metadata":{"name":"c"}})");
          if (n == 2) throw TransportError("connection reset", true);
          if (r.url.find("watch=true") != std::string::npos) return Respond(200, "");
          return Respond(200, R"({"metadata":{"name":"p"}})");
        });
    Client client = internal::ClientOver(config, fake);
    client.Create({"", "v1", "ConfigMap", "configmaps", true}, "ns",
                  {{"metadata", {{"name", "c"}}}});
    client.Get(kPods, "ns", "p");  // a reset read is retried: two attempts
    auto w = client.Watch(kPods, "ns", WatchOptions{});
    CHECK_FALSE(w.Next(std::chrono::seconds(1)));
    std::lock_guard<std::mutex> lock(mu);
    const std::vector<std::tuple<std::string, int, bool>> want = {{"POST", 429, false},
                                                                  {"POST", 201, false},
                                                                  {"GET", 0, false},
                                                                  {"GET", 200, false},
                                                                  {"GET", 200, true}};
    CHECK(seen == want);
  }

  TEST_CASE("errors about cluster-scoped calls name no namespace") {
    auto fake = std::make_shared<FakeTransport>([](const internal::HttpRequest&) {
      return Respond(403, R"({"kind":"Status","status":"Failure","reason":"Forbidden",
        "message":"nodes is forbidden","code":403})");
    });
    Client client = internal::ClientOver(TestConfig(), fake);  // default namespace team-a
    try {
      client.List(kNodes, "team-a");
      FAIL("not refused");
    } catch (const Forbidden& e) {
      const std::string what = e.what();
      CHECK(what.find("list nodes") != std::string::npos);
      CHECK(what.find("team-a") == std::string::npos);
    }
    CHECK(Path(fake->requests().back()) == "/api/v1/nodes?timeout=60s");
  }

  TEST_CASE("TLS errors are not retried") {
    std::atomic<int> calls{0};
    auto fake = std::make_shared<FakeTransport>(
        [&](const internal::HttpRequest&) -> internal::HttpResponse {
          ++calls;
          throw TlsError("TLS: certificate verify failed");
        });
    Client client = internal::ClientOver(TestConfig(), fake);
    CHECK_THROWS_AS(client.Get(kPods, "ns", "p"), TlsError);
    CHECK(calls == 1);
  }

  TEST_CASE("a static token that gets 401 is reported, not looped") {
    std::atomic<int> calls{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest&) {
      ++calls;
      return Respond(
          401, R"({"kind":"Status","message":"Unauthorized","reason":"Unauthorized","code":401})");
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    CHECK_THROWS_AS(client.Get(kPods, "ns", "p"), Unauthorized);
    CHECK(calls == 1);
  }

  TEST_CASE("watch stream decodes events from the body") {
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      CHECK(r.url.find("watch=true") != std::string::npos);
      CHECK(r.url.find("allowWatchBookmarks=true") != std::string::npos);
      CHECK(r.url.find("resourceVersion=5") != std::string::npos);
      return Respond(
          200,
          "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"6\"}}"
          "}\n"
          "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n");
    });
    Client client = internal::ClientOver(TestConfig(), fake);
    WatchOptions o;
    o.resource_version = "5";
    auto w = client.Watch(kPods, "ns", o);
    auto e1 = w.Next(std::chrono::seconds(1));
    REQUIRE(e1);
    CHECK(e1->type == WatchEventType::kAdded);
    auto e2 = w.Next(std::chrono::seconds(1));
    REQUIRE(e2);
    CHECK(e2->type == WatchEventType::kBookmark);
    CHECK_FALSE(w.Next(std::chrono::seconds(1)));
    CHECK(w.ended());
  }

  TEST_CASE("watch framing: split events and several per chunk") {
    internal::WatchDecoder d;
    std::string a = R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})";
    std::string b = R"({"type":"DELETED","object":{"metadata":{"name":"b"}}})";
    CHECK(d.Feed(a.substr(0, 10)).empty());
    CHECK(d.pending() == 10);
    auto ev = d.Feed(a.substr(10) + "\n" + b + "\n" + a.substr(0, 3));
    REQUIRE(ev.size() == 2);
    CHECK(ev[0].type == WatchEventType::kAdded);
    CHECK(ev[0].object["metadata"]["name"] == "a");
    CHECK(ev[1].type == WatchEventType::kDeleted);
    CHECK(d.pending() == 3);
    // Byte-by-byte delivery gives the same events.
    internal::WatchDecoder slow;
    std::string all = a + "\r\n\n" + b + "\n";
    int count = 0;
    for (char c : all) count += static_cast<int>(slow.Feed(std::string_view(&c, 1)).size());
    CHECK(count == 2);
    internal::WatchDecoder bad;
    CHECK_THROWS_AS(bad.Feed("not json\n"), TransportError);
  }

  TEST_CASE("retry policy decisions") {
    RetryPolicy p;
    RetryPolicy::Attempt a;
    a.http_code = 429;
    a.retry_after_seconds = 2;
    CHECK(p.Decide(a, 0.5) == std::chrono::milliseconds(2000));
    a.retry_after_seconds = 60;  // not capped: the call's deadline bounds it
    CHECK(p.Decide(a, 0.5) == std::chrono::seconds(60));
    a.number = p.max_attempts;
    CHECK_FALSE(p.Decide(a, 0.5));
    RetryPolicy::Attempt s;
    s.http_code = 500;
    CHECK_FALSE(p.Decide(s, 0.5));  // no Retry-After
    s.idempotent = true;
    CHECK_FALSE(p.Decide(s, 0.5));  // not for reads either
    s.http_code = 0;                // no response: reads are repeated with backoff
    auto w1 = p.Decide(s, 0.5);
    s.number = 2;
    auto w2 = p.Decide(s, 0.5);
    REQUIRE(w1);
    REQUIRE(w2);
    CHECK(*w1 == p.initial_backoff);  // jitter factor 1.0 at random 0.5
    CHECK(*w2 == 2 * p.initial_backoff);
    s.number = 1;
    CHECK(*p.Decide(s, 0.0) == std::chrono::milliseconds(800));   // -20 %
    CHECK(*p.Decide(s, 1.0) == std::chrono::milliseconds(1200));  // +20 %
    RetryPolicy::Attempt four;
    four.http_code = 404;
    four.idempotent = true;
    CHECK_FALSE(p.Decide(four, 0.5));
  }

  TEST_CASE("rate limiter: burst then qps") {
    internal::RateLimiter limiter({10.0, 3});
    auto t0 = std::chrono::steady_clock::now();
    CHECK(limiter.Reserve(t0).count() == 0);
    CHECK(limiter.Reserve(t0).count() == 0);
    CHECK(limiter.Reserve(t0).count() == 0);
    auto wait = limiter.Reserve(t0);  // 4th in the same instant: 1/qps
    CHECK(wait == std::chrono::milliseconds(100));
    // One second later the bucket is full again (capped at burst).
    auto t1 = t0 + std::chrono::seconds(1);
    CHECK(limiter.Reserve(t1).count() == 0);
    internal::RateLimiter off({0, 0});
    for (int i = 0; i < 100; ++i) CHECK(off.Reserve(t0).count() == 0);
  }
}
