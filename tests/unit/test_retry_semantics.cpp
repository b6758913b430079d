// Client robustness (issue #17): client-go's retry rules (Retry-After only, reads only after a
// lost connection, the call's deadline, the attempt count in the error), bounded input, typed
// decode errors, idle streams, the TLS handshake bound, and the transport's lifetime rules.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/connection.hpp"
#include "fake_transport.hpp"
#include "http/transport.hpp"
#include "scripted_server.hpp"
#include "tfk8s/client.hpp"

using namespace tfk8s;
using tfk8s::testing::FakeTransport;
using tfk8s::testing::Respond;
using tfk8s::testing::ScriptedServer;
using Clock = std::chrono::steady_clock;

namespace {

const ResourceType kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};
const Json kObject = {{"metadata", {{"name", "x"}}}};

ClientConfig FakeConfig() {
  ClientConfig c;
  c.server = "https://127.0.0.1:6443";
  c.token = "t0ken";
  c.rate_limit.qps = 0;
  c.retry.initial_backoff = std::chrono::milliseconds(1);
  c.retry.max_backoff = std::chrono::milliseconds(5);
  return c;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A transport whose streams the test fills by hand and never finishes (a silent peer).
class StreamTransport : public internal::HttpTransport {
 public:
  explicit StreamTransport(std::function<void(internal::BufferedStream&)> fill)
      : fill_(std::move(fill)) {}
  std::future<internal::HttpResponse> Send(internal::HttpRequest) override {
    std::promise<internal::HttpResponse> p;
    p.set_exception(std::make_exception_ptr(TransportError("no plain requests here", false)));
    return p.get_future();
  }
  std::shared_ptr<internal::HttpStream> Open(internal::HttpRequest) override {
    auto s = std::make_shared<internal::BufferedStream>();
    fill_(*s);
    return s;
  }

 private:
  std::function<void(internal::BufferedStream&)> fill_;
};

std::string Event(const std::string& type, const std::string& name, const std::string& rv) {
  return R"({"type":")" + type + R"(","object":{"apiVersion":"v1","kind":"ConfigMap",)" +
         R"("metadata":{"name":")" + name + R"(","namespace":"ns","resourceVersion":")" + rv +
         R"("}}})" + "\n";
}

bool IsWatch(const std::string& target) { return target.find("watch=true") != std::string::npos; }

}  // namespace

