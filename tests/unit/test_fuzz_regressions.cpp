// Regression tests for bugs found by the libFuzzer harnesses (tests/fuzz, tools/fuzz.sh). Each
// crashing input is also in the harness's seed corpus (tests/fuzz/corpus/<harness>/).

#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "auth/exec_plugin.hpp"
#include "client/exec.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/quantity.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"
#include "tfk8s/yaml.hpp"
#include "workloads/devinstance_internal.hpp"
#include "workloads/start_script.hpp"

namespace {

using tfk8s::FromYaml;
using tfk8s::FromYamlDocuments;
using tfk8s::Quantity;
using tfk8s::ScheduledJobSpec;
using tfk8s::TFClusterSpec;
using tfk8s::ToYaml;
using tfk8s::ValidationError;
using Json = nlohmann::json;

// Runs `f` and returns how long it took; the YAML cases below used to hang or explode.
template <typename F>
std::chrono::milliseconds Timed(F&& f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

}  // namespace

TEST_CASE("fuzz yaml: an alias inside its own anchor is refused, not a stack overflow") {
  CHECK_THROWS_AS(FromYaml("a: &a [*a]\n"), ValidationError);
  CHECK_THROWS_AS(FromYaml("&m {k: *m}\n"), ValidationError);
  // A legitimate alias still works, also as a key.
  CHECK(FromYaml("a: &x [1, 2]\nb: *x\n") == Json{{"a", {1, 2}}, {"b", {1, 2}}});
  CHECK(FromYaml("k: &k name\n*k : v\n") == Json{{"k", "name"}, {"name", "v"}});
}

TEST_CASE("fuzz yaml: an alias bomb is refused quickly") {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    std::string prev(1, static_cast<char>(c - 1));
    bomb += std::string(1, c) + ": &" + std::string(1, c) + " [";
    for (int i = 0; i < 9; ++i) bomb += (i ? ", *" : "*") + prev;
    bomb += "]\n";
  }
  auto took = Timed([&] { CHECK_THROWS_AS(FromYaml(bomb), ValidationError); });
  CHECK(took < std::chrono::seconds(5));  // 9^10 strings before the fix: minutes, gigabytes
}

TEST_CASE("fuzz yaml: a stray comma and other malformed streams end with an error, not a hang") {
  // yaml-cpp 0.7's LoadAll loops forever on these (jbeder/yaml-cpp#1040).
  for (const char* text : {",]", ",", ", {\"a\": 1}], \"n\": 1}", "[1],"}) {
    CAPTURE(text);
    auto took = Timed([&] { CHECK_THROWS_AS(FromYamlDocuments(text), ValidationError); });
    CHECK(took < std::chrono::seconds(5));
  }
  // Empty documents are still skipped.
  CHECK(FromYamlDocuments("---\n---\na: 1\n---\n").size() == 1);
}

TEST_CASE("fuzz yaml: strings that are not UTF-8 are refused (JSON could not hold them)") {
  CHECK_THROWS_AS(FromYaml("a: \"b\xa2\"\n"), ValidationError);
  CHECK_THROWS_AS(FromYaml("\xc0\xaf: 1\n"), ValidationError);          // an overlong '/' as a key
  CHECK_THROWS_AS(FromYaml("a: \xef\xbf\xbf\n"), ValidationError);      // U+FFFF
  CHECK_THROWS_AS(FromYaml("a: \"\xef\xb7\xae\"\n"), ValidationError);  // U+FDEE
  CHECK(FromYaml("a: \"\xc3\xa9\"\n") == Json{{"a", "\xc3\xa9"}});
}

TEST_CASE("fuzz yaml: numbers are read as written, never clamped or read as hex") {
  CHECK(FromYaml("k: !!str 12\n")["k"] == "12");
  CHECK(FromYaml("n: 18446744073709551615\n")["n"].get<std::uint64_t>() == 18446744073709551615u);
  CHECK(FromYaml("n: 99999999999999999999\n")["n"].is_number_float());  // not INT64_MAX
  CHECK(FromYaml("n: -9223372036854775809\n")["n"].is_number_float());
  CHECK(FromYaml("n: 0x1F\n")["n"] == "0x1F");
  CHECK(FromYaml("n: 1e999\n")["n"] == "1e999");  // beyond double: kept as text, not inf
  CHECK(FromYaml("n: -12\n")["n"] == -12);
  CHECK(FromYaml("n: 2.5\n")["n"] == 2.5);
}

