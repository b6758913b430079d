// How the Informer surfaces failures (issue #35): transient ones (503, 429, refused …) are
// retried for ever; a certificate, an oversized list or an undecodable answer ends Next() with
// its typed error once failure_limit() of them come in a row; a success in between starts the
// count over; last_error() and the error handler report every failure as it happens. Backoffs
// are shortened with set_backoff() so each case takes well under a second.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_transport.hpp"
#include "scripted_server.hpp"
#include "tfk8s/client.hpp"
#include "tfk8s/fleet.hpp"
#include "tfk8s/scheduledjob.hpp"

using namespace tfk8s;
using tfk8s::testing::FakeTransport;
using tfk8s::testing::LoopbackConfig;
using tfk8s::testing::Respond;
using tfk8s::testing::ScriptedServer;

namespace {

const ResourceType kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};

ClientConfig Config() { return tfk8s::testing::FakeClientConfig(); }

bool IsWatch(const std::string& url) { return tfk8s::testing::IsWatchUrl(url); }

const std::string kEmptyList =
    R"({"kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[]})";
// A list whose one item has a name of the wrong JSON type: a DecodeError every time.
const std::string kUndecodableList =
    R"({"kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[)"
    R"({"metadata":{"name":5,"namespace":"ns","resourceVersion":"7"}}]})";
const std::string kUndecodableEvent =
    R"({"type":"ADDED","object":{"metadata":{"name":5,"namespace":"ns","resourceVersion":"8"}}})"
    "\n";
std::string GoodEvent(const std::string& name, int rv) {
  return R"({"type":"ADDED","object":{"metadata":{"name":")" + name +
         R"(","namespace":"ns","resourceVersion":")" + std::to_string(rv) + R"("}}})" + "\n";
}

// Every failure the error handler saw.
struct Seen {
  std::mutex mu;
  std::vector<InformerFailure> failures;
  void Attach(Informer& informer) {
    informer.set_error_handler([this](const InformerFailure& f) {
      std::lock_guard lock(mu);
      failures.push_back(f);
    });
  }
  std::vector<InformerFailure> all() {
    std::lock_guard lock(mu);
    return failures;
  }
};