TEST_SUITE("retry_semantics") {
  TEST_CASE("policy: 429/5xx only with Retry-After, which is not capped at max_backoff") {
    RetryPolicy p;
    RetryPolicy::Attempt a;
    a.http_code = 429;
    CHECK_FALSE(p.Decide(a, 0.5));  // no Retry-After: not retried
    a.http_code = 503;
    a.idempotent = true;
    CHECK_FALSE(p.Decide(a, 0.5));  // not even a read
    a.retry_after_seconds = 30;
    CHECK(p.Decide(a, 0.5) == std::chrono::seconds(30));  // not capped at 10 s
    a.idempotent = false;
    CHECK(p.Decide(a, 0.5) == std::chrono::seconds(30));  // any verb, when the server says so
    a.time_left = std::chrono::seconds(5);
    CHECK_FALSE(p.Decide(a, 0.5));  // would overrun the call's deadline
    a.time_left = std::chrono::seconds(31);
    CHECK(p.Decide(a, 0.5) == std::chrono::seconds(30));
    a.number = p.max_attempts;
    CHECK_FALSE(p.Decide(a, 0.5));
    CHECK(p.max_attempts == 11);  // client-go: 10 retries

    RetryPolicy::Attempt lost;  // no response
    lost.idempotent = true;
    CHECK(p.Decide(lost, 0.5) == p.initial_backoff);
    lost.idempotent = false;
    CHECK_FALSE(p.Decide(lost, 0.5));  // a write is never sent twice
    RetryPolicy::Attempt refused;
    refused.idempotent = true;
    refused.request_may_have_been_sent = false;
    CHECK_FALSE(p.Decide(refused, 0.5));  // client-go: connection refused is not retried
  }

  TEST_CASE("a write answered 503 + Retry-After is resent, the last error counts the attempts") {
    std::atomic<int> calls{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest&) {
      ++calls;
      return Respond(503, R"({"kind":"Status","message":"shutting down","code":503})",
                     {{"retry-after", "0"}});
    });
    ClientConfig cfg = FakeConfig();
    cfg.retry.max_attempts = 3;
    Client client = internal::ClientOver(cfg, fake);
    try {
      client.Create(kConfigMaps, "ns", kObject);
      FAIL("expected ServerError");
    } catch (const ServerError& e) {
      CHECK(e.http_code() == 503);
      CHECK(e.server_message() == "shutting down");
      CHECK(e.attempts() == 3);
      CHECK(EndsWith(e.what(), "(after 3 attempts)"));
    }
    CHECK(calls == 3);
  }

  TEST_CASE("429 and 5xx without Retry-After are returned at once, for reads too") {
    std::atomic<int> calls{0};
    int status = 429;
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest&) {
      ++calls;
      return Respond(status, R"({"kind":"Status","code":)" + std::to_string(status) + "}");
    });
    Client client = internal::ClientOver(FakeConfig(), fake);
    try {
      client.Create(kConfigMaps, "ns", kObject);
      FAIL("expected TooManyRequests");
    } catch (const TooManyRequests& e) {
      CHECK(e.attempts() == 1);
      CHECK(std::string(e.what()).find("attempts") == std::string::npos);
    }
    CHECK(calls == 1);
    status = 503;
    CHECK_THROWS_AS(client.Get(kConfigMaps, "ns", "x"), ServerError);
    CHECK(calls == 2);
  }

  TEST_CASE("a Retry-After past the call's deadline ends the call instead of sleeping") {
    std::atomic<int> calls{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest&) {
      ++calls;
      return Respond(429, "{}", {{"retry-after", "30"}});
    });
    ClientConfig cfg = FakeConfig();
    cfg.request_timeout = std::chrono::seconds(2);
    Client client = internal::ClientOver(cfg, fake);
    auto t0 = Clock::now();
    try {
      client.Get(kConfigMaps, "ns", "x");
      FAIL("expected TooManyRequests");
    } catch (const TooManyRequests& e) {
      CHECK(e.retry_after_seconds() == 30);
    }
    CHECK(calls == 1);
    CHECK(Clock::now() - t0 < std::chrono::seconds(2));  // neither 30 s nor a capped 10 s
  }

  TEST_CASE("lost connections: reads retried with the count in the error, writes never") {
    std::atomic<int> calls{0};
    bool sent = true;
    auto fake = std::make_shared<FakeTransport>(
        [&](const internal::HttpRequest&) -> internal::HttpResponse {
          ++calls;
          throw TransportError("connection reset by peer", sent);
        });
    ClientConfig cfg = FakeConfig();
    cfg.retry.max_attempts = 4;
    Client client = internal::ClientOver(cfg, fake);
    try {
      client.Get(kConfigMaps, "ns", "x");
      FAIL("expected TransportError");
    } catch (const TransportError& e) {
      CHECK(e.attempts() == 4);
      CHECK(EndsWith(e.what(), "(after 4 attempts)"));
    }
    CHECK(calls == 4);
    calls = 0;
    CHECK_THROWS_AS(client.Create(kConfigMaps, "ns", kObject), TransportError);
    CHECK(calls == 1);
    calls = 0;
    sent = false;  // refused: even a read is reported at once, like client-go
    CHECK_THROWS_AS(client.Get(kConfigMaps, "ns", "x"), TransportError);
    CHECK(calls == 1);
  }

  TEST_CASE("retries go through the client-side rate limiter") {
    std::atomic<int> calls{0};
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest&) {
      if (calls++ < 3) return Respond(429, "{}", {{"retry-after", "0"}});
      return Respond(200, R"({"metadata":{"name":"x"}})");
    });
    ClientConfig cfg = FakeConfig();
    cfg.rate_limit = RateLimit{5.0, 1};  // one token, then one every 200 ms
    Client client = internal::ClientOver(cfg, fake);
    auto t0 = Clock::now();
    CHECK(client.Get(kConfigMaps, "ns", "x")["metadata"]["name"] == "x");
    CHECK(calls == 4);
    CHECK(Clock::now() - t0 >= std::chrono::milliseconds(500));  // 3 paced retries (~600 ms)
  }
}

