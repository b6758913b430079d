// Watches, informers and pod logs against the real local cluster (pods run on the node
// simulator, which serves their logs through the kubelet endpoint).
#include <map>
#include <set>
#include <vector>

#include "cluster.hpp"
#include "http/transport.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

Json SimPod(const std::string& name, const Json& annotations) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"annotations", annotations}}},
          {"spec",
           {{"containers", Json::array({{{"name", "main"}, {"image", "busybox"}}})},
            {"restartPolicy", "Never"},
            {"terminationGracePeriodSeconds", 0}}}};
}

// Waits (driven by an informer, not polling) until the pod is Running.
bool WaitRunning(Client& c, const std::string& ns, const std::string& name) {
  ListOptions sel;
  sel.field_selector = "metadata.name=" + name;
  Informer inf(c, kPods, ns, sel);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    auto ev = inf.Next(std::chrono::seconds(1));
    if (ev && ev->object.value("status", Json::object()).value("phase", "") == "Running") {
      return true;
    }
  }
  return false;
}

// Compacts the local cluster's etcd up to `revision` through etcd's JSON gateway.
void CompactEtcd(const std::string& revision) {
  Json cluster = Json::parse(ReadFile(ClusterDir() + "/cluster.json"));
  internal::HttpRequest req;
  req.method = "POST";
  req.url = cluster["etcd_url"].get<std::string>() + "/v3/kv/compaction";
  req.headers = {"Content-Type: application/json"};
  req.body = Json{{"revision", revision}, {"physical", true}}.dump();
  req.timeout = std::chrono::seconds(10);
  auto response = internal::MakeCurlTransport()->Send(req).get();
  REQUIRE_MESSAGE(response.status == 200, response.body);
}

}  // namespace