TEST_CASE("fuzz yaml: ToYaml output reads back the same (markers, NUL, control characters)") {
  for (const std::string& s :
       {std::string("..."), std::string("---"), std::string("--- x"), std::string("a\0b", 3),
        std::string("t\x01\n"), std::string("tab\there\n"), std::string("bell\x07")}) {
    CAPTURE(s);
    Json doc = {{"s", s}};
    CHECK(FromYaml(ToYaml(doc)) == doc);
    Json top = s;
    CHECK(FromYaml(ToYaml(top)) == top);
  }
}

TEST_CASE("fuzz quantity: sums and differences near the range end throw, never overflow") {
  // 8.9e28 units is in range; twice it exceeds what 128 bits hold in nano units.
  Quantity big = Quantity::Parse("88888888888888898888880008888");
  Quantity sum = big;
  CHECK_THROWS_AS(sum += big, ValidationError);
  CHECK(sum == big);  // unchanged on failure
  Quantity negative = Quantity::Parse("-88888888888888898888880008888");
  Quantity difference = big;
  CHECK_THROWS_AS(difference -= negative, ValidationError);
  CHECK_THROWS_AS((void)(negative - big), ValidationError);
  CHECK((big - big).IsZero());
}

TEST_CASE("fuzz specs: integer fields take whole numbers in range only (1e300 was undefined)") {
  for (const char* value : {"1e300", "1.5", "-1e300", "4294967296", "18446744073709551615"}) {
    CAPTURE(value);
    Json spec = Json::parse(std::string(R"({"name":"t","worker":{"replicas":)") + value + "}}");
    try {
      TFClusterSpec::FromJson(spec);
      FAIL("accepted worker.replicas = " << value);
    } catch (const ValidationError& e) {
      CHECK(e.field() == "worker.replicas");
    }
    Json job = Json::parse(
        std::string(R"({"name":"t","image":"i","entryPath":"a.py","backoffLimit":)") + value + "}");
    CHECK_THROWS_AS(ScheduledJobSpec::FromJson(job), ValidationError);
  }
  CHECK(TFClusterSpec::FromJson(Json::parse(R"({"name":"t","worker":{"replicas":3}})"))
            .worker.replicas == 3);
}

TEST_CASE("fuzz tfcluster: a million replicas is refused at once, not rendered") {
  Json spec = Json::parse(R"({"name":"t","worker":{"replicas":1111113}})");
  try {
    TFClusterSpec::FromJson(spec).Validate();
    FAIL("accepted 1111113 replicas");
  } catch (const ValidationError& e) {
    CHECK(e.field() == "worker.replicas");
  }
  spec["worker"]["replicas"] = 999;
  spec["ps"] = {{"replicas", 1}};
  CHECK_NOTHROW(TFClusterSpec::FromJson(spec).Validate());
  spec["ps"]["replicas"] = 2;  // 1001 in all
  CHECK_THROWS_AS(TFClusterSpec::FromJson(spec).Validate(), ValidationError);
}

TEST_CASE(
    "fuzz yaml: keys are quoted like values (a key starting with '... ' ended the document)") {
  Json doc = {{"... \"n   server", "https://10.1.2.04"},
              {"--- x", 1},
              {"true", "yes"},
              {"json", Json::array({"flow", {{"a", 1}}})}};
  CHECK(FromYaml(ToYaml(doc)) == doc);
}