TEST_SUITE("bounded_input") {
  TEST_CASE("a response body over max_response_bytes fails with ResponseTooLarge, once") {
    const std::string big = R"({"data":")" + std::string(300 * 1024, 'a') + R"("})";
    ScriptedServer server(
        [&](const ScriptedServer::Request&, int) { return ScriptedServer::Response(200, big); });
    ClientConfig cfg = tfk8s::testing::LoopbackConfig(server.url());
    cfg.max_response_bytes = 64 * 1024;
    Client client(cfg);
    try {
      client.Get(kConfigMaps, "ns", "x");
      FAIL("expected ResponseTooLarge");
    } catch (const ResponseTooLarge& e) {
      CHECK(e.limit_name() == "max_response_bytes");
      CHECK(e.limit_bytes() == 64 * 1024);
      CHECK(std::string(e.what()).find("max_response_bytes (65536 bytes)") != std::string::npos);
    }
    CHECK(server.requests() == 1);  // the same answer would come again: not retried
    cfg.max_response_bytes = 1 << 20;
    CHECK(Client(cfg).Get(kConfigMaps, "ns", "x")["data"].get<std::string>().size() == 300 * 1024);
  }

  TEST_CASE("a watch event over max_stream_line_bytes fails with ResponseTooLarge") {
    internal::WatchDecoder d(1024);
    const std::string huge = Event("ADDED", std::string(2000, 'n'), "1");
    CHECK_THROWS_AS(d.Feed(huge), ResponseTooLarge);
    internal::WatchDecoder partial(1024);
    CHECK_THROWS_AS(partial.Feed(huge.substr(0, 1500)), ResponseTooLarge);  // no '\n' yet
    internal::WatchDecoder fine(1024);
    CHECK(fine.Feed(Event("ADDED", "a", "1")).size() == 1);

    ClientConfig cfg = FakeConfig();
    cfg.max_stream_line_bytes = 1024;
    auto transport = std::make_shared<StreamTransport>([&](internal::BufferedStream& s) {
      s.SetHeaders(200, {});
      s.Push(Event("ADDED", "a", "1") + huge);
    });
    Client client = internal::ClientOver(cfg, transport);
    WatchStream w = client.Watch(kConfigMaps, "ns", {});
    CHECK_THROWS_AS(w.Next(std::chrono::seconds(2)), ResponseTooLarge);
    CHECK(w.ended());
  }

  TEST_CASE("a log line over max_stream_line_bytes fails with ResponseTooLarge") {
    ClientConfig cfg = FakeConfig();
    cfg.max_stream_line_bytes = 1024;
    auto transport = std::make_shared<StreamTransport>([&](internal::BufferedStream& s) {
      s.SetHeaders(200, {});
      s.Push("short\n" + std::string(5000, 'x'));  // the second line never ends
    });
    Client client = internal::ClientOver(cfg, transport);
    LogStream logs = client.StreamLogs("ns", "p", {});
    CHECK(logs.NextLine(std::chrono::seconds(2)) == "short");
    try {
      logs.NextLine(std::chrono::seconds(2));
      FAIL("expected ResponseTooLarge");
    } catch (const ResponseTooLarge& e) {
      CHECK(e.limit_name() == "max_stream_line_bytes");
    }
  }
}

TEST_SUITE("decode_errors") {
  TEST_CASE("server fields of the wrong JSON type are DecodeErrors, not nlohmann exceptions") {
    internal::WatchDecoder d;
    CHECK_THROWS_AS(d.Feed(R"({"type":5,"object":{}})"
                           "\n"),
                    DecodeError);
    internal::WatchDecoder d2;
    CHECK_THROWS_AS(d2.Feed(R"({"type":"ADDED","object":"oops"})"
                            "\n"),
                    DecodeError);

    std::string list_body;
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (r.url.find("/api/v1") != std::string::npos &&
          r.url.find("configmaps") == std::string::npos) {
        return Respond(200, R"({"resources":[{"name":"configmaps","kind":5,"namespaced":true}]})");
      }
      return Respond(200, list_body);
    });
    Client client = internal::ClientOver(FakeConfig(), fake);
    list_body = R"({"metadata":{"resourceVersion":"1"},"items":"oops"})";
    CHECK_THROWS_AS(client.ListAll(kConfigMaps, "ns"), DecodeError);
    list_body = R"({"metadata":{"continue":7},"items":[]})";
    CHECK_THROWS_AS(client.ListAll(kConfigMaps, "ns"), DecodeError);
    list_body = "[1,2]";
    CHECK_THROWS_AS(client.ListAll(kConfigMaps, "ns"), DecodeError);
    CHECK_THROWS_AS(client.Resolve("v1", "ConfigMap"), DecodeError);
  }
}