TEST_SUITE("watch") {
  TEST_CASE("informer: list then watch delivers ADDED, MODIFIED, DELETED in order") {
    Client c = AdminClient();
    TestNamespace ns(c);
    c.Create(kConfigMaps, ns.name(), ConfigMap("before", {}, {{"w", "1"}}));
    ListOptions sel;
    sel.label_selector = "w=1";
    Informer inf(c, kConfigMaps, ns.name(), sel);
    auto first = inf.Next(std::chrono::seconds(10));
    REQUIRE(first);
    CHECK(first->type == WatchEventType::kAdded);
    CHECK(first->object["metadata"]["name"] == "before");
    CHECK(first->object["kind"] == "ConfigMap");

    c.Create(kConfigMaps, ns.name(), ConfigMap("after", {}, {{"w", "1"}}));
    c.Patch(kConfigMaps, ns.name(), "after", PatchType::kMerge, {{"data", {{"k", "v"}}}});
    c.Delete(kConfigMaps, ns.name(), "after");
    std::vector<std::pair<WatchEventType, std::string>> seen;
    while (seen.size() < 3) {
      auto ev = inf.Next(std::chrono::seconds(10));
      REQUIRE(ev);
      seen.emplace_back(ev->type, ev->object["metadata"]["name"]);
    }
    CHECK(seen[0] == std::pair{WatchEventType::kAdded, std::string("after")});
    CHECK(seen[1] == std::pair{WatchEventType::kModified, std::string("after")});
    CHECK(seen[2] == std::pair{WatchEventType::kDeleted, std::string("after")});
    CHECK(inf.Snapshot().size() == 1);
    CHECK_FALSE(inf.resource_version().empty());
  }

  TEST_CASE("informer resumes after the server closes the watch, without redelivery") {
    Client c = AdminClient();
    TestNamespace ns(c);
    Informer inf(c, kConfigMaps, ns.name(), {});
    inf.set_watch_timeout(std::chrono::seconds(1));  // server closes each watch after 1-2 s
    std::map<std::string, int> deliveries;           // "name@resourceVersion" -> count
    std::thread writer([&] {
      for (int i = 0; i < 8; ++i) {
        c.Create(kConfigMaps, ns.name(), ConfigMap("r" + std::to_string(i)));
        std::this_thread::sleep_for(std::chrono::milliseconds(600));
      }
    });
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::set<std::string> names;
    while (std::chrono::steady_clock::now() < deadline && names.size() < 8) {
      auto ev = inf.Next(std::chrono::seconds(1));
      if (!ev) continue;
      std::string name = ev->object["metadata"]["name"];
      if (name.rfind("r", 0) != 0) continue;  // kube-root-ca.crt on newer servers
      names.insert(name);
      ++deliveries[name + "@" + ev->object["metadata"]["resourceVersion"].get<std::string>()];
    }
    writer.join();
    // Drain for a while longer: nothing may come twice across the reconnects.
    auto drain = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (std::chrono::steady_clock::now() < drain) {
      if (auto ev = inf.Next(std::chrono::milliseconds(500))) {
        std::string name = ev->object["metadata"]["name"];
        ++deliveries[name + "@" + ev->object["metadata"]["resourceVersion"].get<std::string>()];
      }
    }
    CHECK(names.size() == 8);
    for (const auto& [key, count] : deliveries) CHECK_MESSAGE(count == 1, key);
    CHECK(inf.relist_count() == 0);
  }

  TEST_CASE("a watch from an expired resourceVersion recovers by relisting") {
    // The local cluster serves podtemplates without the watch cache, so a watch from a
    // version that etcd has compacted away gets the real 410 Gone path of the apiserver.
    const ResourceType templates{"", "v1", "PodTemplate", "podtemplates", true};
    Client c = AdminClient();
    TestNamespace ns(c);
    auto pt = [](const std::string& name) {
      return Json{{"apiVersion", "v1"},
                  {"kind", "PodTemplate"},
                  {"metadata", {{"name", name}}},
                  {"template",
                   {{"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "x"}}})}}}}}};
    };
    std::string old_version =
        c.Create(templates, ns.name(), pt("x0"))["metadata"]["resourceVersion"];
    c.Create(templates, ns.name(), pt("x1"));
    c.Create(templates, ns.name(), pt("x2"));
    std::string now = c.List(templates, ns.name())["metadata"]["resourceVersion"];
    CompactEtcd(now);

    // The raw watch shows what the server says: an ERROR event carrying a 410 Status.
    WatchOptions old;
    old.resource_version = old_version;
    auto raw = c.Watch(templates, ns.name(), old);
    auto err = raw.Next(std::chrono::seconds(10));
    REQUIRE(err);
    CHECK(err->type == WatchEventType::kError);
    CHECK(err->object["code"] == 410);

    // The informer resuming from that version relists and reports what exists.
    ListOptions resume;
    resume.resource_version = old_version;
    Informer inf(c, templates, ns.name(), resume);
    std::set<std::string> names;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < deadline && names.size() < 3) {
      auto ev = inf.Next(std::chrono::seconds(1));
      if (ev && ev->type == WatchEventType::kAdded) names.insert(ev->object["metadata"]["name"]);
    }
    CHECK(names == std::set<std::string>{"x0", "x1", "x2"});
    CHECK(inf.relist_count() == 1);
    // And it keeps watching after the relist.
    c.Create(templates, ns.name(), pt("x3"));
    bool got = false;
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!got && std::chrono::steady_clock::now() < deadline) {
      auto ev = inf.Next(std::chrono::seconds(1));
      got = ev && ev->object["metadata"]["name"] == "x3";
    }
    CHECK(got);
  }

  TEST_CASE("Cancel from another thread stops a blocked informer and a raw watch") {
    Client c = AdminClient();
    TestNamespace ns(c);
    Informer inf(c, kConfigMaps, ns.name(), {});
    while (inf.Next(std::chrono::milliseconds(500))) {
    }
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      inf.Cancel();
    });
    auto t0 = std::chrono::steady_clock::now();
    auto ev = inf.Next(std::chrono::seconds(30));
    canceller.join();
    CHECK_FALSE(ev);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));

    WatchOptions now;  // from the current version: no initial ADDED events
    now.resource_version = c.List(kConfigMaps, ns.name())["metadata"]["resourceVersion"];
    auto raw = c.Watch(kConfigMaps, ns.name(), now);
    std::thread stopper([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      raw.Cancel();
    });
    t0 = std::chrono::steady_clock::now();
    CHECK_FALSE(raw.Next(std::chrono::seconds(30)));
    stopper.join();
    CHECK(raw.ended());
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  }

  TEST_CASE("Run delivers events to a callback until it returns false") {
    Client c = AdminClient();
    TestNamespace ns(c);
    for (int i = 0; i < 3; ++i)
      c.Create(kConfigMaps, ns.name(), ConfigMap("cb" + std::to_string(i)));
    Informer inf(c, kConfigMaps, ns.name(), {});
    std::set<std::string> names;
    inf.Run([&](const WatchEvent& ev) {
      std::string n = ev.object["metadata"]["name"];
      if (n.rfind("cb", 0) == 0) names.insert(n);
      return names.size() < 3;
    });
    CHECK(names.size() == 3);
  }

  TEST_CASE("a watch the user may not make is a typed Forbidden") {
    Client limited(ConfigFor("tfk8s-local-limited"));
    CHECK_THROWS_AS(limited.Watch(kConfigMaps, "default", WatchOptions{}), Forbidden);
  }
}

