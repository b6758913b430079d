// kubectl-shaped output of the `tfk8s` command (tools/cli/output.hpp): JSONPath templates (the
// examples of kubectl's JSONPath reference page), custom columns, quantities and ages
// (k8s.io/apimachinery's duration tests).
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "output.hpp"
#include "tfk8s/error.hpp"

using namespace tfk8s;
using namespace tfk8s::cli;

namespace {

// The input of https://kubernetes.io/docs/reference/kubectl/jsonpath/.
Json DocsInput() {
  return Json::parse(R"({
    "kind": "List",
    "items": [
      {"kind": "None",
       "metadata": {"name": "127.0.0.1", "labels": {"kubernetes.io/hostname": "127.0.0.1"}},
       "status": {"capacity": {"cpu": "4"},
                  "addresses": [{"type": "LegacyHostIP", "address": "127.0.0.1"}]}},
      {"kind": "None",
       "metadata": {"name": "127.0.0.2"},
       "status": {"capacity": {"cpu": "8"},
                  "addresses": [{"type": "LegacyHostIP", "address": "127.0.0.2"},
                                {"type": "another", "address": "127.0.0.3"}]}}
    ],
    "users": [
      {"name": "myself", "user": {}},
      {"name": "e2e", "user": {"username": "admin", "password": "secret"}}
    ]
  })");
}

std::string Run(const std::string& tmpl, const Json& data = DocsInput(), bool allow = false) {
  return RenderJsonPath(tmpl, data, allow);
}

// The ValidationError a template gives, parsing or running.
ValidationError TemplateError(const std::string& tmpl, const Json& data = DocsInput()) {
  try {
    (void)RenderJsonPath(tmpl, data);
  } catch (const ValidationError& e) {
    return e;
  }
  FAIL("no ValidationError for " << tmpl);
  return ValidationError("", "", "");
}

std::string Reason(const std::string& tmpl, const Json& data = DocsInput()) {
  return TemplateError(tmpl, data).server_message();
}

}  // namespace

