// The JSON nesting bound (util/json_parse.hpp): every decoder of text tfk8s did not write
// accepts 512 levels, refuses 513 with a DecodeError naming where the text came from and the
// limit, and refuses 100,000 levels without crashing (that depth crashed the process on the
// first copy of a decoded watch event). One case per decoder path a unit test can reach.
#include <doctest/doctest.h>

#include <string>

#include "auth/exec_plugin.hpp"
#include "client/connection.hpp"
#include "client/exec.hpp"
#include "fake_transport.hpp"
#include "tfk8s/client.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/yaml.hpp"
#include "util/json_parse.hpp"
#include "workloads/common.hpp"
#include "workloads/devinstance_internal.hpp"

using namespace tfk8s;
using tfk8s::internal::kMaxJsonDepth;
using tfk8s::testing::FakeTransport;
using tfk8s::testing::Respond;

namespace {

constexpr int kHostileDepth = 100'000;

// `depth` arrays around `inner`: Nested(2, "1") is "[[1]]".
std::string Nested(int depth, const std::string& inner = "") {
  return std::string(static_cast<std::size_t>(depth), '[') + inner +
         std::string(static_cast<std::size_t>(depth), ']');
}

// An object whose field "deep" holds arrays, `depth` levels in all (the object is level 1),
// after `fields` (e.g. "\"kind\":\"Status\","). Deep(512, ...) is exactly 512 levels deep.
std::string Deep(int depth, const std::string& fields = "") {
  return "{" + fields + "\"deep\":" + Nested(depth - 1) + "}";
}

// Runs `call`, expecting a DecodeError that names `source` and the limit.
template <class F>
void ExpectTooDeep(F&& call, const std::string& source) {
  try {
    call();
    FAIL("not refused");
  } catch (const DecodeError& e) {
    const std::string what = e.what();
    CHECK_MESSAGE(what.find(source) != std::string::npos, what);
    CHECK_MESSAGE(what.find("nested deeper than 512 levels") != std::string::npos, what);
  }
}

ClientConfig TestConfig() {
  ClientConfig c;
  c.server = "https://127.0.0.1:6443";
  c.token = "t";
  c.rate_limit.qps = 0;
  c.retry.initial_backoff = std::chrono::milliseconds(1);
  c.retry.max_backoff = std::chrono::milliseconds(5);
  return c;
}

const ResourceType kPods{"", "v1", "Pod", "pods", true};

// A client whose server answers every request with `body` (200).
Client ClientAnswering(const std::string& body) {
  return internal::ClientOver(
      TestConfig(), std::make_shared<FakeTransport>(
                        [body](const internal::HttpRequest&) { return Respond(200, body); }));
}

// A PodList page holding one pod whose field "deep" makes the page `depth` levels deep (list,
// items, pod: 3 levels of objects and arrays before it).
std::string PodListPage(int depth) {
  return R"({"kind":"PodList","metadata":{},"items":[{"metadata":{"name":"p"},"deep":)" +
         Nested(depth - 3) + "}]}";
}

}  // namespace