TEST_CASE(
    "fuzz quantity: a binary-SI value that is no multiple of 1024 prints as Kubernetes does") {
  // Kubernetes: resource.MustParse("7687.5Ki").String() == "7872000", which reads back as
  // decimal SI and prints "7872k"; the value never changes.
  const Quantity q = Quantity::Parse("7687.5Ki");
  CHECK(q.ToString() == "7872000");
  CHECK(Quantity::Parse(q.ToString()) == q);
  CHECK(Quantity::Parse(q.ToString()).ToString() == "7872k");
  CHECK(Quantity::Parse("7872k") == q);
}

TEST_CASE("fuzz exec_credential: an expiration beyond system_clock's years is refused, not UB") {
  using tfk8s::internal::ParseRfc3339;
  // Converting year 9999 (or 0001) to system_clock's nanoseconds overflowed (signed, UB).
  CHECK_FALSE(ParseRfc3339("9999-12-31T23:59:59Z"));
  CHECK_FALSE(ParseRfc3339("0001-01-01T00:00:00Z"));
  CHECK_FALSE(ParseRfc3339("2262-04-12T00:00:00Z"));
  CHECK(ParseRfc3339("2261-12-31T23:59:59.999999999Z").has_value());
  CHECK(ParseRfc3339("1678-01-01T00:00:00Z").has_value());
  tfk8s::ExecConfig exec;
  exec.api_version = "client.authentication.k8s.io/v1";
  try {
    (void)tfk8s::internal::ParseExecCredential(
        R"({"apiVersion":"client.authentication.k8s.io/v1",)"
        R"("status":{"token":"t-SECRET","expirationTimestamp":"9999-12-31T23:59:59Z"}})",
        exec);
    FAIL("a year-9999 expiration was accepted");
  } catch (const tfk8s::ConfigError& e) {
    CHECK(e.field() == "status.expirationTimestamp");
    CHECK(std::string(e.what()).find("SECRET") == std::string::npos);
  }
}

TEST_CASE("fuzz dev_activity: a probe's clock or times beyond system_clock's are refused, not UB") {
  using tfk8s::internal::ParseDevActivity;
  std::string why;
  // Seconds since the epoch beyond about 9.2e9 overflowed the conversion to nanoseconds.
  CHECK_FALSE(ParseDevActivity(R"({"now":9223372036854775807})", &why));
  CHECK(why == "the clock in the answer is out of range");
  CHECK_FALSE(ParseDevActivity(R"({"now":100,"code_server_heartbeat":-9300000000})", &why));
  CHECK(why == "code-server's heartbeat is out of range");
  CHECK_FALSE(
      ParseDevActivity(R"({"now":100,"jupyter":{"last_activity":"9999-12-31T23:59:59Z"}})", &why));
  CHECK(why == "Jupyter's last activity is not an RFC 3339 time");
  auto a = ParseDevActivity(R"({"now":9000000000,"code_server_heartbeat":-9000000000})", &why);
  REQUIRE(a.has_value());
  CHECK(a->Idle().count() >= 0);
}

TEST_CASE("fuzz exec_channel: Status fields of another type are a ServerError, not a JSON error") {
  using tfk8s::internal::ExitCodeFromStatus;
  // Json::value("reason", "") threw nlohmann's type_error on a non-string reason or message.
  CHECK_THROWS_AS(
      ExitCodeFromStatus(R"({"status":"Failure","reason":"NonZeroExitCode","details":)"
                         R"({"causes":[{"reason":7},{"reason":"ExitCode","message":[3]}]}})",
                         "exec"),
      tfk8s::ServerError);
  CHECK(ExitCodeFromStatus(R"({"reason":"NonZeroExitCode","details":{"causes":[{"reason":1},)"
                           R"({"reason":"ExitCode","message":"3"}]}})",
                           "exec") == 3);
}

TEST_CASE("fuzz credentials_secret: a Secret that is not an object holds no credentials") {
  // Json::value("data", …) threw nlohmann's type_error on an array or a string.
  CHECK_FALSE(tfk8s::internal::CredentialsFromSecret(Json::array({{{"data", Json::object()}}})));
  CHECK_FALSE(tfk8s::internal::CredentialsFromSecret(Json("secret")));
  CHECK_FALSE(tfk8s::internal::DecodeCredentialsSecret(Json(nullptr)));
}