TEST_SUITE("informer") {
  TEST_CASE("a failing relist after 410 does not escape Next: it backs off and retries") {
    for (const std::string failing_list :
         {std::string("500"), std::string(R"({"metadata":"oops","items":[]})")}) {
      CAPTURE(failing_list);
      std::atomic<int> lists{0};
      std::atomic<int> watches{0};
      auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
        if (IsWatch(r.url)) {
          if (watches++ == 0) {
            return Respond(410, R"({"kind":"Status","reason":"Expired","code":410})");
          }
          return Respond(200, "");
        }
        int n = ++lists;
        if (n == 1) return Respond(200, R"({"metadata":{"resourceVersion":"7"},"items":[]})");
        if (n == 2) {
          if (failing_list == "500") return Respond(500, R"({"kind":"Status","code":500})");
          return Respond(200, failing_list);
        }
        return Respond(200,
                       R"({"metadata":{"resourceVersion":"9"},"items":[)"
                       R"({"metadata":{"name":"a","namespace":"ns","resourceVersion":"9"}}]})");
      });
      Informer informer(internal::ClientOver(FakeConfig(), fake), kConfigMaps, "ns");
      auto t0 = Clock::now();
      std::optional<WatchEvent> ev;
      CHECK_NOTHROW(ev = informer.Next(std::chrono::seconds(8)));
      REQUIRE(ev);
      CHECK(ev->type == WatchEventType::kAdded);
      CHECK(ev->object["metadata"]["name"] == "a");
      CHECK(lists == 3);
      CHECK(informer.relist_count() == 1);
      CHECK(Clock::now() - t0 >= std::chrono::milliseconds(300));  // backed off in between
    }
  }

  TEST_CASE("a silent watch ends with a timeout, the informer resumes from its version") {
    std::atomic<int> watches{0};
    ScriptedServer server([&](const ScriptedServer::Request& r, int) -> std::string {
      if (!IsWatch(r.target)) {
        return ScriptedServer::Response(
            200, R"({"kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[]})");
      }
      int n = ++watches;
      // One event, then silence with the connection open: a stalled peer.
      return ScriptedServer::HoldOpen() +
             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" +
             Event("ADDED", "cm-" + std::to_string(n), std::to_string(7 + n));
    });
    ClientConfig cfg = tfk8s::testing::LoopbackConfig(server.url());
    cfg.watch_idle_timeout = std::chrono::milliseconds(500);
    Informer informer(Client(cfg), kConfigMaps, "ns");
    auto first = informer.Next(std::chrono::seconds(5));
    REQUIRE(first);
    CHECK(first->object["metadata"]["name"] == "cm-1");
    auto second = informer.Next(std::chrono::seconds(6));
    REQUIRE(second);
    CHECK(second->object["metadata"]["name"] == "cm-2");
    CHECK(informer.relist_count() == 0);
    std::vector<std::string> watch_targets;
    for (const auto& r : server.seen()) {
      if (IsWatch(r.target)) watch_targets.push_back(r.target);
    }
    REQUIRE(watch_targets.size() >= 2);
    CHECK(watch_targets[1].find("resourceVersion=8") != std::string::npos);
  }

  TEST_CASE("idle streams: a typed timeout for watches, logs have no idle bound by default") {
    ClientConfig cfg = FakeConfig();
    cfg.watch_idle_timeout = std::chrono::milliseconds(300);
    auto transport = std::make_shared<StreamTransport>([](internal::BufferedStream& s) {
      s.SetHeaders(200, {});
      s.Push(Event("ADDED", "a", "1"));
    });
    {
      Client client = internal::ClientOver(cfg, transport);
      WatchStream w = client.Watch(kConfigMaps, "ns", {});
      CHECK(w.Next(std::chrono::seconds(2)));
      try {
        w.Next(std::chrono::seconds(5));
        FAIL("expected a timeout");
      } catch (const TransportError& e) {
        CHECK(e.kind() == ErrorKind::kTimeout);
        CHECK(std::string(e.what()).find("watch_idle_timeout") != std::string::npos);
      }
      CHECK(w.ended());
    }
    ClientConfig log_cfg = FakeConfig();
    CHECK(log_cfg.log_idle_timeout.count() == 0);
    Client client = internal::ClientOver(log_cfg, transport);
    LogStream logs = client.StreamLogs("ns", "p", {});
    CHECK(logs.NextLine(std::chrono::seconds(1)).has_value());
    CHECK_FALSE(logs.NextLine(std::chrono::milliseconds(600)).has_value());  // waits, no error
    log_cfg.log_idle_timeout = std::chrono::milliseconds(300);
    Client strict = internal::ClientOver(log_cfg, transport);
    LogStream strict_logs = strict.StreamLogs("ns", "p", {});
    CHECK(strict_logs.NextLine(std::chrono::seconds(1)).has_value());
    CHECK_THROWS_AS(strict_logs.NextLine(std::chrono::seconds(5)), TransportError);
  }
}