TEST_SUITE("cli output") {
  TEST_CASE("jsonpath: the kubectl reference examples") {
    CHECK(Run("{.kind}") == "List");
    CHECK(Run("{['kind']}") == "List");
    CHECK(Run("{..name}") == "127.0.0.1 127.0.0.2 myself e2e");
    CHECK(Run("{.items[*].metadata.name}") == "127.0.0.1 127.0.0.2");
    CHECK(Run("{.users[?(@.name==\"e2e\")].user.password}") == "secret");
    CHECK(Run("{.items[0].metadata.labels.kubernetes\\.io/hostname}") == "127.0.0.1");
    CHECK(Run("{.items[*]['metadata.name', 'status.capacity']}") ==
          "127.0.0.1 127.0.0.2 {\"cpu\":\"4\"} {\"cpu\":\"8\"}");
    CHECK(Run("{range .items[*]}[{.metadata.name}, {.status.capacity}] {end}") ==
          "[127.0.0.1, {\"cpu\":\"4\"}] [127.0.0.2, {\"cpu\":\"8\"}] ");
    CHECK(Run("{.users[-1:].name}") == "e2e");
    CHECK(Run("{.items[0].metadata}") ==
          R"({"labels":{"kubernetes.io/hostname":"127.0.0.1"},"name":"127.0.0.1"})");
  }

  TEST_CASE("jsonpath: text, literals and the range idiom of kubectl get") {
    CHECK(Run("plain text") == "plain text");
    CHECK(Run("name: {.users[0].name}!") == "name: myself!");
    CHECK(Run("{range .items[*]}{.metadata.name}{\"\\t\"}{.status.capacity.cpu}{\"\\n\"}{end}") ==
          "127.0.0.1\t4\n127.0.0.2\t8\n");
    CHECK(Run("{range .users[*]}{.name}{'\\n'}{end}done") == "myself\ne2e\ndone");
    // Nested ranges, and text after a range.
    CHECK(Run("{range .items[*]}{.metadata.name}:{range .status.addresses[*]} {.address}{end};"
              "{end}") == "127.0.0.1: 127.0.0.1;127.0.0.2: 127.0.0.2 127.0.0.3;");
    // A range without {end} runs to the end, as client-go does.
    CHECK(Run("{range .users[*]}<{.name}>") == "<myself><e2e>");
    CHECK(Run("{\"\\u00e9\\x41\\101\"}") ==
          "\xc3\xa9"
          "AA");
  }

  TEST_CASE("jsonpath: indexes, slices, wildcards and unions") {
    Json d = {{"a", {0, 1, 2, 3, 4}}, {"m", {{"x", 1}, {"y", "two"}}}};
    CHECK(Run("{.a[0]}", d) == "0");
    CHECK(Run("{.a[-1]}", d) == "4");
    CHECK(Run("{.a[-2]}", d) == "3");
    CHECK(Run("{.a[1:3]}", d) == "1 2");
    CHECK(Run("{.a[:2]}", d) == "0 1");
    CHECK(Run("{.a[3:]}", d) == "3 4");
    CHECK(Run("{.a[-2:]}", d) == "3 4");
    CHECK(Run("{.a[0:5:2]}", d) == "0 2 4");
    CHECK(Run("{.a[*]}", d) == "0 1 2 3 4");
    CHECK(Run("{.a[2:2]}", d) == "");
    CHECK(Run("{.a[0,3]}", d) == "0 3");
    CHECK(Run("{.a}", d) == "[0,1,2,3,4]");
    CHECK(Run("{.m.*}", d) == "1 two");
    CHECK(Run("{.m['x','y']}", d) == "1 two");
    CHECK(Run("{@.m.x}", d) == "1");
    CHECK(Run("{$.m.y}", d) == "two");
    CHECK(Run("{@}", Json{{"k", "v"}}) == R"({"k":"v"})");
  }

  TEST_CASE("jsonpath: a key holding dots, bracketed") {
    Json labels = {
        {"metadata", {{"labels", {{"app.kubernetes.io/name", "trainer"}, {"tier", "gpu"}}}}}};
    CHECK(Run("{.metadata.labels['app.kubernetes.io/name']}", labels) == "trainer");
    CHECK(Run("{.metadata.labels.app\\.kubernetes\\.io/name}", labels) == "trainer");
    CHECK(Run("{.metadata['labels.tier']}", labels) == "gpu");  // client-go's reading
    CHECK(Reason("{.metadata.labels['a.b']}", labels) == "a.b is not found");
  }

  TEST_CASE("jsonpath: filters compare strings, numbers and booleans") {
    Json pod = Json::parse(R"({"ports": [
        {"name": "http", "containerPort": 80, "tls": false},
        {"name": "metrics", "containerPort": 9090, "tls": true, "path": "/m"},
        {"name": "half", "containerPort": 80.5}]})");
    CHECK(Run("{.ports[?(@.containerPort==80)].name}", pod) == "http");
    CHECK(Run("{.ports[?(@.containerPort!=80)].name}", pod) == "metrics half");
    CHECK(Run("{.ports[?(@.containerPort>80)].name}", pod) == "metrics half");
    CHECK(Run("{.ports[?(@.containerPort<9090)].name}", pod) == "http half");
    CHECK(Run("{.ports[?(@.containerPort<=80)].name}", pod) == "http");
    CHECK(Run("{.ports[?(@.containerPort>=80.5)].name}", pod) == "metrics half");
    CHECK(Run("{.ports[?(@.name=='metrics')].containerPort}", pod) == "9090");
    CHECK(Run("{.ports[?(@.name!=\"http\")].name}", pod) == "metrics half");
    CHECK(Run("{.ports[?(@.name<\"i\")].name}", pod) == "http half");
    CHECK(Run("{.ports[?(@.path)].name}", pod) == "metrics");
    CHECK(Run("{.ports[?(@.tls==true)].name}", pod, true) == "metrics");
    // Kubectl's default (missing keys allowed): an element without the field does not match.
    CHECK(Run("{.ports[?(@.tls==false)].name}", pod, true) == "http");
    // Without it, the missing field is an error, as in client-go.
    CHECK(Reason("{.ports[?(@.tls==false)].name}", pod) == "tls is not found");
    CHECK(Reason("{.ports[?(@.name==80)].name}", pod) == "incompatible types for comparison");
    CHECK(Reason("{.ports[?(@.tls<true)].name}", pod) == "invalid type for comparison");
    CHECK(Reason("{.ports[?(@.containerPort==@.name)].name}", pod) ==
          "incompatible types for comparison");
    CHECK(Reason("{.ports[0][?(@.x)]}", pod) ==
          "object is not array or slice and cannot be filtered");
  }

  TEST_CASE("jsonpath: scalars print as kubectl prints them") {
    Json d = Json::parse(
        R"({"i": 3, "neg": -7, "f": 0.5, "big": 1e6, "small": 1.5e-5, "whole": 123456.0,
            "t": true, "n": null, "s": "a b", "e": {}, "l": []})");
    CHECK(Run("{.i} {.neg} {.f} {.big} {.small} {.whole}", d) == "3 -7 0.5 1e+06 1.5e-05 123456");
    CHECK(Run("{.t}|{.n}|{.s}|{.e}|{.l}", d) == "true|<nil>|a b|{}|[]");
  }

  TEST_CASE("jsonpath: missing keys are an error unless allowed") {
    CHECK(Reason("{.nope}") == "nope is not found");
    CHECK(Reason("{.items[*].spec.x}") == "spec is not found");
    CHECK(Run("{.nope}", DocsInput(), true) == "");
    CHECK(Run("a{.nope.deeper}b", DocsInput(), true) == "ab");
    CHECK(Run("{..nope}", DocsInput(), true) == "");
    CHECK(Reason("{..nope}") == "nope is not found");
    // Out-of-range indexes are errors even when keys may be missing, as in kubectl.
    CHECK(Reason("{.items[2]}") == "array index out of bounds: index 2, length 2");
    CHECK(Reason("{.items[-3]}") == "array index out of bounds: index -1, length 2");
    CHECK(Reason("{.items[0:3]}") == "array index out of bounds: index 2, length 2");
    CHECK(Reason("{.items[1:0]}") == "starting index 1 is greater than ending index 0");
    CHECK(Reason("{.items[0:2:0]}") == "step must be > 0");
    CHECK(Reason("{.kind[0]}") == "string is not array or slice");
  }

  TEST_CASE("jsonpath: syntax errors name the template and the reason") {
    ValidationError e = TemplateError("{.kind");
    CHECK(e.field() == "output");
    CHECK(e.value() == "{.kind");
    CHECK(e.server_message() == "unclosed action");
    CHECK(std::string(e.what()).find("{.kind") != std::string::npos);
    CHECK(Reason("{.items[0}") == "unterminated array");
    CHECK(Reason("{\"abc}") == "unterminated quoted string");
    CHECK(Reason("{.a[?(@.x==\"y\"}") == "unterminated filter");
    CHECK(Reason("{.a[?(@.x==\"y\")}") == "unclosed array expect ]");
    CHECK(Reason("{.items[x]}") == "invalid array index x");
    CHECK(Reason("{.items[1:2:3:4]}") == "invalid array index 1:2:3:4");
    CHECK(Reason("{.a[?(@.x=~\"y\")]}") == "unrecognized filter operator =");
    CHECK(Reason("{#}") == "unrecognized character in action: U+0023 '#'");
    CHECK(Reason("{len(.items)}") == "unrecognized identifier len(");  // no functions
    CHECK(Reason("{foo}") == "unrecognized identifier foo");
    CHECK(Reason("{.items foo}") == "unrecognized identifier foo");
    CHECK(Reason("{end}") == "not in range, nothing to end");
    CHECK(Reason("{....a}") == "invalid multiple recursive descent");
    CHECK(Reason("{\"\\q\"}") == "unquote string \"\\q\" error invalid syntax");
    CHECK(Reason("{.a\n}") == "unclosed action");
    CHECK(TemplateError("").server_message() == "template format specified but no template given");
  }

  TEST_CASE("jsonpath: jsonpath-as-json prints each action's results as a JSON array") {
    JsonPath p = JsonPath::Parse("{.users[*].name}");
    CHECK(p.Execute(DocsInput(), false, true) == "[\n    \"myself\",\n    \"e2e\"\n]\n");
    CHECK(p.text() == "{.users[*].name}");
    CHECK(p.FindAll(DocsInput()) == std::vector<Json>{"myself", "e2e"});
  }

  TEST_CASE("custom columns: the spec as kubectl reads it") {
    auto cols = ParseCustomColumns(
        "NAME:.metadata.name,RSRC:metadata.resourceVersion,"
        "A:{.a},B:{b},URL:.spec['x:y']");
    REQUIRE(cols.size() == 5);
    CHECK(cols[0].header == "NAME");
    CHECK(cols[0].path == "{.metadata.name}");
    CHECK(cols[1].path == "{.metadata.resourceVersion}");
    CHECK(cols[2].path == "{.a}");
    CHECK(cols[3].path == "{.b}");
    CHECK(cols[4].path == "{.spec['x:y']}");  // Split at the first ':' only.
    auto reason = [](std::string_view spec) {
      try {
        (void)ParseCustomColumns(spec);
      } catch (const ValidationError& e) {
        CHECK(e.field() == "output");
        return e.server_message();
      }
      FAIL("no ValidationError for " << spec);
      return std::string();
    };
    CHECK(reason("") == "custom-columns format specified but no custom columns given");
    CHECK(reason("NAME:.a,AGE") ==
          "unexpected custom-columns spec: AGE, expected <header>:<json-path-expr>");
    CHECK(reason("A:{.x").find("unexpected path string {.x") == 0);
    CHECK(reason("A:.x[") == "column A: unterminated array");
  }

  TEST_CASE("custom columns: the kubectl layout, <none> and several values") {
    // kubectl's documented example: NAME:.metadata.name,RSRC:.metadata.resourceVersion.
    Json pod = {{"metadata", {{"name", "submit-queue"}, {"resourceVersion", "610995"}}}};
    CHECK(CustomColumnsTable("NAME:.metadata.name,RSRC:.metadata.resourceVersion", {pod}) ==
          "NAME           RSRC\n"
          "submit-queue   610995\n");
    Json a = Json::parse(R"({"metadata": {"name": "a"},
        "spec": {"containers": [{"image": "tf:2"}, {"image": "sidecar:1"}]},
        "status": {"phase": "Running"}})");
    Json b = Json::parse(R"({"metadata": {"name": "much-longer-name"},
        "spec": {"containers": [{"image": "tf:2"}]}})");
    const std::string spec =
        "NAME:.metadata.name,IMAGES:.spec.containers[*].image,PHASE:status.phase";
    CHECK(CustomColumnsTable(spec, {a, b}) ==
          "NAME               IMAGES           PHASE\n"
          "a                  tf:2,sidecar:1   Running\n"
          "much-longer-name   tf:2             <none>\n");
    // Headers off; a List's items are rows; the minimum width is 10.
    Json list = {{"kind", "List"}, {"items", {a}}};
    CHECK(CustomColumnsTable("N:.metadata.name,P:.status.phase", {list}, true) ==
          "a         Running\n");
    CHECK(CustomColumnsTable("N:.metadata.name", {}).empty());
    // Width counts characters, not bytes.
    CHECK(AlignColumns({{"NAME", "X"}, {"\xc3\xa9t\xc3\xa9-caf\xc3\xa9", "y"}}) ==
          "NAME       X\n"
          "\xc3\xa9t\xc3\xa9-caf\xc3\xa9   y\n");
  }

  TEST_CASE("quantities print as resource.Quantity does") {
    CHECK(CpuQuantityText(2) == "2");
    CHECK(CpuQuantityText(2.7) == "2700m");
    CHECK(CpuQuantityText(0.5) == "500m");
    CHECK(CpuQuantityText(1.5) == "1500m");
    CHECK(CpuQuantityText(64) == "64");
    CHECK(CpuQuantityText(0) == "0");
    CHECK(CpuQuantityText(0.0001) == "1m");  // rounded up, as Kubernetes rounds
    CHECK(CpuQuantityText(0.25) == "250m");
    CHECK_THROWS_AS(CpuQuantityText(std::nan("")), ValidationError);
    CHECK(ByteQuantityText(17179869184) == "16Gi");
    CHECK(ByteQuantityText(536870912) == "512Mi");
    CHECK(ByteQuantityText(1610612736) == "1536Mi");
    CHECK(ByteQuantityText(1024) == "1Ki");
    CHECK(ByteQuantityText(1500000000) == "1500000000");
    CHECK(ByteQuantityText(1536) == "1536");
    CHECK(ByteQuantityText(512) == "512");
    CHECK(ByteQuantityText(1000) == "1k");
    CHECK(ByteQuantityText(0) == "0");
    CHECK(ByteQuantityText(1LL << 40) == "1Ti");
  }

  TEST_CASE("HumanDuration as kubectl's AGE") {
    using namespace std::chrono;
    auto h = [](auto d) { return HumanDuration(duration_cast<nanoseconds>(d)); };
    // k8s.io/apimachinery/pkg/util/duration's tests.
    CHECK(h(seconds(1)) == "1s");
    CHECK(h(seconds(70)) == "70s");
    CHECK(h(seconds(190)) == "3m10s");
    CHECK(h(minutes(70)) == "70m");
    CHECK(h(hours(47)) == "47h");
    CHECK(h(hours(49)) == "2d1h");
    CHECK(h(hours(8 * 24 + 2)) == "8d");
    CHECK(h(hours(367 * 24)) == "367d");
    CHECK(h(hours(365 * 2 * 24 + 25)) == "2y1d");
    CHECK(h(hours(365 * 8 * 24 + 2)) == "8y");
    // The boundaries.
    CHECK(h(seconds(-2)) == "<invalid>");
    CHECK(h(milliseconds(-1999)) == "0s");
    CHECK(h(seconds(-1)) == "0s");
    CHECK(h(seconds(0)) == "0s");
    CHECK(h(milliseconds(1999)) == "1s");
    CHECK(h(seconds(119)) == "119s");
    CHECK(h(seconds(120)) == "2m");
    CHECK(h(seconds(599)) == "9m59s");
    CHECK(h(seconds(600)) == "10m");
    CHECK(h(minutes(179) + seconds(59)) == "179m");
    CHECK(h(minutes(180)) == "3h");
    CHECK(h(hours(7) + minutes(59)) == "7h59m");
    CHECK(h(hours(8) + minutes(59)) == "8h");
    CHECK(h(hours(48)) == "2d");
    CHECK(h(hours(8 * 24 - 1)) == "7d23h");
    CHECK(h(hours(365 * 2 * 24 - 1)) == "729d");
    CHECK(h(hours(365 * 2 * 24)) == "2y");
    CHECK(h(hours(365 * 8 * 24 - 24)) == "7y364d");
    CHECK(h(hours(365 * 20 * 24 + 400 * 24)) == "21y");
  }

  TEST_CASE("Age of a creationTimestamp") {
    using namespace std::chrono;
    const auto created = sys_days{year{2024} / 5 / 1} + hours(10);
    CHECK(Age("2024-05-01T10:00:00Z", created + hours(3) + minutes(5)) == "3h5m");
    CHECK(Age("2024-05-01T12:00:00+02:00", created + seconds(30)) == "30s");
    CHECK(Age("2024-05-01T05:30:00-04:30", created + minutes(5)) == "5m");
    CHECK(Age("2024-05-01T09:59:59.500Z", created) == "0s");
    CHECK(Age("2024-05-01T10:00:05Z", created) == "<invalid>");
    CHECK(Age("2024-04-01T10:00:00Z", created) == "30d");
    CHECK(Age("", created) == "<unknown>");
    CHECK(Age("yesterday", created) == "<unknown>");
    CHECK(Age("2024-05-01 10:00:00Z", created) == "<unknown>");
  }
}