TEST_SUITE("json_depth") {
  TEST_CASE("the helper: 512 levels parse, 513 and 100,000 are refused before parsing") {
    using internal::ParseJson;
    CHECK(ParseJson(Nested(kMaxJsonDepth, "1"), "test").is_array());
    CHECK(ParseJson(Deep(kMaxJsonDepth), "test").is_object());
    ExpectTooDeep([] { ParseJson(Nested(kMaxJsonDepth + 1), "the source"); }, "the source");
    ExpectTooDeep([] { ParseJson(Deep(kMaxJsonDepth + 1), "the source"); }, "the source");
    ExpectTooDeep([] { ParseJson(Nested(kHostileDepth), "the source"); }, "the source");
    // Only structure counts: brackets inside strings, escaped quotes included, do not.
    const std::string text = R"({"s":")" + std::string(5000, '[') + R"(\"[{","t":"\\"})";
    Json j = ParseJson(text, "test");
    REQUIRE(j.is_object());
    CHECK(j["t"] == "\\");
    // Malformed text is the caller's to word: a discarded value, not an exception.
    CHECK(ParseJson("{not json", "test").is_discarded());
    // An unbalanced close never lowers the count below zero (nor hides later depth).
    ExpectTooDeep([] { ParseJson("]]]]" + Nested(kMaxJsonDepth + 1), "src"); }, "src");
  }

  TEST_CASE("watch stream: decoder and Client::Watch") {
    internal::WatchDecoder ok;
    auto events = ok.Feed(R"({"type":"ADDED","object":)" + Deep(kMaxJsonDepth - 1) + "}\n");
    REQUIRE(events.size() == 1);
    CHECK(events[0].object.contains("deep"));
    for (int depth : {kMaxJsonDepth + 1, kHostileDepth}) {
      CAPTURE(depth);
      internal::WatchDecoder d;
      ExpectTooDeep([&] { d.Feed(R"({"type":"ADDED","object":)" + Deep(depth - 1) + "}\n"); },
                    "watch stream");
    }
    // Through the client: the stream ends with the DecodeError, nothing crashes.
    Client client = ClientAnswering(R"({"type":"ADDED","object":)" + Deep(kHostileDepth) + "}\n");
    auto w = client.Watch(kPods, "ns", {});
    ExpectTooDeep([&] { w.Next(std::chrono::seconds(5)); }, "watch stream");
  }

  TEST_CASE("get, list and ListAll of the client") {
    CHECK(ClientAnswering(Deep(kMaxJsonDepth)).Get(kPods, "ns", "p").contains("deep"));
    ExpectTooDeep([] { ClientAnswering(Deep(kMaxJsonDepth + 1)).Get(kPods, "ns", "p"); },
                  "get pods ns/p");
    ExpectTooDeep([] { ClientAnswering(Deep(kHostileDepth)).Get(kPods, "ns", "p"); },
                  "get pods ns/p");
    CHECK(ClientAnswering(PodListPage(kMaxJsonDepth)).ListAll(kPods, "ns")["items"].size() == 1);
    ExpectTooDeep([] { ClientAnswering(PodListPage(kMaxJsonDepth + 1)).ListAll(kPods, "ns"); },
                  "pods");
    ExpectTooDeep([] { ClientAnswering(PodListPage(kHostileDepth)).List(kPods, "ns"); }, "pods");
  }

  TEST_CASE("workload list pages (ListItemsWithout, a parser callback)") {
    Client ok = ClientAnswering(PodListPage(kMaxJsonDepth));
    CHECK(internal::ListItemsWithout(ok, kPods, "ns", {}, {"managedFields"}).size() == 1);
    for (int depth : {kMaxJsonDepth + 1, kHostileDepth}) {
      CAPTURE(depth);
      Client deep = ClientAnswering(PodListPage(depth));
      ExpectTooDeep([&] { internal::ListItemsWithout(deep, kPods, "ns", {}, {"managedFields"}); },
                    "list pods");
    }
  }

  TEST_CASE("error bodies: a Status up to 512 levels is read, deeper ones fall back to text") {
    auto error_of = [](const std::string& body) {
      try {
        std::rethrow_exception(MakeApiError(404, body, "GET pods/p"));
      } catch (const Error& e) {
        return std::make_pair(e.reason(), e.server_message());
      }
    };
    const std::string status = R"("kind":"Status","reason":"NotFound","message":"gone",)";
    auto [reason, message] = error_of(Deep(kMaxJsonDepth, status));
    CHECK(reason == "NotFound");
    CHECK(message == "gone");
    for (int depth : {kMaxJsonDepth + 1, kHostileDepth}) {
      CAPTURE(depth);
      auto [deep_reason, deep_message] = error_of(Deep(depth, status));
      CHECK(deep_reason.empty());  // not read as a Status: the raw body, truncated, instead
      CHECK(deep_message.size() < 600);
      CHECK(deep_message.rfind("{\"kind\":\"Status\"", 0) == 0);
    }
    // The typed error still follows the HTTP code.
    CHECK_THROWS_AS(ThrowApiError(404, Deep(kHostileDepth, status), "GET pods/p"), NotFound);
  }

  TEST_CASE("an exec plugin's reply and an exec Status frame") {
    ExecConfig exec;
    exec.api_version = "client.authentication.k8s.io/v1";
    exec.command = "my-plugin";
    const std::string fields =
        R"("apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",)"
        R"("status":{"token":"tok-SECRET"},)";
    CHECK(internal::ParseExecCredential(Deep(kMaxJsonDepth, fields), exec).token == "tok-SECRET");
    for (int depth : {kMaxJsonDepth + 1, kHostileDepth}) {
      CAPTURE(depth);
      try {
        internal::ParseExecCredential(Deep(depth, fields), exec);
        FAIL("not refused");
      } catch (const DecodeError& e) {
        const std::string what = e.what();
        CHECK_MESSAGE(what.find("exec plugin my-plugin") != std::string::npos, what);
        CHECK_MESSAGE(what.find("512") != std::string::npos, what);
        CHECK(what.find("SECRET") == std::string::npos);
      }
    }
    const std::string success = R"("status":"Success",)";
    CHECK(internal::ExitCodeFromStatus(Deep(kMaxJsonDepth, success), "exec") == 0);
    ExpectTooDeep([&] { internal::ExitCodeFromStatus(Deep(kHostileDepth, success), "exec x"); },
                  "exec x: the error stream");
  }

  TEST_CASE("pod-controlled text: the idle probe's answer and a volume's grants") {
    const std::string activity = R"("now":1700000000,"ssh_sessions":1,)";
    std::string why;
    CHECK(internal::ParseDevActivity(Deep(kMaxJsonDepth, activity), &why).has_value());
    for (int depth : {kMaxJsonDepth + 1, kHostileDepth}) {
      CAPTURE(depth);
      CHECK_FALSE(internal::ParseDevActivity(Deep(depth, activity), &why).has_value());
      CHECK_MESSAGE(why.find("nested deeper than 512 levels") != std::string::npos, why);
    }
    auto pvc = [](const std::string& grants) {
      return Json{{"metadata", {{"annotations", {{kSharedWithAnnotation, grants}}}}}};
    };
    CHECK(VolumeGrants(pvc(Deep(kMaxJsonDepth, R"("bob":"ro",)"))).size() == 1);
    CHECK(VolumeGrants(pvc(Deep(kHostileDepth, R"("bob":"ro",)"))).empty());  // grants nothing
  }

  TEST_CASE("YAML (kubeconfig, spec files): yaml-cpp's parser stops first, just under 512") {
    // yaml-cpp 0.7 refuses at 500 levels of its own recursion, 498 containers.
    CHECK(FromYaml(Nested(498, "1")).is_array());
    for (int depth : {499, kMaxJsonDepth + 1, kHostileDepth}) {
      CAPTURE(depth);
      try {
        FromYaml(Nested(depth, "1"));
        FAIL("not refused");
      } catch (const ValidationError& e) {
        CHECK_MESSAGE(std::string(e.what()).find("nested deeper than") != std::string::npos,
                      e.what());
      }
    }
  }
}