// A watch that the server accepts and then keeps open, silent.
std::string QuietWatch() {
  return ScriptedServer::HoldOpen() +
         "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Polls `done` every 20 ms until it holds or `limit` passes.
template <typename F>
bool PollUntil(F done, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void Fast(Informer& informer) {
  informer.set_backoff(std::chrono::milliseconds(1), std::chrono::milliseconds(10));
}

}  // namespace

TEST_SUITE("informer") {
  TEST_CASE("a list that never decodes ends Next with the DecodeError after failure_limit lists") {
    std::atomic<int> lists{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (IsWatch(r.url)) return Respond(200, "");
      ++lists;
      return Respond(200, kUndecodableList);
    });
    Informer informer(internal::ClientOver(Config(), fake), kConfigMaps, "ns");
    Fast(informer);
    informer.set_failure_limit(3);
    Seen seen;
    seen.Attach(informer);
    CHECK(informer.failure_limit() == 3);
    CHECK_FALSE(informer.last_error().has_value());
    auto t0 = std::chrono::steady_clock::now();
    try {
      informer.Next(std::chrono::seconds(20));
      FAIL("Next returned instead of throwing");
    } catch (const DecodeError& e) {
      CHECK(e.field() == "metadata.name");
      CHECK(std::string(e.what()).find("(after 3 attempts)") != std::string::npos);
    }
    // Well before the 20 s wait: the limit, not the timeout, ended it.
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    CHECK(lists == 3);
    auto failures = seen.all();
    REQUIRE(failures.size() == 3);
    for (int i = 0; i < 3; ++i) {
      CHECK(failures[i].consecutive == i + 1);
      CHECK_FALSE(failures[i].transient);
      CHECK(failures[i].fatal == (i == 2));
      CHECK(failures[i].error != nullptr);
    }
    auto last = informer.last_error();
    REQUIRE(last.has_value());
    CHECK(last->fatal);
    CHECK(last->consecutive == 3);
    CHECK(last->message.find("metadata.name") != std::string::npos);
    CHECK_THROWS_AS(std::rethrow_exception(last->error), DecodeError);
    CHECK(informer.consecutive_failures() == 3);
  }

  TEST_CASE("TLS and size-limit failures end Next with their type after the default limit") {
    const int limit = Informer::kDefaultFailureLimit;
    SUBCASE("TlsError") {
      std::atomic<int> requests{0};
      auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest&) {
        ++requests;
        throw TlsError("TLS: GET 127.0.0.1:6443: certificate verify failed");
        return Respond(200, "");
      });
      Informer informer(internal::ClientOver(Config(), fake), kConfigMaps, "ns");
      Fast(informer);
      CHECK_THROWS_AS(informer.Next(std::chrono::seconds(20)), TlsError);
      CHECK(requests == limit);
      REQUIRE(informer.last_error().has_value());
      CHECK(informer.last_error()->kind == ErrorKind::kTls);
    }
    SUBCASE("ResponseTooLarge") {
      std::atomic<int> requests{0};
      auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest&) {
        ++requests;
        throw ResponseTooLarge("list configmaps: the answer is over 1024 bytes",
                               "max_response_bytes", 1024);
        return Respond(200, "");
      });
      Informer informer(internal::ClientOver(Config(), fake), kConfigMaps, "ns");
      Fast(informer);
      CHECK_THROWS_AS(informer.Next(std::chrono::seconds(20)), ResponseTooLarge);
      CHECK(requests == limit);
    }
  }

  TEST_CASE("a 503 forever never throws: the informer keeps backing off and reports it") {
    std::atomic<int> lists{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest&) {
      ++lists;
      return Respond(503, R"({"kind":"Status","reason":"ServiceUnavailable","code":503})");
    });
    Informer informer(internal::ClientOver(Config(), fake), kConfigMaps, "ns");
    Fast(informer);
    informer.set_failure_limit(2);
    Seen seen;
    seen.Attach(informer);
    CHECK_FALSE(informer.Next(std::chrono::milliseconds(600)).has_value());
    // Far past the limit of 2, and still retrying.
    CHECK(lists >= 5);
    auto last = informer.last_error();
    REQUIRE(last.has_value());
    CHECK(last->transient);
    CHECK_FALSE(last->fatal);
    CHECK(last->kind == ErrorKind::kServerError);
    CHECK(informer.consecutive_failures() == lists);
    for (const auto& f : seen.all()) CHECK_FALSE(f.fatal);
    // Backing off, not hammering: 1 ms doubling to 10 ms allows at most ~70 lists in 0.6 s.
    CHECK(lists <= 100);
  }

  TEST_CASE("a success between failures starts the count over and last_error keeps the latest") {
    // Watches 1-2, 4-5, 7-8 send an undecodable event, 3, 6 and 9 a good one; from 10 on every
    // watch is undecodable. With a limit of 3 only the run after watch 9 reaches it.
    std::atomic<int> watches{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (!IsWatch(r.url)) return Respond(200, kEmptyList);
      int n = ++watches;
      if (n <= 9 && n % 3 == 0) return Respond(200, GoodEvent("cm-" + std::to_string(n), 7 + n));
      return Respond(200, kUndecodableEvent);
    });
    Informer informer(internal::ClientOver(Config(), fake), kConfigMaps, "ns");
    Fast(informer);
    informer.set_failure_limit(3);
    std::vector<std::string> names;
    auto t0 = std::chrono::steady_clock::now();
    try {
      while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
        auto ev = informer.Next(std::chrono::seconds(5));
        if (!ev) continue;
        names.push_back(ev->object["metadata"]["name"].get<std::string>());
        // Just delivered: the two failures before it are forgotten.
        CHECK(informer.consecutive_failures() == 0);
        REQUIRE(informer.last_error().has_value());
        CHECK(informer.last_error()->consecutive == 2);
      }
      FAIL("Next never threw");
    } catch (const DecodeError& e) {
      CHECK(std::string(e.what()).find("(after 3 attempts)") != std::string::npos);
    }
    CHECK(names == std::vector<std::string>{"cm-3", "cm-6", "cm-9"});
    CHECK(watches == 12);
    REQUIRE(informer.last_error().has_value());
    CHECK(informer.last_error()->fatal);
    CHECK(informer.last_error()->consecutive == 3);
  }

  TEST_CASE("a transient failure between two others starts the run of bounded failures over") {
    // Lists: undecodable, undecodable, 503, undecodable, undecodable, 503, … : never three
    // undecodable answers in a row, so a limit of 3 is never reached.
    std::atomic<int> lists{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest&) {
      int n = ++lists;
      if (n % 3 == 0) return Respond(503, R"({"kind":"Status","code":503})");
      return Respond(200, kUndecodableList);
    });
    Informer informer(internal::ClientOver(Config(), fake), kConfigMaps, "ns");
    Fast(informer);
    informer.set_failure_limit(3);
    CHECK_FALSE(informer.Next(std::chrono::milliseconds(500)).has_value());
    CHECK(lists >= 6);
    CHECK(informer.consecutive_failures() == lists);
  }

  TEST_CASE("a Forbidden watch is thrown at once and reported as fatal") {
    std::atomic<int> watches{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (!IsWatch(r.url)) return Respond(200, kEmptyList);
      ++watches;
      return Respond(403, R"({"kind":"Status","reason":"Forbidden","code":403})");
    });
    Informer informer(internal::ClientOver(Config(), fake), kConfigMaps, "ns");
    Fast(informer);
    Seen seen;
    seen.Attach(informer);
    CHECK_THROWS_AS(informer.Next(std::chrono::seconds(5)), Forbidden);
    // The watch opened right after the list failed once (recorded, not thrown: the list's
    // events are not held back), the next attempt threw.
    CHECK(watches == 2);
    auto failures = seen.all();
    REQUIRE(failures.size() == 2);
    CHECK_FALSE(failures[0].fatal);
    CHECK(failures[1].fatal);
    CHECK(failures[1].kind == ErrorKind::kForbidden);
    CHECK_FALSE(failures[1].transient);
  }
}