TEST_SUITE("transport_lifetime") {
  TEST_CASE("a TLS handshake that stalls is ended by tls_handshake_timeout") {
    // Accepts TCP and never answers the ClientHello (it waits for an HTTP head that never
    // comes, then hangs up after 2 s).
    ScriptedServer server([](const ScriptedServer::Request&, int) { return std::string(); });
    ClientConfig cfg =
        tfk8s::testing::LoopbackConfig("https://127.0.0.1:" + std::to_string(server.port()));
    cfg.insecure_skip_tls_verify = true;
    cfg.tls_handshake_timeout = std::chrono::milliseconds(300);
    cfg.request_timeout = std::chrono::seconds(10);
    Client client(cfg);
    auto t0 = Clock::now();
    try {
      client.ServerVersion();
      FAIL("expected a timeout");
    } catch (const TransportError& e) {
      CHECK(e.kind() == ErrorKind::kTimeout);
      CHECK(std::string(e.what()).find("TLS handshake") != std::string::npos);
    }
    CHECK(Clock::now() - t0 < std::chrono::milliseconds(1900));  // before the server gives up
  }

  TEST_CASE("a TCP connect that hangs is ended by connect_timeout, not by the TLS budget") {
    // A listener whose accept queue is full (backlog 0, one connection parked, never accepted):
    // Linux drops further SYNs, so a connect to it hangs.
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listener, 0) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    std::vector<int> parked;
    for (int i = 0; i < 2; ++i) {
      int c = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      (void)::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      parked.push_back(c);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ClientConfig cfg =
        tfk8s::testing::LoopbackConfig("https://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)));
    cfg.insecure_skip_tls_verify = true;
    cfg.connect_timeout = std::chrono::milliseconds(300);
    cfg.tls_handshake_timeout = std::chrono::seconds(8);  // must not extend the TCP bound
    cfg.request_timeout = std::chrono::seconds(10);
    Client client(cfg);
    auto t0 = Clock::now();
    try {
      client.ServerVersion();
      FAIL("expected a timeout");
    } catch (const TransportError& e) {
      CHECK(e.kind() == ErrorKind::kTimeout);
      CHECK(std::string(e.what()).find("connect_timeout") != std::string::npos);
      CHECK_FALSE(e.sent_request());
    }
    CHECK(Clock::now() - t0 < std::chrono::seconds(5));
    for (int c : parked) ::close(c);
    ::close(listener);
  }

  TEST_CASE("a stream paused at its high-water mark outlives its Client safely") {
    // More than BufferedStream::kHighWater, so the transport pauses the transfer.
    std::string lines;
    while (lines.size() < internal::BufferedStream::kHighWater + (4u << 20)) {
      lines += "a log line of moderate length, repeated to fill the buffer\n";
    }
    ScriptedServer server([&](const ScriptedServer::Request&, int) {
      return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n" + lines;
    });
    std::optional<Client> client(tfk8s::testing::LoopbackConfig(server.url()));
    LogOptions o;
    o.follow = true;
    LogStream logs = client->StreamLogs("ns", "p", o);
    // Let the transport fill the buffer up to the high-water mark and pause.
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    client.reset();  // the transport goes with it
    // Draining a paused stream resumes it: that must not call into the freed transport (an
    // ASan heap-use-after-free before the fix), and neither must the cancel on destruction.
    auto line = logs.NextLine(std::chrono::seconds(2));
    REQUIRE(line);
    CHECK(line->rfind("a log line", 0) == 0);
    logs.Cancel();
  }

  TEST_CASE("requests dropped at shutdown fail with CancelledError, never std::future_error") {
    ScriptedServer server([](const ScriptedServer::Request&, int) {
      return ScriptedServer::HoldOpen();  // read the request, never answer
    });
    std::vector<std::future<internal::HttpResponse>> futures;
    {
      auto transport = internal::MakeCurlTransport();
      for (int i = 0; i < 20; ++i) {
        internal::HttpRequest r;
        r.url = server.url() + "/version";
        futures.push_back(transport->Send(r));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // some are in flight
      for (int i = 0; i < 20; ++i) {
        internal::HttpRequest r;
        r.url = server.url() + "/version";
        futures.push_back(transport->Send(r));  // and some just queued
      }
    }
    int cancelled = 0;
    for (auto& f : futures) {
      try {
        f.get();
        FAIL("a request completed");
      } catch (const CancelledError&) {
        ++cancelled;
      } catch (const std::future_error& e) {
        FAIL("std::future_error: " << e.what());
      } catch (const std::exception& e) {
        FAIL("unexpected error: " << e.what());
      }
    }
    CHECK(cancelled == 40);
  }
}