TEST_SUITE("watch") {
  TEST_CASE("an informer that cannot trust the server's certificate ends with a TlsError") {
    // The real apiserver, a CA that did not sign it: every list fails the handshake. Retrying
    // cannot fix that, so Next() throws after failure_limit attempts instead of waiting for ever.
    ClientConfig cfg = ConfigFor();
    cfg.ca_pem = ReadFile(ClusterDir() + "/pki/other-ca.crt");
    cfg.ca_file.clear();
    Informer informer(Client(cfg), kConfigMaps, "default");
    informer.set_backoff(std::chrono::milliseconds(10), std::chrono::milliseconds(100));
    informer.set_failure_limit(3);
    std::vector<InformerFailure> seen;
    informer.set_error_handler([&](const InformerFailure& f) { seen.push_back(f); });
    auto t0 = std::chrono::steady_clock::now();
    try {
      informer.Next(std::chrono::seconds(60));
      FAIL("Next returned instead of throwing");
    } catch (const TlsError& e) {
      CHECK(std::string(e.what()).find("(after 3 attempts)") != std::string::npos);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
    REQUIRE(seen.size() == 3);
    CHECK(seen[0].kind == ErrorKind::kTls);
    CHECK_FALSE(seen[0].transient);
    CHECK_FALSE(seen[1].fatal);
    CHECK(seen[2].fatal);
    REQUIRE(informer.last_error().has_value());
    CHECK(informer.last_error()->consecutive == 3);
  }

  TEST_CASE("a list over max_response_bytes ends the informer with ResponseTooLarge") {
    Client admin = AdminClient();
    TestNamespace ns(admin);
    for (int i = 0; i < 5; ++i) {
      admin.Create(kConfigMaps, ns.name(),
                   ConfigMap("big-" + std::to_string(i), {{"data", std::string(1000, 'x')}}));
    }
    ClientConfig cfg = ConfigFor();
    cfg.max_response_bytes = 2000;  // the list of five is over 5000 bytes
    Informer informer(Client(cfg), kConfigMaps, ns.name());
    informer.set_backoff(std::chrono::milliseconds(10), std::chrono::milliseconds(100));
    CHECK_THROWS_AS(informer.Next(std::chrono::seconds(60)), ResponseTooLarge);
    REQUIRE(informer.last_error().has_value());
    CHECK(informer.last_error()->fatal);
    CHECK(informer.last_error()->consecutive == Informer::kDefaultFailureLimit);
    CHECK(informer.Snapshot().empty());
  }
}

TEST_SUITE("logs") {
  TEST_CASE("read, tail, timestamps and follow a simulated pod's log") {
    Client c = AdminClient();
    TestNamespace ns(c);
    c.Create(kPods, ns.name(),
             SimPod("talker", {{"sim.tfk8s.io/log-lines", "hello\nworld\nthird line"},
                               {"sim.tfk8s.io/log-interval", "1"}}));
    REQUIRE(WaitRunning(c, ns.name(), "talker"));

    std::string all = c.ReadLogs(ns.name(), "talker");
    CHECK(all.find("hello\nworld\nthird line\n") != std::string::npos);

    LogOptions tail;
    tail.tail_lines = 1;
    std::string last = c.ReadLogs(ns.name(), "talker", tail);
    CHECK(std::count(last.begin(), last.end(), '\n') == 1);

    LogOptions ts;
    ts.timestamps = true;
    ts.container = "main";
    std::string stamped = c.ReadLogs(ns.name(), "talker", ts);
    CHECK(stamped.rfind("20", 0) == 0);  // RFC 3339 prefix, e.g. 2026-11-30T…

    LogOptions follow;
    follow.follow = true;
    auto stream = c.StreamLogs(ns.name(), "talker", follow);
    int ticks = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (ticks < 2 && std::chrono::steady_clock::now() < deadline) {
      auto line = stream.NextLine(std::chrono::seconds(2));
      if (line && line->find("tick") != std::string::npos) ++ticks;
    }
    CHECK(ticks == 2);  // new lines arrive while we follow
    stream.Cancel();
    CHECK_FALSE(stream.NextLine(std::chrono::seconds(1)));
    CHECK(stream.ended());
  }

  TEST_CASE("logs of a missing pod are NotFound") {
    Client c = AdminClient();
    TestNamespace ns(c);
    CHECK_THROWS_AS(c.ReadLogs(ns.name(), "nope"), NotFound);
    CHECK_THROWS_AS(c.StreamLogs(ns.name(), "nope", {}), NotFound);
  }
}