TEST_SUITE("fleet") {
  TEST_CASE(
      "the Fleet reports informer failures through OnError and last_error, fatal ones in error()") {
    // Pods cannot be listed (503, retried for ever); StatefulSets may be listed but not watched
    // (403: that informer stops); the rest is healthy, with watches that stay open.
    ScriptedServer server([](const ScriptedServer::Request& r, int) -> std::string {
      const std::string& t = r.target;
      if (!Contains(t, "/namespaces/ns/")) return ScriptedServer::Response(404, "{}");  // discovery
      if (Contains(t, "/pods")) {
        return ScriptedServer::Response(503, R"({"kind":"Status","code":503})");
      }
      if (!Contains(t, "watch=true")) {
        return ScriptedServer::Response(200, R"({"metadata":{"resourceVersion":"7"},"items":[]})");
      }
      if (Contains(t, "/statefulsets")) {
        return ScriptedServer::Response(403,
                                        R"({"kind":"Status","reason":"Forbidden","code":403})");
      }
      return QuietWatch();
    });
    FleetOptions options;
    options.namespace_name = "ns";
    Fleet fleet(Client(LoopbackConfig(server.url())), options);
    std::mutex mu;
    std::vector<FleetError> seen;
    fleet.OnError([&](const FleetError& e) {
      std::lock_guard lock(mu);
      seen.push_back(e);
    });
    auto has = [&](const std::string& source, bool fatal) {
      std::lock_guard lock(mu);
      for (const auto& e : seen) {
        if (e.source == source && e.failure.fatal == fatal) return true;
      }
      return false;
    };
    // Within a few seconds (the 403 is thrown on the second attempt, after one backoff of at
    // most 1.2 s), not never.
    REQUIRE(PollUntil([&] { return has("Pod", false) && has("StatefulSet", true); },
                      std::chrono::seconds(10)));
    {
      std::lock_guard lock(mu);
      for (const auto& e : seen) {
        if (e.source == "Pod") {
          CHECK(e.failure.transient);
          CHECK_FALSE(e.failure.fatal);
          CHECK(e.failure.kind == ErrorKind::kServerError);
        }
        if (e.source == "StatefulSet" && e.failure.fatal) {
          CHECK(e.failure.kind == ErrorKind::kForbidden);
          Json j = e.ToJson();
          CHECK(j["source"] == "StatefulSet");
          CHECK(j["kind"] == "Forbidden");
          CHECK(j["fatal"] == true);
          CHECK(j["transient"] == false);
        }
      }
    }
    REQUIRE(fleet.error() != nullptr);
    CHECK_THROWS_AS(std::rethrow_exception(fleet.error()), Forbidden);
    CHECK_THROWS_AS(fleet.WaitForSync(std::chrono::milliseconds(100)), Forbidden);
    // The Pods informer goes on retrying: the latest failure is one of its.
    REQUIRE(PollUntil([&] { return fleet.last_error() && fleet.last_error()->source == "Pod"; },
                      std::chrono::seconds(10)));
    CHECK(fleet.last_error()->failure.transient);
    fleet.Stop();
  }
}

TEST_SUITE("scheduledjob") {
  TEST_CASE("the watcher reports each failed list to on_error, then stops with the DecodeError") {
    // Every list of Jobs has an item whose name is a number: no alert could ever be computed.
    std::atomic<int> lists{0};
    ScriptedServer server([&](const ScriptedServer::Request& r, int) -> std::string {
      if (Contains(r.target, "watch=true")) return QuietWatch();
      ++lists;
      return ScriptedServer::Response(200, kUndecodableList);
    });
    ScheduledJobWatcherOptions o;
    o.namespace_name = "ns";
    o.alert_on_missed_schedule = false;  // no CronJob informer, no discovery
    std::mutex mu;
    std::vector<std::string> errors;
    o.on_error = [&](const std::string& e) {
      std::lock_guard lock(mu);
      errors.push_back(e);
    };
    ScheduledJobWatcher watcher(Client(LoopbackConfig(server.url())), o);
    auto t0 = std::chrono::steady_clock::now();
    watcher.Start();
    auto count = [&] {
      std::lock_guard lock(mu);
      return errors.size();
    };
    // The first failure is told at once, not after the retries.
    REQUIRE(PollUntil([&] { return count() >= 1; }, std::chrono::seconds(3)));
    {
      std::lock_guard lock(mu);
      CHECK(Contains(errors[0], "watch Jobs in ns: failure 1 in a row"));
      CHECK(Contains(errors[0], "metadata.name"));
    }
    // Five lists at the default backoff (0.8 s doubling, jitter 0.5-1.5): at most 18 s.
    REQUIRE(PollUntil([&] { return watcher.error() != nullptr; }, std::chrono::seconds(25)));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(25));
    CHECK_THROWS_AS(std::rethrow_exception(watcher.error()), DecodeError);
    CHECK(lists == Informer::kDefaultFailureLimit);
    REQUIRE(PollUntil([&] { return count() == 5; }, std::chrono::seconds(2)));
    std::lock_guard lock(mu);
    CHECK(Contains(errors[3], "failure 4 in a row"));
    CHECK(Contains(errors.back(), "scheduled job watcher stopped: "));
    CHECK(Contains(errors.back(), "(after 5 attempts)"));
  }
}
